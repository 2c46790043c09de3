// Transport: the diagnostic transport ceiling. The same gRPC path as Scan (echo) or Reduce (no
// echo) with no compute, so the CLI can report the service as a share of what gRPC alone allows.
//
// Raw like Scan (wire.h): each request's data is gathered into a payload and echoed by reference,
// so the ceiling pays the copies Scan pays, no more.
//
// A small bidi reactor of its own rather than StreamingCall: there is no header, no engine
// session and no worker task, so everything runs on gRPC's callback threads (nothing blocks).
// Flow: admission (maybe queued) → read; each request is counted and, with echo, queued for
// writing; reads pause while kMaxBuffered echoes wait to be sent (back-pressure, as in
// StreamingCall) → after the half-close, the final response with the totals → Finish.
#include <deque>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "service/call_lifetime.h"
#include "service/handlers.h"
#include "service/streaming_call.h"
#include "service/wire.h"

namespace gpuscan::server {
namespace {

class TransportCall final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>, CallLifetime {
  static constexpr size_t kMaxBuffered = 3;  // echoes waiting to be sent, per call

 public:
  TransportCall(CallContext ctx, grpc::CallbackServerContext* rpc)
      : CallLifetime(ctx.admission), ctx_(std::move(ctx)), rpc_(rpc), start_(Clock::now()) {
    ctx_.metrics->CallStarted();
  }

  // The echoes waiting plus the message being read, from admission's byte budget.
  uint64_t Reservation() const { return (kMaxBuffered + 1) * MaxReceiveMessageBytes(*ctx_.options); }

  void Begin() {
    std::unique_lock<std::mutex> lock(mu_);
    switch (TryAdmitLocked(Reservation(), [this] { OnAdmitted(); })) {
      case Admission::Result::kAdmitted:
        admitted_ = true;
        MaybeReadLocked();
        return;
      case Admission::Result::kQueued:
        return;
      case Admission::Result::kRejected:
        break;
    }
    Fail(lock, ResourceExhausted("server busy: " + std::to_string(ctx_.options->max_concurrent) +
                                 " calls running and " + std::to_string(ctx_.options->max_queued) +
                                 " waiting (--max-concurrent, --max-queued); retry later"));
  }

  void OnReadDone(bool ok) override {
    v1::TransportRequest request;
    Payload data;
    grpc::Status decoded = ok ? DecodeWithPayload(incoming_, v1::TransportRequest::kDataFieldNumber, *ctx_.payloads,
                                                  &request, &data, "the TransportRequest")
                              : grpc::Status::OK;
    incoming_.Clear();
    std::unique_lock<std::mutex> lock(mu_);
    reading_ = false;
    if (finish_requested_) return MaybeFinish(lock);
    if (!ok) {
      if (rpc_->IsCancelled()) return Fail(lock, {grpc::StatusCode::CANCELLED, "the call was cancelled"});
      // Half-close: the final response carries the totals.
      v1::TransportResponse last;
      last.set_bytes_in(bytes_in_);
      last.set_bytes_out(bytes_out_);
      last.set_requests(requests_);
      last.set_final(true);
      last.set_total_us(Micros(Clock::now() - start_));
      outgoing_.push_back(EncodeWithPayload(last, v1::TransportResponse::kDataFieldNumber, Payload()));
      finish_requested_ = true;
      MaybeWriteLocked();
      return MaybeFinish(lock);
    }
    const uint64_t index = requests_++;
    if (!decoded.ok()) {
      return Fail(lock, {decoded.error_code(), "request #" + std::to_string(index) + ": " + decoded.error_message()});
    }
    const uint64_t size = data.size();
    if (index == 0) echo_ = request.echo();
    if (size > ctx_.options->chunk_bytes) {
      return Fail(lock, ResourceExhausted("request #" + std::to_string(index) + ": data of " + std::to_string(size) +
                                          " bytes exceeds the chunk limit of " +
                                          std::to_string(ctx_.options->chunk_bytes) +
                                          " bytes (Limits.max_chunk_bytes); send smaller chunks"));
    }
    const uint64_t max_total = ctx_.options->max_request_bytes;
    if (max_total != 0 && bytes_in_ + size > max_total) {
      return Fail(lock, ResourceExhausted("the call's input exceeds " + std::to_string(max_total) +
                                          " bytes (Limits.max_request_bytes)"));
    }
    bytes_in_ += size;
    if (echo_ && size > 0) {
      outgoing_.push_back(EncodeWithPayload(v1::TransportResponse(), v1::TransportResponse::kDataFieldNumber,
                                            std::move(data)));
      bytes_out_ += size;
      MaybeWriteLocked();
    }
    MaybeReadLocked();
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    outgoing_.pop_front();
    if (!ok) return Fail(lock, {grpc::StatusCode::CANCELLED, "the client stopped receiving"});
    MaybeWriteLocked();
    MaybeReadLocked();
    MaybeFinish(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    Fail(lock, {grpc::StatusCode::CANCELLED, "the call was cancelled"});
  }

  void OnDone() override {
    spdlog::info("transport echo={} requests={} bytes_in={} status={} total_us={}", echo_, requests_, bytes_in_,
                 CodeName(status_.error_code()), Micros(Clock::now() - start_));
    // No dtype, algorithm or engine stages here: the bytes and the total time are the point.
    CallRecord record;
    record.op = "transport";
    record.status = CodeName(status_.error_code());
    record.bytes_in = bytes_in_;
    record.bytes_out = bytes_out_;
    record.set(Stage::kTotal, std::chrono::duration<double>(Clock::now() - start_).count());
    ctx_.metrics->CallDone(record);
    std::unique_lock<std::mutex> lock(mu_);
    DoneLocked(lock);
  }

 private:
  void OnAdmitted() {
    std::unique_lock<std::mutex> lock(mu_);
    AdmittedLocked();
    admitted_ = true;
    if (!finish_requested_) MaybeReadLocked();
    MaybeFinish(lock);
  }

  void MaybeReadLocked() {
    if (reading_ || finish_requested_ || !admitted_ || outgoing_.size() >= kMaxBuffered) return;
    reading_ = true;
    StartRead(&incoming_);
  }

  void MaybeWriteLocked() {
    if (writing_ || outgoing_.empty()) return;
    writing_ = true;
    StartWrite(&outgoing_.front());
  }

  // Records the first failure, drops unsent echoes and finishes once no write is in flight.
  void Fail(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    if (!finished_ && status_.ok()) status_ = status;
    finish_requested_ = true;
    if (writing_) {
      outgoing_.erase(outgoing_.begin() + 1, outgoing_.end());
    } else {
      outgoing_.clear();
    }
    MaybeFinish(lock);
  }

  // Finishes once no write is in flight (a pending read just completes with ok=false; gRPC runs
  // OnDone after every reaction). Releases the lock; `this` may be gone when it returns.
  void MaybeFinish(std::unique_lock<std::mutex>& lock) {
    FinishOnceOrRelease(lock, finish_requested_ && !writing_ && outgoing_.empty(), finished_,
                        [this, status = status_] { Finish(status); });
  }

  CallContext ctx_;
  grpc::CallbackServerContext* rpc_;
  const Clock::time_point start_;
  std::mutex mu_;
  grpc::ByteBuffer incoming_;
  std::deque<grpc::ByteBuffer> outgoing_;
  grpc::Status status_;
  uint64_t requests_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  bool echo_ = false, admitted_ = false, reading_ = false,
       writing_ = false, finish_requested_ = false, finished_ = false;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartTransport(
    CallContext ctx, grpc::CallbackServerContext* rpc) {
  return StartCall<TransportCall>(std::move(ctx), rpc);
}

}  // namespace gpuscan::server
