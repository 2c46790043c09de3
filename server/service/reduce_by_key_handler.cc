// ReduceByKey: bidirectional streaming. Values and their keys, matched by element position,
// run through the engine's segmented scan (engine/reduce_by_key.h); each run goes back as soon
// as it is complete, the last after the client half-closes; the final response carries Timing.
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "engine/reduce_by_key.h"
#include "service/flags_aligner.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/streaming_call.h"
#include "service/validate.h"
#include "service/wire.h"

namespace gpuscan::server {
namespace {

// ReduceByKey reads raw (wire.h): a request's values and keys are gathered once into payloads.
// Its responses (one key and one value a run, usually far fewer bytes) are plain messages.
inline constexpr char kReduceByKeyRequest[] = "the ReduceByKeyRequest";
using ReduceByKeyWire = RawWire<ReduceByKeyChunk, v1::ReduceByKeyResponse, kReduceByKeyRequest>;

class ReduceByKeyCall final
    : public StreamingCall<ReduceByKeyChunk, v1::ReduceByKeyResponse,
                           grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>, ReduceByKeyWire> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::ReduceByKeyHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_); !s.ok()) return s;
    const std::optional<uint64_t> count = DeclaredCount(header);
    const PairedChecker::Side side = SegmentedScanSide(spec_);
    checker_.emplace(spec_.dtype, narrow_, side, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    aligner_.emplace(WireSize(narrow_, spec_.dtype), side.size);
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const ReduceByKeyChunk& req, uint64_t index) override {
    return checker_->Add(req.data.size(), req.keys.size(), index);
  }

  void Open() override { reducer_ = ctx_.engine->NewReduceByKey(spec_); }

  void Process(ReduceByKeyChunk& req, std::vector<v1::ReduceByKeyResponse>& out) override {
    bytes_in_ += req.data.size() + req.keys.size();
    aligner_->Add(req.data, req.keys, [&](const char* values, const uint8_t* keys, uint64_t n) {
      v1::ReduceByKeyResponse resp;
      Payload wide;  // a narrow input's values widened (service/narrow.h)
      const void* wide_values = EngineElements(narrow_, spec_.dtype, values, n, *ctx_.payloads, &wide);
      const uint64_t runs =
          reducer_->Process(wide_values, keys, n, resp.mutable_keys(), resp.mutable_values(), stages_);
      processed_ += n;
      ++chunks_;
      Send(std::move(resp), runs, out);
    });
  }

  grpc::Status Complete(std::vector<v1::ReduceByKeyResponse>& out) override {
    if (auto s = checker_->Finish(); !s.ok()) return s;
    v1::ReduceByKeyResponse tail;
    const uint64_t runs = reducer_->Finish(tail.mutable_keys(), tail.mutable_values());
    Send(std::move(tail), runs, out);
    v1::ReduceByKeyResponse& last = out.emplace_back();
    last.set_run_count(runs_);
    FillFinal(last, processed_, reducer_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} keys={} n={} runs={} algorithm={} engine={}", engine::Name(spec_.op),
                       AccumulatedName(narrow_, spec_.dtype), engine::Name(spec_.key_dtype), processed_, runs_,
                       reducer_ ? reducer_->algorithm() : "-", ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), reducer_ ? reducer_->algorithm() : "",
            reducer_ ? reducer_->device() : ""};
  }

 private:
  // Queues a response holding `runs` completed runs (none: nothing to send).
  void Send(v1::ReduceByKeyResponse resp, uint64_t runs, std::vector<v1::ReduceByKeyResponse>& out) {
    if (runs == 0) return;
    if (narrow_ && narrow_->half_out) {  // each run's float32 value rounded once to float16
      std::string* values = resp.mutable_values();
      RoundToHalf(values->data(), values->data(), runs);  // in place, front to back
      values->resize(runs * 2);
    }
    resp.set_run_offset(runs_);
    runs_ += runs;
    bytes_out_ += resp.keys().size() + resp.values().size();
    out.push_back(std::move(resp));
  }

  engine::SegmentedScanSpec spec_;
  std::optional<NarrowInput> narrow_;  // a narrow header.dtype: what each run is widened from
  std::optional<PairedChecker> checker_;
  std::unique_ptr<engine::ReduceByKeySession> reducer_;
  std::optional<FlagsAligner> aligner_;  // matches keys with values by position
  uint64_t processed_ = 0;
  uint64_t runs_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartReduceByKey(
    CallContext ctx, grpc::CallbackServerContext* rpc) {
  return StartCall<ReduceByKeyCall>(std::move(ctx), rpc, "reduce_by_key");
}

}  // namespace gpuscan::server
