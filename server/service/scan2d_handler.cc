// Scan2D: bidirectional streaming like Scan. The matrix arrives as bytes cut anywhere; the call
// re-cuts it into whole rows (keeping at most one partial row between requests), scans each
// run of whole rows as it completes and sends it back; the final response carries Timing.
#include <memory>
#include <optional>
#include <string>

#include "service/handlers.h"
#include "service/streaming_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// Cuts a byte stream into runs of whole rows: `emit(rows_data, rows)` for each run, in order.
class RowCutter {
 public:
  explicit RowCutter(uint64_t row_bytes) : row_bytes_(row_bytes) {}

  template <class Emit>
  void Add(const std::string& data, const Emit& emit) {
    const char* p = data.data();
    uint64_t left = data.size();
    if (!partial_.empty()) {  // complete the row begun by earlier requests
      const uint64_t take = std::min<uint64_t>(left, row_bytes_ - partial_.size());
      partial_.append(p, take);
      p += take;
      left -= take;
      if (partial_.size() < row_bytes_) return;
      emit(partial_.data(), 1);
      partial_.clear();
    }
    if (const uint64_t rows = left / row_bytes_; rows > 0) {
      emit(p, rows);
      p += rows * row_bytes_;
      left -= rows * row_bytes_;
    }
    partial_.append(p, left);
  }
  uint64_t partial_bytes() const { return partial_.size(); }

 private:
  uint64_t row_bytes_;
  std::string partial_;  // the start of a row whose end has not arrived
};

class Scan2DCall final : public StreamingCall<v1::Scan2DRequest, v1::ScanResponse,
                                              grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::Scan2DHeader& header) override {
    if (auto s = ToEngine(header, ctx_.options->max_scan2d_row_bytes, &spec_); !s.ok()) return s;
    if (!ctx_.engine->healthy()) return EngineUnavailable(*ctx_.engine);
    if (header.has_rows()) rows_declared_ = header.rows();
    checker_.emplace(spec_.dtype, std::nullopt, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    elem_size_ = engine::SizeOf(spec_.dtype);
    cutter_.emplace(spec_.cols * elem_size_);
    return grpc::Status::OK;
  }

  // The partial row, and a response that may hold a whole row beyond a chunk.
  uint64_t HeldBytes() const override { return 2 * spec_.cols * elem_size_; }

  grpc::Status CheckRequest(const v1::Scan2DRequest& req, uint64_t index) override {
    if (auto s = checker_->Add(req.data().size(), "data", index); !s.ok()) return s;
    if (rows_declared_ && checker_->elements() > *rows_declared_ * spec_.cols) {  // ToEngine: no overflow
      return InvalidArgument("received more than header.rows=" + std::to_string(*rows_declared_) +
                             " rows of header.cols=" + std::to_string(spec_.cols) + " (" +
                             std::to_string(checker_->elements()) + " elements so far)");
    }
    return grpc::Status::OK;
  }

  void Open() override { session_ = ctx_.engine->NewScan2D(spec_); }

  void Process(v1::Scan2DRequest& req, std::vector<v1::ScanResponse>& out) override {
    bytes_in_ += req.data().size();
    cutter_->Add(req.data(), [&](const char* rows_data, uint64_t rows) {
      v1::ScanResponse& resp = out.emplace_back();
      const uint64_t n = rows * spec_.cols;
      std::string* data = resp.mutable_data();
      data->resize(n * elem_size_);
      session_->Process(rows_data, data->data(), rows, stages_);
      resp.set_offset(processed_);
      processed_ += n;
      bytes_out_ += data->size();
      ++chunks_;
    });
  }

  grpc::Status Complete(std::vector<v1::ScanResponse>& out) override {
    if (cutter_->partial_bytes() != 0) {
      return InvalidArgument("the stream ended inside a row: " + std::to_string(checker_->elements()) +
                             " elements is not a whole number of rows of header.cols=" + std::to_string(spec_.cols));
    }
    if (rows_declared_ && processed_ / spec_.cols != *rows_declared_) {
      return InvalidArgument("header.rows=" + std::to_string(*rows_declared_) + " but the stream carried " +
                             std::to_string(processed_ / spec_.cols) + " rows of header.cols=" +
                             std::to_string(spec_.cols));
    }
    v1::ScanResponse& last = out.emplace_back();
    last.set_element_count(processed_);
    FillTiming(last.mutable_timing(), session_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} cols={} n={} algorithm={} engine={}", engine::Name(spec_.op),
                       engine::Name(spec_.dtype), spec_.cols, processed_, session_ ? session_->algorithm() : "-",
                       ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

 private:
  engine::Scan2DSpec spec_;
  std::optional<uint64_t> rows_declared_;
  std::optional<ChunkChecker> checker_;
  std::optional<RowCutter> cutter_;
  std::unique_ptr<engine::Scan2DSession> session_;
  size_t elem_size_ = 4;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>* StartScan2D(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc) {
  auto* call = new Scan2DCall(std::move(ctx), rpc, "scan2d");
  call->Begin();
  return call;
}

}  // namespace gpuscan::server
