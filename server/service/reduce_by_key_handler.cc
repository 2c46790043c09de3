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
#include "service/resident_call.h"
#include "service/resident_feed.h"
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
    if (!header.has_resident()) return grpc::Status::OK;
    return OpenResidentInputs(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, WantsOf(header),
                              ResidentConflicts{}, &resident_.emplace());
  }

  grpc::Status CheckRequest(const ReduceByKeyChunk& req, uint64_t index) override {
    if (resident_) {
      if (auto s = NoInlinePayload(req.data.size(), "data", index, "header.resident"); !s.ok()) return s;
      return NoInlinePayload(req.keys.size(), "keys", index, "header.resident");
    }
    return checker_->Add(req.data.size(), req.keys.size(), index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    reducer_ = OpenFedSession(*ctx_.engine, resident_, [&](engine::Engine& e) { return e.NewReduceByKey(spec_); });
  }

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
    if (resident_) return CompleteResident(out);
    if (auto s = checker_->Finish(); !s.ok()) return s;
    FinishRuns(out);
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
  // The last run, if any, queued.
  void FinishRuns(std::vector<v1::ReduceByKeyResponse>& out) {
    v1::ReduceByKeyResponse tail;
    const uint64_t runs = reducer_->Finish(tail.mutable_keys(), tail.mutable_values());
    Send(std::move(tail), runs, out);
  }

  // header.resident: no device path; the arrays are fed to Process chunk by chunk
  // (resident_feed.h), bit for bit the streamed call's. keep: the runs' keys and values go into
  // scratch on the device as they complete, then into kept arrays of exactly run_count.
  grpc::Status CompleteResident(std::vector<v1::ReduceByKeyResponse>& out) {
    ResidentStore& store = *ctx_.resident;
    ResidentFeed keys(store, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);
    ResidentFeed values(store, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);  // its result only
    const int values_dtype = ResultDType(narrow_, spec_.dtype);
    const bool keep = resident_->keep;
    if (keep) {
      const uint64_t most = resident_->values->count;  // runs: at most one an element
      if (auto s = keys.OpenResult(most * engine::SizeOf(spec_.key_dtype), false); !s.ok()) return s;
      if (auto s = values.OpenResult(most * WireDTypeSize(values_dtype), false); !s.ok()) return s;
    }
    std::vector<v1::ReduceByKeyResponse> made;
    auto collect = [&] {
      for (auto& r : made) {
        if (!keep) {
          out.push_back(std::move(r));
          continue;
        }
        keys.Append(r.keys().data(), r.keys().size());
        values.Append(r.values().data(), r.values().size());
      }
      made.clear();
    };
    auto s = keys.Each([this] { return Cancelled(); }, [&](Payload v, Payload k) {
      ReduceByKeyChunk req;
      req.data = std::move(v);
      req.keys = std::move(k);
      Process(req, made);
      collect();
    });
    if (!s.ok()) return s;
    FinishRuns(made);
    collect();
    v1::ReduceByKeyResponse& last = out.emplace_back();
    last.set_run_count(runs_);
    FillFinal(last, processed_, reducer_->algorithm());
    bytes_in_ = 0;
    if (!keep) return grpc::Status::OK;
    bytes_out_ = 0;
    if (auto k = keys.Keep(ToWire(spec_.key_dtype), last.mutable_keys_array()); !k.ok()) return k;
    return values.Keep(values_dtype, last.mutable_values_array());
  }

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
  std::optional<ResidentCall> resident_;  // header.resident
  uint64_t processed_ = 0;
  uint64_t runs_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartReduceByKey(
    CallContext ctx, grpc::CallbackServerContext* rpc) {
  return StartCall<ReduceByKeyCall>(std::move(ctx), rpc, "reduce_by_key");
}

}  // namespace gpuscan::server
