// SegmentedScan: bidirectional streaming like Scan. Values and their keys (or head bytes),
// matched by element position, are scanned per segment as both arrive; each run of elements
// that has both goes back as one response, in order; the final response carries Timing.
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/flags_aligner.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/streaming_call.h"
#include "service/validate.h"
#include "service/wire.h"

namespace gpuscan::server {
namespace {

// SegmentedScan is a raw RPC (wire.h): a request's values and keys are gathered once into
// payloads (registered with the cuda engine, which uploads from them with no staging copy), and
// each scanned run goes back from a payload by reference.
inline constexpr char kSegmentedScanRequest[] = "the SegmentedScanRequest";
using SegmentedScanWire = RawWire<SegmentedScanChunk, ScanReply, kSegmentedScanRequest>;

class SegmentedScanCall final
    : public StreamingCall<SegmentedScanChunk, ScanReply, grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                           SegmentedScanWire> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::SegmentedScanHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_); !s.ok()) return s;
    if (auto s = NarrowStreamedOnly(narrow_, false, header.has_device_memory()); !s.ok()) return s;
    const std::optional<uint64_t> count = DeclaredCount(header);
    const PairedChecker::Side side = SegmentedScanSide(spec_);
    checker_.emplace(spec_.dtype, narrow_, side, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    elem_size_ = engine::SizeOf(spec_.dtype);
    aligner_.emplace(WireSize(narrow_, spec_.dtype), side.size);
    if (header.has_device_memory()) {
      SharedNeeds needs;
      needs.scan_output = true;
      needs.key_bytes = side.size;
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), false, elem_size_, needs, count,
                        &device_.emplace());
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const SegmentedScanChunk& req, uint64_t index) override {
    if (device_) {
      if (auto s = NoInlinePayload(req.data.size(), "data", index, "header.device_memory"); !s.ok()) return s;
      return NoInlinePayload(req.keys.size(), "keys", index, "header.device_memory");
    }
    return checker_->Add(req.data.size(), req.keys.size(), index);
  }

  void Open() override {
    session_ = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewSegmentedScan(spec_); });
  }

  void Process(SegmentedScanChunk& req, std::vector<ScanReply>& out) override {
    bytes_in_ += req.data.size() + req.keys.size();
    aligner_->Add(req.data, req.keys, [&](const char* values, const uint8_t* keys, uint64_t n) {
      ScanReply& resp = out.emplace_back();
      resp.data = ctx_.payloads->Take(n * elem_size_);
      Payload wide;  // a narrow input's values widened, a FLOAT16 output rounded once (service/narrow.h)
      session_->Process(EngineElements(narrow_, spec_.dtype, values, n, *ctx_.payloads, &wide), keys,
                        resp.data.data(), n, stages_);
      if (narrow_ && narrow_->half_out) {
        RoundToHalf(resp.data.data(), resp.data.data(), n);  // in place, front to back
        resp.data.Truncate(n * 2);
      }
      resp.msg.set_offset(processed_);
      processed_ += n;
      bytes_out_ += resp.data.size();
      ++chunks_;
    });
  }

  grpc::Status Complete(std::vector<ScanReply>& out) override {
    // The array in device memory runs now; a streamed one has run.
    if (const grpc::Status s = device_ ? ScanDevice() : checker_->Finish(); !s.ok()) return s;
    FillFinal(out.emplace_back().msg, processed_, session_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} kind={} segments={} n={} algorithm={} engine={}", engine::Name(spec_.op),
                       AccumulatedName(narrow_, spec_.dtype), spec_.exclusive ? "exclusive" : "inclusive",
                       spec_.heads ? std::string("heads") : "keys:" + std::string(engine::Name(spec_.key_dtype)),
                       processed_, session_ ? session_->algorithm() : "-", ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

 private:
  // header.device_memory: the whole array at once, values and keys in the caller's device memory.
  grpc::Status ScanDevice() {
    session_->ProcessDevice(device_->in, device_->keys, device_->out, device_->elements, stages_);
    processed_ = device_->elements;
    bytes_in_ = processed_ * (elem_size_ + SegmentedScanSide(spec_).size);
    bytes_out_ = processed_ * elem_size_;
    ++chunks_;
    return grpc::Status::OK;
  }

  engine::SegmentedScanSpec spec_;
  std::optional<NarrowInput> narrow_;   // a narrow header.dtype: what each run is widened from
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges
  std::optional<PairedChecker> checker_;
  std::unique_ptr<engine::SegmentedScanSession> session_;
  size_t elem_size_ = 4;
  std::optional<FlagsAligner> aligner_;  // matches keys with values by position
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartSegmentedScan(
    CallContext ctx, grpc::CallbackServerContext* rpc) {
  return StartCall<SegmentedScanCall>(std::move(ctx), rpc, "segmented_scan");
}

}  // namespace gpuscan::server
