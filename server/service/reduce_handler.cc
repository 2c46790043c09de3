// Reduce: client streaming in, one response out. Each chunk folds into the session's partial.
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/folding_call.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/resident_feed.h"
#include "service/shared_memory.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// Reduce is a raw RPC like Scan (wire.h): each chunk is gathered once into a payload block, which
// the cuda engine uploads from directly. Its one response is encoded when the call completes.
inline constexpr char kReduceRequest[] = "the ReduceRequest";
using ReduceWire = RawWire<ReduceChunk, v1::ReduceResponse, kReduceRequest, v1::ReduceResponse>;

class ReduceCall final : public FoldingCall<ReduceChunk, v1::ReduceResponse, engine::ReduceSession, ReduceWire> {
 public:
  ReduceCall(CallContext ctx, grpc::CallbackServerContext* rpc, grpc::ByteBuffer* response)
      : FoldingCall(std::move(ctx), rpc, response, "reduce") {}

 protected:
  grpc::Status OnHeader(const v1::ReduceHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_); !s.ok()) return s;
    if (auto s = NarrowStreamedOnly(narrow_, header.has_shared_memory(), header.has_device_memory()); !s.ok()) return s;
    dtype_ = spec_.dtype;
    const std::optional<uint64_t> count = DeclaredCount(header);
    checker_.emplace(spec_.dtype, narrow_, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    if (header.has_resident()) {
      const ResidentConflicts conflicts{header.has_shared_memory(), header.has_device_memory(), header.has_lanes(),
                                        false};
      return OpenResident(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, conflicts,
                          &resident_.emplace(), &device_.emplace());
    }
    if (header.has_device_memory()) {
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), header.has_shared_memory(),
                        engine::SizeOf(spec_.dtype), SharedNeeds{}, count, &device_.emplace());
    }
    if (header.has_shared_memory()) {
      return OpenShared(*ctx_.regions, header.shared_memory(), engine::SizeOf(spec_.dtype), SharedNeeds{}, count,
                        ctx_.options->max_request_bytes, &shared_.emplace());
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const ReduceChunk& req, uint64_t index) override {
    if (shared_) return NoInlinePayload(req.data.size(), "data", index);
    if (resident_) return NoInlinePayload(req.data.size(), "data", index, "header.resident");
    if (device_) return NoInlinePayload(req.data.size(), "data", index, "header.device_memory");
    return checker_->Add(req.data.size(), "data", index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    session_ = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewReduce(spec_); });
  }

  grpc::Status Complete(std::vector<v1::ReduceResponse>&) override {
    if (shared_) {
      if (auto s = ReduceShared(); !s.ok()) return s;
    } else if (resident_ && narrow_) {  // no device path: fed chunk by chunk, widened as streamed
      ResidentFeed feed(*ctx_.resident, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);
      auto s = feed.Each([this] { return Cancelled(); },
                         [&](Payload values, Payload) { Fold(values.data(), values.size()); });
      if (!s.ok()) return s;
      bytes_in_ = 0;  // nothing crossed the wire
    } else if (device_) {  // device memory, or a resident array's
      FoldOnDevice(device_->in, device_->elements);
      if (resident_) bytes_in_ = 0;
    } else if (auto s = checker_->Finish(); !s.ok()) {
      return s;
    }
    unsigned char value[8] = {};
    session_->Result(value);
    size_t size = engine::SizeOf(spec_.dtype);
    *response_.mutable_value() = ElementToScalar(value, spec_.dtype);
    if (narrow_ && narrow_->half_out) {  // the float32 value rounded once to float16
      float f;
      std::memcpy(&f, value, 4);
      const uint16_t h = FloatToHalf(f);
      std::memcpy(value, &h, 2);
      size = 2;
      response_.mutable_value()->set_float_value(HalfToFloat(h));
    }
    response_.set_raw_value(value, size);
    bytes_out_ += size;
    FillFinal(response_, processed_, session_->algorithm());
    SetResponse(response_);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} n={} algorithm={} engine={}", engine::Name(spec_.op),
                       AccumulatedName(narrow_, spec_.dtype), processed_, session_ ? session_->algorithm() : "-",
                       ctx_.engine->name());
  }

  // Lanes: every lane answers with the whole array's value, which Complete wrote on the owner.
  void CopyFinalFrom(const StreamingCall& owner) override {
    response_ = static_cast<const ReduceCall&>(owner).response_;
    SetResponse(response_);
  }

 private:
  grpc::Status ReduceShared() {
    const size_t size = engine::SizeOf(spec_.dtype);
    auto status = ForEachPiece(shared_->elements, size, [this] { return Cancelled(); }, [&](uint64_t first, uint64_t n) {
      session_->Process(shared_->in.data() + first * size, n, stages_);
      ++chunks_;
    });
    if (!status.ok()) return status;
    processed_ = shared_->elements;
    bytes_in_ = processed_ * size;
    return CheckIntact(*shared_);
  }

  v1::ReduceResponse response_;
  std::optional<SharedRanges> shared_;  // header.shared_memory: the mapped ranges
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges (header.resident: the array's)
  std::optional<ResidentCall> resident_;  // header.resident
  engine::ReduceSpec spec_;
  std::optional<ChunkChecker> checker_;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* StartReduce(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                       grpc::ByteBuffer* response) {
  return StartCall<ReduceCall>(std::move(ctx), rpc, response);
}

}  // namespace gpuscan::server
