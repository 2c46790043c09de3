// Scan2D: bidirectional streaming like Scan. The matrix arrives as bytes cut anywhere; the call
// re-cuts it into whole rows (keeping at most one partial row between requests), scans each
// run of whole rows as it completes and sends it back; the final response carries Timing.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "service/handlers.h"
#include "service/resident_call.h"
#include "service/resident_feed.h"
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
    if (header.has_resident()) return OpenResidentCall(header, rows);
    return grpc::Status::OK;
  }

  // The partial row, and a response that may hold a whole row beyond a chunk.
  uint64_t HeldBytes() const override { return 2 * spec_.cols * elem_size_; }

  grpc::Status CheckRequest(const v1::Scan2DRequest& req, uint64_t index) override {
    if (resident_) return NoInlinePayload(req.data().size(), "data", index, "header.resident");
    return checker_->Add(req.data().size(), index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    session_ = OpenFedSession(*ctx_.engine, resident_, [&](engine::Engine& e) { return e.NewScan2D(spec_); });
  }

  void Process(v1::Scan2DRequest& req, std::vector<v1::ScanResponse>& out) override { Scan(req.data(), out); }

  grpc::Status Complete(std::vector<v1::ScanResponse>& out) override {
    v1::ArrayInfo kept;
    if (auto s = resident_ ? ScanResident(out, &kept) : checker_->Finish(); !s.ok()) return s;
    v1::ScanResponse& final = out.emplace_back();
    FillFinal(final, processed_, session_->algorithm());
    if (!kept.id().empty()) *final.mutable_array() = std::move(kept);
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
  // The next bytes of the matrix (a request's data, or a chunk read back from a resident one),
  // cut anywhere: each run of rows they complete is scanned into a response.
  template <class Bytes>
  void Scan(const Bytes& bytes, std::vector<v1::ScanResponse>& out) {
    bytes_in_ += bytes.size();
    cutter_->Add(bytes, [&](const char* rows_data, uint64_t rows) {
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

  // header.resident: the matrix, checked and held. Its count must be whole rows (header.rows of
  // them when set), as the stream's end is checked (Scan2DChecker::Finish).
  grpc::Status OpenResidentCall(const v1::Scan2DHeader& header, std::optional<uint64_t> rows) {
    if (auto s = OpenResidentInputs(*ctx_.resident, *rpc_, header.resident(), header.dtype(), std::nullopt, {},
                                    ResidentConflicts{}, &resident_.emplace());
        !s.ok()) {
      return s;
    }
    const uint64_t n = resident_->values->count;
    const std::string array = "header.resident.values " + HexText(resident_->values->id) + " has " +
                              std::to_string(n) + " elements";
    if (n % spec_.cols != 0) {
      return InvalidArgument(array + ", not a whole number of rows of header.cols=" + std::to_string(spec_.cols));
    }
    if (rows && n / spec_.cols != *rows) {
      return InvalidArgument("header.rows=" + std::to_string(*rows) + " but " + array + " (" +
                             std::to_string(n / spec_.cols) + " rows of header.cols=" + std::to_string(spec_.cols) +
                             ")");
    }
    return grpc::Status::OK;
  }

  // header.resident: no device path; the matrix is fed to Scan chunk by chunk (resident_feed.h),
  // cut mid-row as a stream may be: bit for bit the streamed call's.
  grpc::Status ScanResident(std::vector<v1::ScanResponse>& out, v1::ArrayInfo* kept) {
    ResidentFeed feed(*ctx_.resident, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);
    const int dtype = ResultDType(narrow_, spec_.dtype);
    const grpc::Status status = FeedOneArray(
        feed, [this] { return Cancelled(); }, dtype, resident_->values->count * WireDTypeSize(dtype), out,
        [&](Payload values, Payload, std::vector<v1::ScanResponse>& made) { Scan(values, made); },
        [](const v1::ScanResponse& r) -> const std::string& { return r.data(); }, kept);
    bytes_in_ = 0;
    if (resident_->keep) bytes_out_ = 0;
    return status;
  }

  engine::Scan2DSpec spec_;
  std::optional<NarrowInput> narrow_;  // a narrow header.dtype: what each run of rows is widened from
  std::optional<Scan2DChecker> checker_;
  std::optional<RowCutter> cutter_;
  std::unique_ptr<engine::Scan2DSession> session_;
  std::optional<ResidentCall> resident_;  // header.resident
  size_t elem_size_ = 4;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>* StartScan2D(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc) {
  return StartCall<Scan2DCall>(std::move(ctx), rpc, "scan2d");
}

}  // namespace gpuscan::server
