// Compact: bidirectional streaming. Values (and, with use_flags, a flags stream matched to them
// by element position) are compacted chunk by chunk; kept values and/or indices stream back.
#include <algorithm>
#include <memory>
#include <optional>

#include "service/handlers.h"
#include "service/streaming_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// How far flags and values may run ahead of each other, in chunks, before the call fails:
// keeps the server's buffering per call bounded.
constexpr uint64_t kMaxSkewChunks = 4;

class CompactCall final
    : public StreamingCall<v1::CompactRequest, v1::CompactResponse,
                           grpc::ServerBidiReactor<v1::CompactRequest, v1::CompactResponse>> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::CompactHeader& header) override {
    if (auto s = ToEngine(header, &spec_); !s.ok()) return s;
    if (!ctx_.engine->healthy()) return EngineUnavailable(*ctx_.engine);
    std::optional<uint64_t> count;
    if (header.has_element_count()) count = header.element_count();
    checker_.emplace(spec_.dtype, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    elem_size_ = engine::SizeOf(spec_.dtype);
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const v1::CompactRequest& req, uint64_t index) override {
    if (auto s = checker_->Add(req.values().size(), "values", index); !s.ok()) return s;
    const uint64_t flags = req.flags().size();
    const std::string where = "request #" + std::to_string(index) + ": ";
    if (!spec_.use_flags) {
      if (flags == 0) return grpc::Status::OK;
      return InvalidArgument(where + "flags sent (" + std::to_string(flags) +
                             " bytes) but the header selects by predicate, not use_flags");
    }
    if (flags > ctx_.options->chunk_bytes) {
      return ResourceExhausted(where + "flags length " + std::to_string(flags) + " bytes exceeds the chunk limit of " +
                               std::to_string(ctx_.options->chunk_bytes) + " bytes");
    }
    flags_received_ += flags;
    const uint64_t values = checker_->elements();
    const uint64_t skew = values > flags_received_ ? values - flags_received_ : flags_received_ - values;
    const uint64_t max_skew = kMaxSkewChunks * ctx_.options->chunk_bytes / elem_size_;
    if (skew > max_skew) {
      return InvalidArgument(where + "flags (" + std::to_string(flags_received_) + " so far) and values (" +
                             std::to_string(values) + " elements so far) are out of step by more than " +
                             std::to_string(max_skew) + " elements; send each chunk's flags with its values");
    }
    return grpc::Status::OK;
  }

  void Open() override { session_ = ctx_.engine->NewCompact(spec_); }

  void Process(v1::CompactRequest& req, std::vector<v1::CompactResponse>& out) override {
    bytes_in_ += req.values().size() + req.flags().size();
    if (!spec_.use_flags) {
      Select(req.values().data(), nullptr, req.values().size() / elem_size_, out);
      return;
    }
    if (values_buf_.empty() && flags_buf_.empty() && req.values().size() == req.flags().size() * elem_size_) {
      Select(req.values().data(), reinterpret_cast<const uint8_t*>(req.flags().data()), req.flags().size(), out);
      return;
    }
    // Flags and values arrived out of step: match them by element position.
    values_buf_.append(req.values());
    flags_buf_.append(req.flags());
    const uint64_t n = std::min<uint64_t>(values_buf_.size() / elem_size_, flags_buf_.size());
    if (n == 0) return;
    Select(values_buf_.data(), reinterpret_cast<const uint8_t*>(flags_buf_.data()), n, out);
    values_buf_.erase(0, n * elem_size_);
    flags_buf_.erase(0, n);
  }

  grpc::Status Complete(std::vector<v1::CompactResponse>& out) override {
    if (auto s = checker_->Finish(); !s.ok()) return s;
    if (spec_.use_flags && flags_received_ != checker_->elements()) {
      return InvalidArgument("flags length " + std::to_string(flags_received_) +
                             " differs from values length " + std::to_string(checker_->elements()) +
                             " (elements): use_flags needs one flag byte per value");
    }
    v1::CompactResponse& last = out.emplace_back();
    last.set_kept_count(kept_);
    last.set_element_count(processed_);
    FillTiming(last.mutable_timing(), session_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("dtype={} select={} n={} kept={} algorithm={} engine={}", engine::Name(spec_.dtype),
                       spec_.use_flags ? "flags" : std::string(engine::Name(spec_.predicate.op)), processed_,
                       kept_, session_ ? session_->algorithm() : "-", ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : ""};
  }

 private:
  void Select(const void* values, const uint8_t* flags, uint64_t n, std::vector<v1::CompactResponse>& out) {
    if (n == 0) return;
    v1::CompactResponse resp;
    std::string* vals = resp.mutable_values();
    std::string* idx = resp.mutable_indices();
    if (spec_.want_values) vals->resize(n * elem_size_);
    if (spec_.want_indices) idx->resize(n * sizeof(int64_t));
    const uint64_t kept = session_->Process(values, flags, n, spec_.want_values ? vals->data() : nullptr,
                                            spec_.want_indices ? reinterpret_cast<int64_t*>(idx->data()) : nullptr,
                                            stages_);
    if (spec_.want_values) vals->resize(kept * elem_size_);
    if (spec_.want_indices) idx->resize(kept * sizeof(int64_t));
    processed_ += n;
    ++chunks_;
    if (kept == 0) return;
    resp.set_kept_offset(kept_);
    kept_ += kept;
    bytes_out_ += vals->size() + idx->size();
    out.push_back(std::move(resp));
  }

  engine::CompactSpec spec_;
  std::optional<ChunkChecker> checker_;
  std::unique_ptr<engine::CompactSession> session_;
  size_t elem_size_ = 4;
  uint64_t flags_received_ = 0;  // gRPC thread (CheckRequest) and Complete, ordered by the call's lock
  std::string values_buf_, flags_buf_;
  uint64_t processed_ = 0;
  uint64_t kept_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::CompactRequest, v1::CompactResponse>* StartCompact(
    CallContext ctx, grpc::CallbackServerContext* rpc) {
  auto* call = new CompactCall(std::move(ctx), rpc, "compact");
  call->Begin();
  return call;
}

}  // namespace gpuscan::server
