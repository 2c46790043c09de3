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
#include "service/resident_call.h"
#include "service/resident_feed.h"
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
    if (header.has_resident()) return OpenResidentCall(header, count);
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
    if (resident_) {
      if (auto s = NoInlinePayload(req.data.size(), "data", index, "header.resident"); !s.ok()) return s;
      return NoInlinePayload(req.keys.size(), "keys", index, "header.resident");
    }
    if (device_) {
      if (auto s = NoInlinePayload(req.data.size(), "data", index, "header.device_memory"); !s.ok()) return s;
      return NoInlinePayload(req.keys.size(), "keys", index, "header.device_memory");
    }
    return checker_->Add(req.data.size(), req.keys.size(), index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

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
    // The array in device memory or on the server runs now; a streamed one has run.
    v1::ArrayInfo kept;
    const grpc::Status s = resident_ ? ScanResident(out, &kept) : device_ ? ScanDevice() : checker_->Finish();
    if (!s.ok()) return s;
    v1::ScanResponse& final = out.emplace_back().msg;
    FillFinal(final, processed_, session_->algorithm());
    if (!kept.id().empty()) *final.mutable_array() = std::move(kept);
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

  // header.resident: the values and their keys or head flags (checked and held), and the
  // device-memory path pointed at them.
  grpc::Status OpenResidentCall(const v1::SegmentedScanHeader& header, std::optional<uint64_t> count) {
    const ResidentConflicts conflicts{false, header.has_device_memory(), false, true};
    ResidentCall& call = resident_.emplace();
    if (auto s = OpenResidentInputs(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, WantsOf(header), conflicts,
                                    &call);
        !s.ok()) {
      return s;
    }
    DeviceRanges& d = device_.emplace();
    d.in = call.values->memory->data();
    d.keys = (call.keys ? call.keys : call.flags)->memory->data();
    d.elements = call.values->count;
    d.engine = call.values->memory->engine;
    d.device = call.values->memory->device;
    return grpc::Status::OK;
  }

  // Whether the session scans device memory: a call of n = 0 does nothing where it does and
  // throws kUnimplemented where it does not (float SUM/PRODUCT's canonical tree: its pairs are
  // packed on the host; the cpu engine's segmented scans).
  bool HasDevicePath() {
    try {
      session_->ProcessDevice(nullptr, nullptr, nullptr, 0, stages_);
    } catch (const engine::Error& e) {
      if (e.code() != engine::ErrorCode::kUnimplemented) throw;
      return false;
    }
    return true;
  }

  // header.resident: on the device path where the session has one (as ScanResident in
  // scan_handler.cc); else fed to Process chunk by chunk (resident_feed.h), bit for bit the
  // streamed call's (a narrow input widened as a streamed one is).
  grpc::Status ScanResident(std::vector<ScanReply>& out, v1::ArrayInfo* kept) {
    ResidentFeed feed(*ctx_.resident, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);
    const int dtype = ResultDType(narrow_, spec_.dtype);
    const uint64_t bytes = device_->elements * WireDTypeSize(dtype);
    if (!narrow_ && HasDevicePath()) {
      std::shared_ptr<engine::ResidentMemory> result;
      if (auto s = ResidentOutput(*ctx_.resident, *resident_, bytes, &result); !s.ok()) return s;
      device_->out = result->data();
      ScanDevice();
      bytes_in_ = bytes_out_ = 0;
      feed.KeepOrReadBack(std::move(result), dtype, processed_, out, &bytes_out_, kept);
      return grpc::Status::OK;
    }
    const grpc::Status status = FeedOneArray(
        feed, [this] { return Cancelled(); }, dtype, bytes, out,
        [&](Payload values, Payload keys, std::vector<ScanReply>& made) {
          SegmentedScanChunk req;
          req.data = std::move(values);
          req.keys = std::move(keys);
          Process(req, made);
        },
        [](const ScanReply& r) -> const Payload& { return r.data; }, kept);
    bytes_in_ = 0;
    if (resident_->keep) bytes_out_ = 0;
    return status;
  }

  engine::SegmentedScanSpec spec_;
  std::optional<NarrowInput> narrow_;   // a narrow header.dtype: what each run is widened from
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges (header.resident: the arrays')
  std::optional<ResidentCall> resident_;  // header.resident
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
