// StreamingCall: the reactor of one client-streaming or bidirectional call (Scan, Reduce,
// Compact, ...), in the style of gRPC's callback examples: it reads, writes and finishes, and
// owns the call's typed messages (the requests read and not yet processed, the responses not
// yet written). When to read, work, write and finish is CallCore's (call_core.h): admission,
// ordering, back-pressure and the end. The flow every such RPC has:
//
//   read header → validate → admission (maybe queue) → per request: read, check, hand to the
//   worker pool → worker: Open, Process each request in order, Complete → write responses in
//   order → Finish.
//
// The RPC-specific parts are the virtual hooks. A lane of a striped array (header.lanes) hands
// its chunks to the array's join instead of running them (CallCore::WorkLane; lane_join.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/call_context.h"
#include "service/call_core.h"
#include "service/call_header.h"
#include "service/lane_join.h"
#include "service/lane_spec.h"
#include "service/proto_wire.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::server {

template <class Req, class Resp, class ReactorBase, class Wire = ProtoWire<Req, Resp>>
class StreamingCall : public ReactorBase, public CallCore {
  using WireIn = typename Wire::In;
  using WireOut = typename Wire::Out;
  static constexpr bool kBidi = std::is_base_of_v<grpc::ServerBidiReactor<WireIn, WireOut>, ReactorBase>;

 public:
  StreamingCall(CallContext ctx, grpc::CallbackServerContext* rpc, const char* op_name)
      : CallCore(std::move(ctx), rpc, op_name, kBidi) {}

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
      if (status.ok()) status = Admit(ReservationBytes(req.header(), BufferCap()) + HeldBytes());
    }
    if (status.ok()) status = CheckRequest(req, index);
    if (status.ok() && join_) status = CheckLaneChunk(req, index, lane_spec_, &lane_short_seen_);
    if (!status.ok()) return FailAndMaybeFinish(lock, status);
    pending_.push_back(std::move(req));
    if (index == 0 && header_accepted_ && HeaderEndsStream()) {
      read_closed_ = true;  // the input is on the server: nothing more to read
      last_read_ = Clock::now();
    }
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
    outgoing_.pop_front();
    WriteDoneLocked(lock, ok);
  }

  void OnCancel() override { CancelCall(); }
  void OnDone() override { DoneCall(); }

 protected:
  virtual ~StreamingCall() = default;

  // --- hooks, RPC-specific and typed (the others: CallCore)
  // gRPC thread: validate the header and keep what Open needs. (A valid header on an engine
  // that is not healthy is refused after it: AcceptHeader.)
  virtual grpc::Status OnHeader(const decltype(std::declval<Req>().header())& header) = 0;
  // gRPC thread: check one request's payload sizes (request `index`, from 0).
  virtual grpc::Status CheckRequest(const Req& req, uint64_t index) = 0;
  // Worker: process one request in order; append responses to `out`. Throws on engine errors.
  virtual void Process(Req& req, std::vector<Resp>& out) = 0;
  // Lanes (the join's driver): Process in two halves, so that the next request can begin
  // before this one ends. BeginChunk may leave the responses it appends to `out` unfinished
  // until EndChunk(its ticket); `out` stays put in between. Default: Process in BeginChunk.
  virtual uint64_t BeginChunk(Req& req, std::vector<Resp>& out) {
    Process(req, out);
    return 0;
  }
  // Worker: after the last request; final checks, the final response (bidi: append to `out`).
  virtual grpc::Status Complete(std::vector<Resp>& out) = 0;
  // Whether the work for request *req (nullptr: Complete) is microseconds on the host, so that
  // gRPC's thread may do it itself instead of handing it to a worker and back (the hand-offs
  // were most of a 1024-element call's time on the server). Asked under the lock with no worker
  // running; session_open false asks whether it might be (before Open), true whether it is.
  // Default: never.
  virtual bool RunsInline(const Req* /*req*/, bool /*session_open*/) const { return false; }
  // Lanes, client-streaming calls: take the array's answer that Complete wrote on the owner lane.
  virtual void CopyFinalFrom(const StreamingCall& /*owner*/) {}
  // Worker, once the work is over (Complete ran, or a request failed): let go of what the call
  // held for it (resident arrays), before the status goes out: a client's next call must find
  // a dropped array's memory free, not waiting for this call's OnDone.
  virtual void ReleaseHeld() {}

  // --- LaneEndpoint, the typed halves: the boxes the join carries hold this RPC's messages
  void JoinDeliver(std::unique_ptr<LaneResults> results) override {
    std::unique_lock<std::mutex> lock(mu_);
    --parked_;
    if (finish_requested_) return;
    for (auto& r : static_cast<LaneResultsOf<Resp>&>(*results).out) outgoing_.push_back(Wire::Encode(std::move(r)));
    MaybeWriteLocked(false);
    MaybeReadLocked();
    MaybeWorkLocked();
  }

  void JoinFinished(const LaneResults& results, LaneEndpoint* owner) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (finish_requested_) return;
    std::vector<Resp> final_out = static_cast<const LaneResultsOf<Resp>&>(results).out;
    if (owner != this) {
      CopyFinalFrom(*static_cast<const StreamingCall*>(owner));
      // Results that Complete flushed (if an RPC ever holds some back) go once, on the owner;
      // every lane gets the last response, the one with the array's counts and Timing.
      if (final_out.size() > 1) final_out.erase(final_out.begin(), final_out.end() - 1);
    }
    for (auto& r : final_out) outgoing_.push_back(Wire::Encode(std::move(r)));
    completed_ = true;
    finish_requested_ = true;  // status_ stays OK: finish once the last response is out
    MaybeWriteLocked(false);
    MaybeFinish(lock);
  }

  grpc::Status JoinBegin(LaneChunk& chunk, std::unique_ptr<LaneResults>* results, uint64_t* ticket) override {
    std::vector<Resp>& out = NewResults(results);  // stays put in its box until JoinEnd
    try {
      OpenOnce();
      *ticket = BeginChunk(static_cast<LaneChunkOf<Req>&>(chunk).req, out);
    } catch (...) {
      return EngineFailure(std::current_exception());
    }
    return grpc::Status::OK;
  }

  grpc::Status JoinComplete(std::unique_ptr<LaneResults>* results) override {
    std::vector<Resp>& out = NewResults(results);
    try {
      OpenOnce();
      return Complete(out);
    } catch (...) {
      return EngineFailure(std::current_exception());
    }
  }

  static std::vector<Resp>& NewResults(std::unique_ptr<LaneResults>* results) {
    auto typed = std::make_unique<LaneResultsOf<Resp>>();
    std::vector<Resp>& out = typed->out;
    *results = std::move(typed);
    return out;
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
  // declares is the array's, which the join checks), then joins the array (CallCore::JoinArray).
  template <class Header>
  grpc::Status JoinLanes(const Header& header) {
    LaneSpec spec;
    if (auto s = CheckLaneHeader(header, *ctx_.options, &spec); !s.ok()) return s;
    Header local = header;
    local.clear_element_count();
    grpc::Status status = AcceptHeader(local);
    header_accepted_ = status.ok();
    if (!status.ok()) {
      ctx_.lanes->Fail(spec, status);  // the siblings learn now rather than at the lane wait
      return status;
    }
    return JoinArray(header, spec, DeclaredCount(header), typeid(Req));
  }

  // Starts the next write. StartWrite serializes the response (with ProtoWire a copy of its MiB
  // of data; a raw RPC's payload is only referenced) and often writes the socket inline: as
  // long as computing the chunk. A worker or a lane join's driver therefore hands it to another
  // executor thread and goes on computing (also a small one: started by the worker itself, a
  // 1024-element compaction's server time grew by ~55 us, bench/notes/small-calls.md 2026-11-26);
  // OnWriteDone and inline work, already on a gRPC thread, start the next one themselves.
  void MaybeWriteLocked(bool on_grpc_thread) override {
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

  // --- the worker's typed steps, for CallCore::Work
  bool NextRunsInlineLocked(bool session_open) const override {
    return RunsInline(pending_.empty() ? nullptr : &pending_.front(), session_open);
  }

  // Takes the next request (none: the end, to Complete), runs it without the lock (opening the
  // session first if need be), and, back under the lock, queues its responses unless the call
  // is finishing meanwhile.
  grpc::Status RunNextLocked(std::unique_lock<std::mutex>& lock, bool open_needed) override {
    const bool have_request = !pending_.empty();
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
    if (!have_request || !status.ok()) ReleaseHeld();
    lock.lock();
    opened_ = true;
    if (status.ok() && !finish_requested_) {
      for (auto& r : out) outgoing_.push_back(Wire::Encode(std::move(r)));
    }
    return status;
  }

  // A lane's next request, boxed for its join; null when it carries no chunk (a header alone).
  std::unique_ptr<LaneChunk> PopLaneChunkLocked() override {
    Req req = std::move(pending_.front());
    pending_.pop_front();
    const uint64_t elements = RequestElements(req, lane_spec_.element_size);
    if (elements == 0) return nullptr;
    auto chunk = std::make_unique<LaneChunkOf<Req>>();
    chunk->elements = elements;
    chunk->bytes = RequestBytes(req);
    chunk->req = std::move(req);
    return chunk;
  }

  // --- the I/O and the queues, for CallCore
  void StartReadLocked() override { this->StartRead(&incoming_); }
  size_t PendingLocked() const override { return pending_.size(); }
  size_t OutgoingLocked() const override { return outgoing_.size(); }
  void DropQueuedLocked() override {
    pending_.clear();
    if (writing_) {
      outgoing_.erase(outgoing_.begin() + 1, outgoing_.end());  // the front one is in flight
    } else {
      outgoing_.clear();
    }
  }
  void FinishUnlocked(const grpc::Status& status) override { this->Finish(status); }
  void WriteLastAndFinishUnlocked() override {
    if constexpr (kBidi) {
      WireOut* last = &outgoing_.front();  // stays put until OnDone
      this->StartWriteAndFinish(last, grpc::WriteOptions(), grpc::Status::OK);
    }
  }

  WireIn incoming_;
  std::deque<Req> pending_;
  std::deque<WireOut> outgoing_;  // encoded: a raw RPC's payloads are slices now
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
