// Histogram: client streaming in, one response out. Each chunk adds to the session's counters
// (O(bins) memory whatever the array's length); the response carries the counts and the edges.
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "engine/histogram.h"
#include "service/device_memory.h"
#include "service/folding_call.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// Histogram is a raw RPC like Reduce (wire.h): each chunk is gathered once into a payload block,
// which the cuda engine uploads from directly. Its one response is encoded when the call completes.
inline constexpr char kHistogramRequest[] = "the HistogramRequest";
using HistogramWire = RawWire<HistogramChunk, v1::HistogramResponse, kHistogramRequest, v1::HistogramResponse>;

class HistogramCall final
    : public FoldingCall<HistogramChunk, v1::HistogramResponse, engine::HistogramSession, HistogramWire> {
 public:
  HistogramCall(CallContext ctx, grpc::CallbackServerContext* rpc, grpc::ByteBuffer* response)
      : FoldingCall(std::move(ctx), rpc, response, "histogram") {}

 protected:
  grpc::Status OnHeader(const v1::HistogramHeader& header) override {
    if (auto s = ToEngine(header, engine::kMaxHistogramBins, &spec_, &narrow_); !s.ok()) return s;
    if (auto s = NarrowStreamedOnly(narrow_, false, header.has_device_memory()); !s.ok()) return s;
    dtype_ = spec_.dtype;
    const std::optional<uint64_t> count = DeclaredCount(header);
    checker_.emplace(spec_.dtype, narrow_, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    if (header.has_resident()) {
      // Narrow dtypes too: read back in chunks and folded as a streamed call's (Complete).
      const ResidentConflicts conflicts{false, header.has_device_memory(), false, false};
      return OpenResident(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, conflicts,
                          &resident_.emplace(), &device_.emplace());
    }
    if (header.has_device_memory()) {
      SharedNeeds needs;
      needs.rpc = "Histogram";
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), false, engine::SizeOf(spec_.dtype), needs,
                        count, &device_.emplace());
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const HistogramChunk& req, uint64_t index) override {
    if (resident_) return NoInlinePayload(req.data.size(), "data", index, "header.resident");
    if (device_) return NoInlinePayload(req.data.size(), "data", index, "header.device_memory");
    return checker_->Add(req.data.size(), "data", index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    session_ = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewHistogram(spec_); });
  }

  grpc::Status Complete(std::vector<v1::HistogramResponse>&) override {
    if (resident_ && narrow_) {
      const engine::ResidentMemory& in = *resident_->values->memory;
      ReadBack(in, device_->elements * narrow_->size, narrow_->size, ctx_.options->chunk_bytes, *ctx_.payloads,
               [&](Payload p, uint64_t) { Fold(p.data(), p.size()); });
      bytes_in_ = 0;  // nothing crossed the wire
    } else if (device_) {  // device memory, or a resident array's
      FoldOnDevice(device_->in, device_->elements);
      if (resident_) bytes_in_ = 0;
    } else if (auto s = checker_->Finish(); !s.ok()) {
      return s;
    }
    const std::vector<uint64_t> slots = session_->Result();
    const size_t bins = spec_.edges.size() - 1;
    // Raw little-endian uint64 / float64: the host's layout on every platform we build for.
    v1::HistogramResponse response;
    response.set_counts(slots.data(), bins * sizeof(uint64_t));
    response.set_edges(spec_.edges.data(), spec_.edges.size() * sizeof(double));
    response.set_below(slots[bins + engine::kHistogramBelow]);
    response.set_above(slots[bins + engine::kHistogramAbove]);
    response.set_nan_count(slots[bins + engine::kHistogramNan]);
    bytes_out_ += response.counts().size() + response.edges().size();
    FillFinal(response, processed_, session_->algorithm());
    SetResponse(response);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("dtype={} bins={} even={} n={} algorithm={} engine={}",
                       narrow_ ? NarrowName(narrow_->wire) : engine::Name(spec_.dtype),
                       spec_.edges.empty() ? 0 : spec_.edges.size() - 1, spec_.even, processed_,
                       session_ ? session_->algorithm() : "-", ctx_.engine->name());
  }

 private:
  engine::HistogramSpec spec_;
  std::optional<ChunkChecker> checker_;
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened range (header.resident: the array's)
  std::optional<ResidentCall> resident_;  // header.resident
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* StartHistogram(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                          grpc::ByteBuffer* response) {
  return StartCall<HistogramCall>(std::move(ctx), rpc, response);
}

}  // namespace gpuscan::server
