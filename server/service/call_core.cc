#include "service/call_core.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "service/status.h"

namespace gpuscan::server {

CallCore::CallCore(CallContext ctx, grpc::CallbackServerContext* rpc, const char* op_name, bool bidi)
    : CallLifetime(ctx.admission), ctx_(std::move(ctx)), rpc_(rpc), op_name_(op_name), bidi_(bidi),
      start_(Clock::now()) {
  ctx_.metrics->CallStarted();
}

void CallCore::CancelCall() {
  std::unique_lock<std::mutex> lock(mu_);
  FailAndMaybeFinish(lock, grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
}

void CallCore::DoneCall() {
  spdlog::info("{} {}{} status={}{}{} total_us={}", op_name_, LogFields(),
               join_ ? fmt::format(" lane={}/{} array={}", lane_spec_.lane, lane_spec_.lane_count,
                                   ArrayIdText(lane_spec_.array_id))
                     : std::string(),
               CodeName(status_.error_code()),
               status_.ok() ? "" : " message=\"", status_.ok() ? "" : status_.error_message() + "\"",
               Micros(Clock::now() - start_));
  RecordMetrics();
  std::unique_lock<std::mutex> lock(mu_);
  DoneLocked(lock);
}

void CallCore::WriteDoneLocked(std::unique_lock<std::mutex>& lock, bool ok) {
  writing_ = false;
  send_us_ += Micros(Clock::now() - write_start_);
  if (!ok) return FailAndMaybeFinish(lock, grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped receiving"));
  MaybeWriteLocked(true);  // the rest of the queue, also after the final response was queued
  MaybeReadLocked();
  MaybeWorkLocked();
  MaybeFinish(lock);
}

// --- LaneEndpoint: what the array's join asks of this lane (lane_join.h)

void CallCore::JoinAdmitted() {
  std::unique_lock<std::mutex> lock(mu_);
  admitted_ = true;
  admitted_at_ = Clock::now();
  if (finish_requested_) return;
  MaybeWorkLocked();
  MaybeReadLocked();
}

void CallCore::JoinFailed(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  join_told_ = true;  // the join knows already
  FailAndMaybeFinish(lock, status);
}

void CallCore::JoinReleased() {
  std::unique_lock<std::mutex> lock(mu_);
  join_released_ = true;
  --refs_;  // the join's
  MaybeFinish(lock);
}

grpc::Status CallCore::JoinEnd(uint64_t ticket) {
  try {
    EndChunk(ticket);
  } catch (...) {
    return EngineFailure(std::current_exception());
  }
  return grpc::Status::OK;
}

bool CallCore::JoinOverlaps(uint64_t chunk_elements) { return chunk_elements <= OverlapElements(); }

std::string CallCore::Device(const MetricLabels& labels) const {
  return labels.device.empty() ? ctx_.engine->device_name() : labels.device;
}

void CallCore::FillTiming(v1::Timing* t, const std::string& algorithm) const {
  const Clock::time_point now = Clock::now();
  t->set_receive_us(Micros(last_read_ - start_));
  t->set_queue_us(Micros(admitted_at_ - header_at_));
  t->set_h2d_us(stages_.h2d_us);
  t->set_kernel_us(stages_.kernel_us);
  t->set_d2h_us(stages_.d2h_us);
  t->set_send_us(send_us_.load());
  t->set_total_us(Micros(now - start_));
  t->set_bytes_in(bytes_in_);
  t->set_bytes_out(bytes_out_);
  t->set_engine(ctx_.engine->name());
  t->set_device(Device(Labels()));
  t->set_algorithm(algorithm);
  t->set_chunks(chunks_);
}

// Bytes and stage times count for successful calls only (Metrics::CallDone), so only theirs are
// gathered. They are the numbers the call's Timing reported, except send and total: Timing is
// written before the final response goes out, these run to OnDone and so include it.
void CallCore::RecordMetrics() {
  CallRecord r;
  r.op = op_name_;
  r.status = CodeName(CountedCode(status_.error_code(), rpc_->IsCancelled()));
  if (header_accepted_) {
    MetricLabels labels = Labels();
    if (!labels.algorithm.empty()) r.device = Device(labels);  // the call reached a device
    r.dtype = std::move(labels.dtype);
    r.algorithm = std::move(labels.algorithm);
  }
  if (status_.ok()) {
    r.bytes_in = bytes_in_;
    r.bytes_out = bytes_out_;
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    r.set(Stage::kReceive, seconds(last_read_ - start_));
    r.set(Stage::kQueue, seconds(admitted_at_ - header_at_));
    if (chunks_ > 0) {  // the engine saw data
      r.set(Stage::kH2d, stages_.h2d_us * 1e-6);
      r.set(Stage::kKernel, stages_.kernel_us * 1e-6);
      r.set(Stage::kD2h, stages_.d2h_us * 1e-6);
    }
    if (bidi_) r.set(Stage::kSend, send_us_.load() * 1e-6);
    r.set(Stage::kTotal, seconds(Clock::now() - start_));
  }
  ctx_.metrics->CallDone(r);
}

uint64_t CallCore::BufferCap() const { return (kMaxBuffered + 2) * MaxReceiveMessageBytes(*ctx_.options); }

grpc::Status CallCore::JoinArray(const google::protobuf::Message& header, const LaneSpec& spec,
                                 std::optional<uint64_t> declared, std::type_index chunk_type) {
  std::shared_ptr<LaneJoin> join;
  if (auto s = ctx_.lanes->Find(spec, header, declared, op_name_, chunk_type, &join); !s.ok()) return s;
  header_at_ = Clock::now();
  // The array's reservation, once: what its lanes may buffer, or three times a declared count.
  uint64_t reservation = spec.lane_count * BufferCap();
  if (declared && *declared <= reservation) {
    reservation = std::min(reservation, 3 * *declared * spec.element_size + 4096);
  }
  bool admitted = false;
  if (auto s = join->Attach(header, spec, reservation, this, &admitted); !s.ok()) return s;
  join_ = std::move(join);
  lane_spec_ = spec;
  join_released_ = false;
  ++refs_;  // the join's, until JoinReleased
  if (admitted) {
    admitted_ = true;
    admitted_at_ = header_at_;
  }
  return grpc::Status::OK;
}

grpc::Status CallCore::Admit(uint64_t reservation) {
  header_at_ = Clock::now();
  switch (TryAdmitLocked(reservation, [this] { OnAdmitted(); })) {
    case Admission::Result::kAdmitted:
      admitted_ = true;
      admitted_at_ = header_at_;
      return grpc::Status::OK;
    case Admission::Result::kQueued:
      return grpc::Status::OK;
    case Admission::Result::kRejected:
      break;
  }
  return ResourceExhausted(
      "server busy: " + std::to_string(ctx_.admission->active()) + " calls running (--max-concurrent=" +
      std::to_string(ctx_.options->max_concurrent) + "), " + std::to_string(ctx_.admission->bytes_in_use()) +
      " bytes reserved (--max-inflight-bytes=" + std::to_string(ctx_.options->max_inflight_bytes) + ", this call needs " +
      std::to_string(reservation) + ") and " + std::to_string(ctx_.options->max_queued) +
      " waiting (--max-queued); retry later");
}

void CallCore::OnAdmitted() {
  std::unique_lock<std::mutex> lock(mu_);
  AdmittedLocked();
  admitted_ = true;
  admitted_at_ = Clock::now();
  if (!finish_requested_) {
    MaybeWorkLocked();
    MaybeReadLocked();
  }
  if (refs_ == 0) return ReleaseIfUnused(lock);
}

void CallCore::MaybeReadLocked() {
  if (reading_ || read_closed_ || finish_requested_) return;
  if (requests_ > 0 && !admitted_) return;  // queued calls hold only their header
  if (PendingLocked() + OutgoingLocked() + parked_ >= kMaxBuffered) return;
  reading_ = true;
  StartReadLocked();
}

// Whether there is work for a worker to take up: a request, or the end to complete, and no
// worker on it yet.
bool CallCore::WorkWaitingLocked() const {
  if (!admitted_ || worker_running_ || finish_requested_ || completed_ || lane_closed_) return false;
  return PendingLocked() > 0 || read_closed_;
}

void CallCore::MaybeWorkLocked() {
  if (!WorkWaitingLocked()) return;
  worker_running_ = true;
  ++refs_;
  ctx_.executor->Post([this] { Work(false); });
}

// Takes the worker's part for gRPC's thread when what is pending runs inline (RunsInline),
// opening the session here if need be (cheap; an Open that throws is left to a worker, which
// reports it). True: the caller must unlock and call Work(true).
bool CallCore::WorkInlineLocked() {
  if (join_ || !WorkWaitingLocked()) return false;
  if (!NextRunsInlineLocked(opened_)) return false;
  if (!opened_) {
    try {
      Open();
    } catch (...) {
      return false;
    }
    opened_ = true;
    if (!NextRunsInlineLocked(true)) return false;
  }
  worker_running_ = true;
  ++refs_;
  return true;
}

// Worker task: processes pending requests in order until none is left. on_grpc_thread: run
// inline by gRPC's thread (WorkInlineLocked), which hands over to a worker as soon as what
// comes next does not run inline.
void CallCore::Work(bool on_grpc_thread) {
  std::unique_lock<std::mutex> lock(mu_);
  if (join_) return WorkLane(lock);
  while (!finish_requested_) {
    const bool open_needed = !opened_;
    const bool have_request = PendingLocked() > 0;
    const bool at_end = !have_request && read_closed_;
    if (!have_request && !at_end) break;
    if (on_grpc_thread && !NextRunsInlineLocked(!open_needed)) {
      ctx_.executor->Post([this] { Work(false); });  // worker_running_ and the reference go with it
      return;
    }
    const grpc::Status status = RunNextLocked(lock, open_needed);
    if (!status.ok()) {
      worker_running_ = false;
      --refs_;
      FailAndMaybeFinish(lock, status);
      return;
    }
    if (finish_requested_) break;
    if (at_end) completed_ = true;
    MaybeWriteLocked(on_grpc_thread);
    MaybeReadLocked();
    if (completed_) break;
  }
  worker_running_ = false;
  --refs_;
  if (completed_ && !finish_requested_) {
    finish_requested_ = true;  // status_ stays OK: finish once the last response is out
  }
  MaybeFinish(lock);
}

// Worker task of a lane: hands its chunks to the join in order (the join runs them in global
// order, maybe right here), then tells it the lane has ended.
void CallCore::WorkLane(std::unique_lock<std::mutex>& lock) {
  while (!finish_requested_ && !lane_closed_) {
    if (PendingLocked() == 0 && !read_closed_) break;
    if (PendingLocked() == 0) {
      lane_closed_ = true;
      lock.unlock();
      join_->Closed(lane_spec_.lane);
      lock.lock();
      break;
    }
    std::unique_ptr<LaneChunk> chunk = PopLaneChunkLocked();
    if (chunk) ++parked_;  // counts toward kMaxBuffered until its results come back
    lock.unlock();
    if (chunk) join_->Submit(lane_spec_.lane, std::move(chunk));
    lock.lock();
    MaybeReadLocked();
  }
  worker_running_ = false;
  --refs_;
  MaybeFinish(lock);
}

grpc::Status CallCore::EngineFailure(std::exception_ptr error) {
  grpc::Status status = StatusFromException(error);
  if (ctx_.on_engine_failure) ctx_.on_engine_failure();
  if (status.error_code() == grpc::StatusCode::INTERNAL && !ctx_.engine->healthy()) {
    // The device broke under this call: UNAVAILABLE tells the client to retry elsewhere.
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the " + ctx_.engine->name() + " engine failed: " + status.error_message());
  }
  return status;
}

// Records the first failure and stops all further work; finishes when no write is pending.
// Also after a successful completion: a failed write means the final response never left.
void CallCore::FailAndMaybeFinish(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
  if (!finished_ && status_.ok()) status_ = status;
  finish_requested_ = true;
  if (join_ && !join_told_) {
    // A lane failed on its own: its siblings fail too. Posted, as the join calls other lanes.
    join_told_ = true;
    ctx_.executor->Post([join = join_, lane = lane_spec_.lane, status] { join->LaneFailed(lane, status); });
  }
  DropQueuedLocked();  // the front response stays if it is being written
  MaybeFinish(lock);
}

// Finishes the call once everything before it is done. Releases the lock; `this` may be
// gone when it returns.
void CallCore::MaybeFinish(std::unique_lock<std::mutex>& lock) {
  if (finish_requested_ && !finished_ && !writing_ && !worker_running_ && join_released_) {
    if (OutgoingLocked() == 0) {
      finished_ = true;
      grpc::Status status = status_;
      lock.unlock();
      FinishUnlocked(status);
      return;
    }
    if (bidi_ && LastWithStatusLocked()) {
      finished_ = writing_ = true;
      lock.unlock();
      WriteLastAndFinishUnlocked();
      return;
    }
  }
  ReleaseIfUnused(lock);
}

// A successful call's final response, the only message left: MaybeFinish sends it together
// with the status (StartWriteAndFinish: one operation, no OnWriteDone to wait for before a
// separate Finish), so MaybeWriteLocked leaves it.
bool CallCore::LastWithStatusLocked() const { return completed_ && status_.ok() && OutgoingLocked() == 1; }

}  // namespace gpuscan::server
