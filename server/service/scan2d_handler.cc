// Scan2D: bidirectional streaming like Scan. The matrix arrives as bytes cut anywhere; the call
// re-cuts it into whole rows (keeping at most one partial row between requests), scans each
// run of whole rows as it completes and sends it back; the final response carries Timing.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "service/handlers.h"
#include "service/row_cutter.h"
#include "service/streaming_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

class Scan2DCall final : public StreamingCall<v1::Scan2DRequest, v1::ScanResponse,
                                              grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::Scan2DHeader& header) override {
    if (auto s = ToEngine(header, ctx_.options->max_scan2d_row_bytes, &spec_, &narrow_); !s.ok()) return s;
    std::optional<uint64_t> rows;
    if (header.has_rows()) rows = header.rows();
    checker_.emplace(spec_, rows, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes, narrow_);
    elem_size_ = engine::SizeOf(spec_.dtype);
    cutter_.emplace(spec_.cols * WireSize(narrow_, spec_.dtype));
    return grpc::Status::OK;
  }

  // The partial row, and a response that may hold a whole row beyond a chunk.
  uint64_t HeldBytes() const override { return 2 * spec_.cols * elem_size_; }

  grpc::Status CheckRequest(const v1::Scan2DRequest& req, uint64_t index) override {
    return checker_->Add(req.data().size(), index);
  }

  void Open() override { session_ = ctx_.engine->NewScan2D(spec_); }

  void Process(v1::Scan2DRequest& req, std::vector<v1::ScanResponse>& out) override {
    bytes_in_ += req.data().size();
    cutter_->Add(req.data(), [&](const char* rows_data, uint64_t rows) {
      v1::ScanResponse& resp = out.emplace_back();
      const uint64_t n = rows * spec_.cols;
      std::string* data = resp.mutable_data();
      data->resize(n * elem_size_);
      Payload wide;  // a narrow matrix's rows widened, a FLOAT16 output rounded once (service/narrow.h)
      session_->Process(EngineElements(narrow_, spec_.dtype, rows_data, n, *ctx_.payloads, &wide), data->data(),
                        rows, stages_);
      if (narrow_ && narrow_->half_out) {
        RoundToHalf(data->data(), data->data(), n);  // in place, front to back
        data->resize(n * 2);
      }
      resp.set_offset(processed_);
      processed_ += n;
      bytes_out_ += data->size();
      ++chunks_;
    });
  }

  grpc::Status Complete(std::vector<v1::ScanResponse>& out) override {
    if (auto s = checker_->Finish(); !s.ok()) return s;
    FillFinal(out.emplace_back(), processed_, session_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} cols={} n={} algorithm={} engine={}", engine::Name(spec_.op),
                       AccumulatedName(narrow_, spec_.dtype), spec_.cols, processed_, session_ ? session_->algorithm() : "-",
                       ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

 private:
  engine::Scan2DSpec spec_;
  std::optional<NarrowInput> narrow_;  // a narrow header.dtype: what each run of rows is widened from
  std::optional<Scan2DChecker> checker_;
  std::optional<RowCutter> cutter_;
  std::unique_ptr<engine::Scan2DSession> session_;
  size_t elem_size_ = 4;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>* StartScan2D(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc) {
  return StartCall<Scan2DCall>(std::move(ctx), rpc, "scan2d");
}

}  // namespace gpuscan::server
