// StreamingCall: the life of one client-streaming or bidirectional call, shared by Scan,
// Reduce and Compact. It owns the flow that every such RPC has:
//
//   read header → validate → admission (maybe queue) → per request: read, check, hand to the
//   worker pool → worker: Open, Process each request in order, Complete → write responses in
//   order → Finish.
//
// Back-pressure keeps memory per call to a few chunks: no new read while kMaxBuffered
// messages are waiting to be processed or sent. The RPC-specific parts are the virtual hooks.
//
// Threading: gRPC callbacks and the one worker task of a call may run concurrently; all state
// is under mu_. Finish() is called outside the lock (gRPC may run OnDone inline from it). The
// object deletes itself once gRPC is done with it (OnDone) and no worker task, lane join or
// admission queue holds it (call_lifetime.h, shared with the Transport and Benchmark reactors).
//
// Metrics: a call is in flight from construction to OnDone, where it is recorded once (status,
// bytes, stage times): by then the worker is done with it, since Finish waits for the worker.
//
// Lanes: a call whose header sets `lanes` is one lane of a striped array (lane_join.h). It
// validates and reads as any call, but hands its chunks to the array's LaneJoin instead of
// running them, gets its results back from whichever thread runs them (JoinDeliver), and
// finishes once the join has released it. Admission is the join's, once per array.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/call_context.h"
#include "service/call_lifetime.h"
#include "service/lane_join.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::server {

using Clock = std::chrono::steady_clock;

inline uint64_t Micros(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// The status a call gets when the engine hit an unrecoverable error earlier.
inline grpc::Status EngineUnavailable(const engine::Engine& engine) {
  return {grpc::StatusCode::UNAVAILABLE, "the " + engine.name() + " engine is unavailable: " + engine.unhealthy_reason()};
}

// Whether a call's header has the lanes / shared_memory fields (Histogram's has neither yet).
template <class H, class = void>
struct HasLanes : std::false_type {};
template <class H>
struct HasLanes<H, std::void_t<decltype(std::declval<const H&>().has_lanes())>> : std::true_type {};
template <class H, class = void>
struct HasSharedMemory : std::false_type {};
template <class H>
struct HasSharedMemory<H, std::void_t<decltype(std::declval<const H&>().has_shared_memory())>> : std::true_type {};

template <class H, class = void>
struct HasElementCount : std::false_type {};
template <class H>
struct HasElementCount<H, std::void_t<decltype(std::declval<const H&>().has_element_count())>> : std::true_type {};

// The element count a header declares, if it does (checked against what arrives).
template <class H>
std::optional<uint64_t> DeclaredCount(const H& header) {
  if (!header.has_element_count()) return std::nullopt;
  return header.element_count();
}

// How a call's messages cross the wire. ProtoWire: gRPC's protobuf codec (the reactor is typed on
// Req and Resp). A raw RPC's wire (ScanWire) reads and writes grpc::ByteBuffer and converts them
// itself, so its data bytes stay in one Payload from request to response.
template <class Req, class Resp>
struct ProtoWire {
  using In = Req;
  using Out = Resp;
  static grpc::Status Decode(In& in, const CallContext&, Req* req) {
    *req = std::move(in);
    in.Clear();
    return grpc::Status::OK;
  }
  static Out Encode(Resp&& resp) { return std::move(resp); }
};

template <class Req, class Resp, class ReactorBase, class Wire = ProtoWire<Req, Resp>>
class StreamingCall : public ReactorBase, public LaneEndpoint<Req, Resp>, CallLifetime {
  using WireIn = typename Wire::In;
  using WireOut = typename Wire::Out;
  static constexpr bool kBidi = std::is_base_of_v<grpc::ServerBidiReactor<WireIn, WireOut>, ReactorBase>;
  static constexpr size_t kMaxBuffered = 3;  // requests waiting + responses unsent, per call

 public:
  StreamingCall(CallContext ctx, grpc::CallbackServerContext* rpc, const char* op_name)
      : CallLifetime(ctx.admission), ctx_(std::move(ctx)), rpc_(rpc), op_name_(op_name), start_(Clock::now()) {
    ctx_.metrics->CallStarted();
  }

  // Hands the call to gRPC: issues the first read. Call once, right after construction.
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    MaybeReadLocked();
  }

  void OnReadDone(bool ok) override {
    // Decoded before the lock (a raw RPC gathers its chunk here): only the read path touches
    // incoming_, and one read is in flight at a time.
    Req req;
    grpc::Status decoded = ok ? Wire::Decode(incoming_, ctx_, &req) : grpc::Status::OK;
    std::unique_lock<std::mutex> lock(mu_);
    reading_ = false;
    if (!ok) {
      if (rpc_->IsCancelled()) {
        return FailAndMaybeFinish(lock, grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
      }
      read_closed_ = true;
      last_read_ = Clock::now();
      if (requests_ == 0) return FailAndMaybeFinish(lock, EmptyStreamStatus());
      if (WorkInlineLocked()) {
        lock.unlock();
        return Work(true);
      }
      MaybeWorkLocked();
      return;
    }
    const uint64_t index = requests_++;
    if (finish_requested_) return;
    if (!decoded.ok()) {
      return FailAndMaybeFinish(lock, grpc::Status(decoded.error_code(), "request #" + std::to_string(index) + ": " +
                                                                            decoded.error_message()));
    }
    grpc::Status status = CheckHeaderPlacement(index, req.has_header());
    bool lane_header = false;
    if constexpr (HasLanes<std::decay_t<decltype(req.header())>>::value) {
      lane_header = status.ok() && index == 0 && req.header().has_lanes();
      if (lane_header) status = JoinLanes(req.header());
    }
    if (!lane_header && status.ok() && index == 0) {
      status = AcceptHeader(req.header());
      header_accepted_ = status.ok();
      if (status.ok()) status = Admit(ReservationBytes(req.header()) + HeldBytes());
    }
    if (status.ok()) status = CheckRequest(req, index);
    if (status.ok() && join_) status = CheckLaneChunk(req, index, lane_spec_, &lane_short_seen_);
    if (!status.ok()) return FailAndMaybeFinish(lock, status);
    pending_.push_back(std::move(req));
    if (WorkInlineLocked()) {
      MaybeReadLocked();  // the next read is under way while this thread works
      lock.unlock();
      return Work(true);
    }
    MaybeWorkLocked();
    MaybeReadLocked();
  }

  // Overrides ServerBidiReactor::OnWriteDone for bidi calls; unused by client-streaming ones.
  void OnWriteDone(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    send_us_ += Micros(Clock::now() - write_start_);
    outgoing_.pop_front();
    if (!ok) return FailAndMaybeFinish(lock, grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped receiving"));
    MaybeWriteLocked(true);  // the rest of the queue, also after the final response was queued
    MaybeReadLocked();
    MaybeWorkLocked();
    MaybeFinish(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    FailAndMaybeFinish(lock, grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
  }

  void OnDone() override {
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

 protected:
  virtual ~StreamingCall() = default;

  // --- hooks, RPC-specific ---
  // gRPC thread: validate the header and keep what Open needs. (A valid header on an engine
  // that is not healthy is refused after it: AcceptHeader.)
  virtual grpc::Status OnHeader(const decltype(std::declval<Req>().header())& header) = 0;
  // gRPC thread: check one request's payload sizes (request `index`, from 0).
  virtual grpc::Status CheckRequest(const Req& req, uint64_t index) = 0;
  // Worker: create the engine session (once admitted).
  virtual void Open() = 0;
  // Worker: process one request in order; append responses to `out`. Throws on engine errors.
  virtual void Process(Req& req, std::vector<Resp>& out) = 0;
  // Lanes (the join's driver): Process in two halves, so that the next request can begin
  // before this one ends. BeginChunk may leave the responses it appends to `out` unfinished
  // until EndChunk(its ticket); `out` stays put in between. Default: Process in BeginChunk.
  virtual uint64_t BeginChunk(Req& req, std::vector<Resp>& out) {
    Process(req, out);
    return 0;
  }
  virtual void EndChunk(uint64_t /*ticket*/) {}
  // Chunks of at most this many elements may end on another thread while the next one begins
  // (engine::ScanSession::overlap_elements); 0: never.
  virtual uint64_t OverlapElements() const { return 0; }
  // Worker: after the last request; final checks, the final response (bidi: append to `out`).
  virtual grpc::Status Complete(std::vector<Resp>& out) = 0;
  // Whether the work for request *req (nullptr: Complete) is microseconds on the host, so that
  // gRPC's thread may do it itself instead of handing it to a worker and back (the hand-offs
  // were most of a 1024-element call's time on the server). Asked under the lock with no worker
  // running; session_open false asks whether it might be (before Open), true whether it is.
  // Default: never.
  virtual bool RunsInline(const Req* /*req*/, bool /*session_open*/) const { return false; }
  // For the log line: "dtype=int32 n=... algorithm=..."
  virtual std::string LogFields() const = 0;
  // For the metrics, asked only once OnHeader has accepted the header (before that all are
  // ""): the dtype's name, the algorithm that ran ("" when no engine session was opened) and
  // the session's device (DeviceSet; "" otherwise: see Device()).
  struct MetricLabels {
    std::string dtype;
    std::string algorithm;
    std::string device;
  };
  virtual MetricLabels Labels() const = 0;
  // What the call holds beyond its buffered messages (Scan2D: a partial row), known once
  // OnHeader accepted the header; added to its admission reservation.
  virtual uint64_t HeldBytes() const { return 0; }
  // Lanes, client-streaming calls: take the array's answer that Complete wrote on the owner lane.
  virtual void CopyFinalFrom(const StreamingCall& /*owner*/) {}

  // --- LaneEndpoint: what the array's join asks of this lane (lane_join.h)
  void JoinAdmitted() override {
    std::unique_lock<std::mutex> lock(mu_);
    admitted_ = true;
    admitted_at_ = Clock::now();
    if (finish_requested_) return;
    MaybeWorkLocked();
    MaybeReadLocked();
  }
  void JoinFailed(const grpc::Status& status) override {
    std::unique_lock<std::mutex> lock(mu_);
    join_told_ = true;  // the join knows already
    FailAndMaybeFinish(lock, status);
  }
  void JoinDeliver(std::vector<Resp> out) override {
    std::unique_lock<std::mutex> lock(mu_);
    --parked_;
    if (finish_requested_) return;
    for (auto& r : out) outgoing_.push_back(Wire::Encode(std::move(r)));
    MaybeWriteLocked();
    MaybeReadLocked();
    MaybeWorkLocked();
  }
  void JoinFinished(std::vector<Resp> final_out, LaneEndpoint<Req, Resp>* owner) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (finish_requested_) return;
    if (owner != this) {
      CopyFinalFrom(*static_cast<const StreamingCall*>(owner));
      // Results that Complete flushed (if an RPC ever holds some back) go once, on the owner;
      // every lane gets the last response, the one with the array's counts and Timing.
      if (final_out.size() > 1) final_out.erase(final_out.begin(), final_out.end() - 1);
    }
    for (auto& r : final_out) outgoing_.push_back(Wire::Encode(std::move(r)));
    completed_ = true;
    finish_requested_ = true;  // status_ stays OK: finish once the last response is out
    MaybeWriteLocked();
    MaybeFinish(lock);
  }
  void JoinReleased() override {
    std::unique_lock<std::mutex> lock(mu_);
    join_released_ = true;
    --refs_;  // the join's
    MaybeFinish(lock);
  }
  grpc::Status JoinBegin(Req& req, std::vector<Resp>& out, uint64_t* ticket) override {
    try {
      if (!opened_) Open();
      opened_ = true;
      *ticket = BeginChunk(req, out);
    } catch (...) {
      return EngineFailure(std::current_exception());
    }
    return grpc::Status::OK;
  }
  bool JoinOverlaps(uint64_t chunk_elements) override { return chunk_elements <= OverlapElements(); }
  grpc::Status JoinEnd(uint64_t ticket) override {
    try {
      EndChunk(ticket);
    } catch (...) {
      return EngineFailure(std::current_exception());
    }
    return grpc::Status::OK;
  }
  grpc::Status JoinComplete(std::vector<Resp>& out) override {
    try {
      if (!opened_) Open();
      opened_ = true;
      return Complete(out);
    } catch (...) {
      return EngineFailure(std::current_exception());
    }
  }

  // Shared-memory calls run their whole array in Complete: between pieces they stop if cancelled.
  bool Cancelled() const { return rpc_->IsCancelled(); }
  std::string Peer() const { return rpc_->peer(); }

  // The device that ran the call: its session's (one of a DeviceSet's), else the engine's.
  std::string Device(const MetricLabels& labels) const {
    return labels.device.empty() ? ctx_.engine->device_name() : labels.device;
  }

  // Timing common to every call; engine stage times come from the session via stages_.
  void FillTiming(v1::Timing* t, const std::string& algorithm) const {
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

  CallContext ctx_;
  grpc::CallbackServerContext* rpc_;
  // Counted by Process (worker) and read by Complete (same worker): no lock needed. OnDone
  // reads them too, after Finish, which waits for the worker.
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t chunks_ = 0;
  engine::StageTimes stages_;  // the engine sessions add their stage times here

 private:
  // OnDone: the call's one record in the metrics. Bytes and stage times count for successful
  // calls only (Metrics::CallDone), so only theirs are gathered. They are the numbers the
  // call's Timing reported, except send and total: Timing is written before the final response
  // goes out, these run to OnDone and so include it.
  void RecordMetrics() {
    CallRecord r;
    r.op = op_name_;
    r.status = CodeName(status_.error_code());
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
      if constexpr (kBidi) r.set(Stage::kSend, send_us_.load() * 1e-6);
      r.set(Stage::kTotal, seconds(Clock::now() - start_));
    }
    ctx_.metrics->CallDone(r);
  }

  // What this call may buffer at once, reserved from admission's byte budget: at most
  // kMaxBuffered messages waiting plus the one being read and the one being processed, or, when
  // the header declares the element count, the whole array three times over (a compaction may
  // answer values and int64 indices), whichever is less.
  template <class Header>
  uint64_t ReservationBytes(const Header& header) const {
    if constexpr (HasSharedMemory<Header>::value) {
      if (header.has_shared_memory()) return 4096;  // the array stays in the client's region
    }
    const uint64_t cap = (kMaxBuffered + 2) * MaxReceiveMessageBytes(*ctx_.options);
    if constexpr (!HasElementCount<Header>::value) {
      return cap;
    } else {
      engine::DType dtype;
      if (!header.has_element_count() || !ToEngineDType(header.dtype(), &dtype).ok()) return cap;
      if (header.element_count() > cap) return cap;  // also keeps the product below from overflowing
      return std::min(cap, 3 * header.element_count() * engine::SizeOf(dtype) + 4096);
    }
  }

  // The handler's OnHeader, then the engine's health: every RPC refuses a valid call with
  // UNAVAILABLE while the engine cannot serve (a sticky device fault), naming why.
  template <class Header>
  grpc::Status AcceptHeader(const Header& header) {
    grpc::Status status = OnHeader(header);
    if (status.ok() && !ctx_.engine->healthy()) status = EngineUnavailable(*ctx_.engine);
    return status;
  }

  // The header of one lane: checks the lanes field, lets the RPC check the rest (the count it
  // declares is the array's, which the join checks), then joins the array.
  template <class Header>
  grpc::Status JoinLanes(const Header& header) {
    if (header.has_shared_memory()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "header.shared_memory: cannot be combined with header.lanes (one call reads the whole region)"};
    }
    if (header.has_device_memory()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "header.device_memory: cannot be combined with header.lanes (one call reads the whole array)"};
    }
    engine::DType dtype;
    if (auto s = ToEngineDType(header.dtype(), &dtype); !s.ok()) return s;
    LaneSpec spec;
    if (auto s = CheckLanes(header.lanes(), engine::SizeOf(dtype), *ctx_.options, &spec); !s.ok()) return s;
    if constexpr (std::is_same_v<Header, v1::CompactHeader>) {
      spec.flags = header.selector_case() == v1::CompactHeader::kUseFlags && header.use_flags();
    }
    Header local = header;
    local.clear_element_count();
    grpc::Status status = AcceptHeader(local);
    header_accepted_ = status.ok();
    if (!status.ok()) {
      ctx_.lanes->Fail(spec, status);  // the siblings learn now rather than at the lane wait
      return status;
    }
    const std::optional<uint64_t> declared = DeclaredCount(header);
    std::shared_ptr<LaneJoin<Req, Resp>> join;
    if (auto s = ctx_.lanes->Find<Req, Resp>(spec, header, declared, op_name_, &join); !s.ok()) return s;
    header_at_ = Clock::now();
    // The array's reservation, once: what its lanes may buffer, or three times a declared count.
    uint64_t reservation = spec.lane_count * ((kMaxBuffered + 2) * MaxReceiveMessageBytes(*ctx_.options));
    if (declared && *declared <= reservation) {
      reservation = std::min(reservation, 3 * *declared * engine::SizeOf(dtype) + 4096);
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

  grpc::Status Admit(uint64_t reservation) {
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

  void OnAdmitted() {
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

  void MaybeReadLocked() {
    if (reading_ || read_closed_ || finish_requested_) return;
    if (requests_ > 0 && !admitted_) return;  // queued calls hold only their header
    if (pending_.size() + outgoing_.size() + parked_ >= kMaxBuffered) return;
    reading_ = true;
    this->StartRead(&incoming_);
  }

  // Takes the worker's part for gRPC's thread when what is pending runs inline (RunsInline),
  // opening the session here if need be (cheap; an Open that throws is left to a worker, which
  // reports it). True: the caller must unlock and call Work(true).
  bool WorkInlineLocked() {
    if (join_ || !WorkWaitingLocked()) return false;
    const Req* next = pending_.empty() ? nullptr : &pending_.front();
    if (!RunsInline(next, opened_)) return false;
    if (!opened_) {
      try {
        Open();
      } catch (...) {
        return false;
      }
      opened_ = true;
      if (!RunsInline(next, true)) return false;
    }
    worker_running_ = true;
    ++refs_;
    return true;
  }

  // Whether there is work for a worker to take up: a request, or the end to complete, and no
  // worker on it yet.
  bool WorkWaitingLocked() const {
    if (!admitted_ || worker_running_ || finish_requested_ || completed_ || lane_closed_) return false;
    return !pending_.empty() || read_closed_;
  }

  void MaybeWorkLocked() {
    if (!WorkWaitingLocked()) return;
    worker_running_ = true;
    ++refs_;
    ctx_.executor->Post([this] { Work(); });
  }

  // Starts the next write. StartWrite serializes the response (with ProtoWire a copy of its MiB
  // of data; a raw RPC's payload is only referenced) and often writes the socket inline: as
  // long as computing the chunk. A worker or a lane join's driver therefore hands it to another
  // executor thread and goes on computing (also a small one: started by the worker itself, a
  // 1024-element compaction's server time grew by ~55 us, bench/notes/small-calls.md 2026-11-26);
  // OnWriteDone and inline work, already on a gRPC thread, start the next one themselves.
  void MaybeWriteLocked(bool on_grpc_thread = false) {
    if constexpr (kBidi) {
      if (writing_ || outgoing_.empty() || LastWithStatusLocked()) return;
      writing_ = true;
      write_start_ = Clock::now();
      WireOut* next = &outgoing_.front();  // stays put: only OnWriteDone pops it
      if (on_grpc_thread) return this->StartWrite(next);
      ++refs_;
      ctx_.executor->Post([this, next] {
        this->StartWrite(next);
        std::unique_lock<std::mutex> lock(mu_);
        --refs_;
        ReleaseIfUnused(lock);
      });
    }
  }

  // Worker task: processes pending requests in order until none is left. on_grpc_thread: run
  // inline by gRPC's thread (WorkInlineLocked), which hands over to a worker as soon as what
  // comes next does not run inline.
  void Work(bool on_grpc_thread = false) {
    std::unique_lock<std::mutex> lock(mu_);
    if (join_) return WorkLane(lock);
    while (!finish_requested_) {
      const bool open_needed = !opened_;
      const bool have_request = !pending_.empty();
      const bool at_end = !have_request && read_closed_;
      if (!have_request && !at_end) break;
      if (on_grpc_thread && !RunsInline(have_request ? &pending_.front() : nullptr, !open_needed)) {
        ctx_.executor->Post([this] { Work(); });  // worker_running_ and the reference go with it
        return;
      }
      Req req;
      if (have_request) {
        req = std::move(pending_.front());
        pending_.pop_front();
      }
      lock.unlock();
      std::vector<Resp> out;
      grpc::Status status;
      try {
        if (open_needed) Open();
        if (have_request) {
          Process(req, out);
        } else {
          status = Complete(out);
        }
      } catch (...) {
        status = EngineFailure(std::current_exception());
      }
      lock.lock();
      opened_ = true;
      if (!status.ok()) {
        worker_running_ = false;
        --refs_;
        FailAndMaybeFinish(lock, status);
        return;
      }
      if (finish_requested_) break;
      for (auto& r : out) outgoing_.push_back(Wire::Encode(std::move(r)));
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

  // The status of an exception from the RPC's hooks; tells the server to re-check the engine.
  grpc::Status EngineFailure(std::exception_ptr error) {
    grpc::Status status = StatusFromException(error);
    if (ctx_.on_engine_failure) ctx_.on_engine_failure();
    if (status.error_code() == grpc::StatusCode::INTERNAL && !ctx_.engine->healthy()) {
      // The device broke under this call: UNAVAILABLE tells the client to retry elsewhere.
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the " + ctx_.engine->name() + " engine failed: " + status.error_message());
    }
    return status;
  }

  // Worker task of a lane: hands its chunks to the join in order (the join runs them in global
  // order, maybe right here), then tells it the lane has ended.
  void WorkLane(std::unique_lock<std::mutex>& lock) {
    while (!finish_requested_ && !lane_closed_) {
      if (pending_.empty() && !read_closed_) break;
      if (pending_.empty()) {
        lane_closed_ = true;
        lock.unlock();
        join_->Closed(lane_spec_.lane);
        lock.lock();
        break;
      }
      Req req = std::move(pending_.front());
      pending_.pop_front();
      const bool chunk = RequestElements(req, lane_spec_.element_size) > 0;
      if (chunk) ++parked_;  // counts toward kMaxBuffered until its results come back
      lock.unlock();
      if (chunk) join_->Submit(lane_spec_.lane, std::move(req));
      lock.lock();
      MaybeReadLocked();
    }
    worker_running_ = false;
    --refs_;
    MaybeFinish(lock);
  }

  // Records the first failure and stops all further work; finishes when no write is pending.
  // Also after a successful completion: a failed write means the final response never left.
  void FailAndMaybeFinish(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    if (!finished_ && status_.ok()) status_ = status;
    finish_requested_ = true;
    pending_.clear();
    if (join_ && !join_told_) {
      // A lane failed on its own: its siblings fail too. Posted, as the join calls other lanes.
      join_told_ = true;
      ctx_.executor->Post([join = join_, lane = lane_spec_.lane, status] { join->LaneFailed(lane, status); });
    }
    if (writing_) {
      outgoing_.erase(outgoing_.begin() + 1, outgoing_.end());  // the front one is in flight
    } else {
      outgoing_.clear();
    }
    MaybeFinish(lock);
  }

  // Finishes the call once everything before it is done. Releases the lock; `this` may be
  // gone when it returns.
  void MaybeFinish(std::unique_lock<std::mutex>& lock) {
    if (finish_requested_ && !finished_ && !writing_ && !worker_running_ && join_released_) {
      if (outgoing_.empty()) {
        finished_ = true;
        grpc::Status status = status_;
        lock.unlock();
        this->Finish(status);
        return;
      }
      if constexpr (kBidi) {
        if (LastWithStatusLocked()) {
          finished_ = writing_ = true;
          WireOut* last = &outgoing_.front();  // stays put until OnDone
          lock.unlock();
          this->StartWriteAndFinish(last, grpc::WriteOptions(), grpc::Status::OK);
          return;
        }
      }
    }
    ReleaseIfUnused(lock);
  }

  // A successful call's final response, the only message left: MaybeFinish sends it together
  // with the status (StartWriteAndFinish: one operation, no OnWriteDone to wait for before a
  // separate Finish), so MaybeWriteLocked leaves it.
  bool LastWithStatusLocked() const { return completed_ && status_.ok() && outgoing_.size() == 1; }

  std::mutex mu_;
  const char* op_name_;
  WireIn incoming_;
  uint64_t requests_ = 0;
  bool header_accepted_ = false;  // OnHeader returned OK: Labels() may be asked
  bool reading_ = false;
  bool read_closed_ = false;
  bool admitted_ = false;
  bool opened_ = false;
  bool worker_running_ = false;
  bool completed_ = false;
  bool writing_ = false;
  bool finish_requested_ = false;
  bool finished_ = false;
  std::deque<Req> pending_;
  std::deque<WireOut> outgoing_;  // encoded: a raw RPC's payloads are slices now
  grpc::Status status_;
  Clock::time_point start_, header_at_, admitted_at_, last_read_, write_start_;
  std::atomic<uint64_t> send_us_{0};  // read by the worker while later writes are in flight
  // Lanes (lane_join.h); unused by a call without them.
  std::shared_ptr<LaneJoin<Req, Resp>> join_;
  LaneSpec lane_spec_;
  bool join_released_ = true;   // the join holds no reference (false from attach to JoinReleased)
  bool join_told_ = false;      // the join knows this lane failed
  bool lane_closed_ = false;    // the lane's end was handed to the join
  bool lane_short_seen_ = false;
  size_t parked_ = 0;           // chunks handed to the join whose results have not come back
};

// A call's start: made, then handed to gRPC (Begin issues its first read). gRPC's reactor
// pointer is the call itself, which deletes itself at the end (CallLifetime).
template <class Call, class... Args>
Call* StartCall(Args&&... args) {
  auto* call = new Call(std::forward<Args>(args)...);
  call->Begin();
  return call;
}

}  // namespace gpuscan::server
