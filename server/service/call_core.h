// CallCore: the part of a streaming call that knows no message type; StreamingCall
// (streaming_call.h), the reactor, owns the typed messages and the I/O. The core holds the
// call's state and decides from it when to read, work, write and finish:
//
//   admission (the call's own, or its array's through a lane join) → ordering (one worker at a
//   time runs the requests in order) → back-pressure (no new read while kMaxBuffered messages
//   are waiting to be processed or sent) → Finish once, after the last write.
//
// Threading: gRPC callbacks and the one worker task of a call may run concurrently; all state
// is under mu_. Finish is called outside the lock (gRPC may run OnDone inline from it). The
// object deletes itself once gRPC is done with it (OnDone) and no worker task, lane join or
// admission queue holds it (call_lifetime.h, shared with the Transport and Benchmark reactors).
//
// Metrics: a call is in flight from construction to OnDone, where it is recorded once (status,
// bytes, stage times): by then the worker is done with it, since Finish waits for the worker.
//
// Lanes: a call whose header sets `lanes` is one lane of a striped array. Its join (lane_join.h)
// is the collaborator it is given: the call hands it its chunks instead of running them, gets
// their results back from whichever thread runs them (JoinDeliver), and finishes once the join
// has released it. Admission is the join's, once per array.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/call_context.h"
#include "service/call_lifetime.h"
#include "service/lane_join.h"
#include "service/lane_spec.h"

namespace gpuscan::server {

using Clock = std::chrono::steady_clock;

inline uint64_t Micros(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// The status a call gets when the engine hit an unrecoverable error earlier.
inline grpc::Status EngineUnavailable(const engine::Engine& engine) {
  return {grpc::StatusCode::UNAVAILABLE, "the " + engine.name() + " engine is unavailable: " + engine.unhealthy_reason()};
}

// CallLifetime first: `delete this` in ReleaseIfUnused then frees CallCore's own address (GCC warned
// -Wfree-nonheap-object on the other order, speculating a CallLifetime alone).
class CallCore : protected CallLifetime, public LaneEndpoint {
 public:
  static constexpr size_t kMaxBuffered = 3;  // requests waiting + responses unsent, per call

  // --- LaneEndpoint, the halves that need no message type (the others: StreamingCall)
  void JoinAdmitted() override;
  void JoinFailed(const grpc::Status& status) override;
  void JoinReleased() override;
  grpc::Status JoinEnd(uint64_t ticket) override;
  bool JoinOverlaps(uint64_t chunk_elements) override;

 protected:
  CallCore(CallContext ctx, grpc::CallbackServerContext* rpc, const char* op_name, bool bidi);
  ~CallCore() override = default;

  // --- hooks, RPC-specific, that need no message type (the typed ones: StreamingCall)
  // Worker: create the engine session (once admitted).
  virtual void Open() = 0;
  // Lanes: the second half of a chunk that BeginChunk began (StreamingCall).
  virtual void EndChunk(uint64_t /*ticket*/) {}
  // Chunks of at most this many elements may end on another thread while the next one begins
  // (engine::ScanSession::overlap_elements); 0: never.
  virtual uint64_t OverlapElements() const { return 0; }
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
  // Whether the accepted header names all of the call's input (a resident array), so the call
  // runs without waiting for the client's half-close: grpcio's streaming stubs send it ~0.5 ms
  // after the header (measured on the H100 host), longer than a resident scan of 1K elements
  // takes. Requests after the header are then not read.
  virtual bool HeaderEndsStream() const { return false; }

  // --- what the reactor does for the core: its I/O and its typed queues
  virtual void StartReadLocked() = 0;           // the next read into the reactor's buffer
  virtual size_t PendingLocked() const = 0;     // requests read and not yet processed
  virtual size_t OutgoingLocked() const = 0;    // responses queued and not yet written
  virtual void DropQueuedLocked() = 0;          // a failure: pending and unsent ones go
  virtual void MaybeWriteLocked(bool on_grpc_thread) = 0;
  // The worker's typed steps (streaming_call.h): whether what comes next runs inline
  // (RunsInline), run the next request or the end (RunNextLocked: unlocks while the engine
  // works), and a lane's next request boxed for its join (null: no chunk in it).
  virtual bool NextRunsInlineLocked(bool session_open) const = 0;
  virtual grpc::Status RunNextLocked(std::unique_lock<std::mutex>& lock, bool open_needed) = 0;
  virtual std::unique_ptr<LaneChunk> PopLaneChunkLocked() = 0;
  virtual void FinishUnlocked(const grpc::Status& status) = 0;  // the reactor's Finish
  virtual void WriteLastAndFinishUnlocked() = 0;  // the front response together with OK

  // --- the flow (call_core.cc)
  void CancelCall();  // OnCancel
  void DoneCall();    // OnDone: log, metrics, and gRPC lets go
  void WriteDoneLocked(std::unique_lock<std::mutex>& lock, bool ok);  // OnWriteDone, front popped
  void MaybeReadLocked();
  bool WorkWaitingLocked() const;
  void MaybeWorkLocked();
  bool WorkInlineLocked();
  void Work(bool on_grpc_thread);
  void WorkLane(std::unique_lock<std::mutex>& lock);
  void FailAndMaybeFinish(std::unique_lock<std::mutex>& lock, const grpc::Status& status);
  void MaybeFinish(std::unique_lock<std::mutex>& lock);
  bool LastWithStatusLocked() const;
  grpc::Status Admit(uint64_t reservation);
  // The lane join's driver: the session, opened by the first chunk or the array's end.
  void OpenOnce() {
    if (!opened_) Open();
    opened_ = true;
  }
  // The most a call may buffer: kMaxBuffered messages waiting plus the one being read and the
  // one being processed.
  uint64_t BufferCap() const;
  // A lane's header, checked: join its array (found or made in the registry) and attach.
  grpc::Status JoinArray(const google::protobuf::Message& header, const LaneSpec& spec,
                         std::optional<uint64_t> declared, std::type_index chunk_type);
  // The status of an exception from the RPC's hooks; tells the server to re-check the engine.
  grpc::Status EngineFailure(std::exception_ptr error);

  // Shared-memory calls run their whole array in Complete: between pieces they stop if cancelled.
  bool Cancelled() const { return rpc_->IsCancelled(); }
  std::string Peer() const { return rpc_->peer(); }
  // The device that ran the call: its session's (one of a DeviceSet's), else the engine's.
  std::string Device(const MetricLabels& labels) const;
  // Timing common to every call; engine stage times come from the session via stages_.
  void FillTiming(v1::Timing* t, const std::string& algorithm) const;
  // The count and Timing that every RPC's final response carries.
  template <class Response>
  void FillFinal(Response& last, uint64_t elements, const std::string& algorithm) const {
    last.set_element_count(elements);
    FillTiming(last.mutable_timing(), algorithm);
  }

  CallContext ctx_;
  grpc::CallbackServerContext* rpc_;
  // Counted by Process (worker) and read by Complete (same worker): no lock needed. OnDone
  // reads them too, after Finish, which waits for the worker.
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t chunks_ = 0;
  engine::StageTimes stages_;  // the engine sessions add their stage times here

  std::mutex mu_;
  const char* op_name_;
  const bool bidi_;  // a bidi call writes responses as it goes; a client-streaming one at Finish
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
  grpc::Status status_;
  Clock::time_point start_, header_at_, admitted_at_, last_read_, write_start_;
  std::atomic<uint64_t> send_us_{0};  // read by the worker while later writes are in flight
  // Lanes (lane_join.h); unused by a call without them.
  std::shared_ptr<LaneJoin> join_;
  LaneSpec lane_spec_;
  bool join_released_ = true;   // the join holds no reference (false from attach to JoinReleased)
  bool join_told_ = false;      // the join knows this lane failed
  bool lane_closed_ = false;    // the lane's end was handed to the join
  bool lane_short_seen_ = false;
  size_t parked_ = 0;           // chunks handed to the join whose results have not come back

 private:
  void OnAdmitted();
  // OnDone: the call's one record in the metrics (call_core.cc says which numbers).
  void RecordMetrics();
};

}  // namespace gpuscan::server
