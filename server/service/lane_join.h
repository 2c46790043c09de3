// Striped lanes: one logical array sent over K concurrent calls ("lanes"), joined here.
//
// A LaneJoin is the meeting point of one array's lanes, keyed by the client's 128-bit array id in
// the LaneRegistry. It owns what a single call would own: one admission slot and reservation
// (an array counts once), the engine session (hosted by the first lane to arrive, the "owner":
// its Open/Process/Complete hooks are the array's), and a small reorder window of chunks that
// arrived ahead of their turn. Chunk g comes on lane g mod K; each lane's reactor hands its
// chunks over in its own order and the join runs them in global order. Whichever thread hands
// over the next chunk in global order becomes the driver: it runs that chunk and every
// following one already waiting, then stops. No lock is held while the engine computes, and
// chunk bytes are moved, never copied. Each chunk's results go back to the lane it came from.
//
// Failures: a lane that fails (bad chunk, cancelled, write failed) fails the join, which fails
// every lane with a status naming that lane; lanes that have not all arrived within
// --lane-wait-ms fail with DEADLINE_EXCEEDED naming the missing ones (the registry's timer).
// A lane finishes only once the join has released it, so no lane's reactor ends while the
// driver may still touch it (the owner's session above all).
//
// Locks: a lane may call into the join holding its own lock only while attaching; the join and
// the registry never call a lane while holding their own locks (they collect, unlock, call).
// Nothing below the service knows lanes exist.
//
// The join knows no RPC: a lane hands it each chunk boxed (LaneChunkOf<Req>, with the counts the
// join checks) and the owner's hooks fill boxed results (LaneResultsOf<Resp>) that go back to
// the lanes; only the lane's reactor (streaming_call.h) opens the boxes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "service/admission.h"
#include "service/executor.h"
#include "service/lane_spec.h"
#include "service/server.h"

namespace gpuscan::server {

using LaneClock = std::chrono::steady_clock;

// One lane request handed to the join: what the join counts of it, and (LaneChunkOf) the request.
struct LaneChunk {
  virtual ~LaneChunk() = default;
  uint64_t elements = 0;  // RequestElements: values for Compact
  uint64_t bytes = 0;     // RequestBytes: counted against --max-request-bytes
};
template <class Req>
struct LaneChunkOf final : LaneChunk {
  Req req;
};

// The responses of one chunk (or of the array's end), filled by the owner's hooks.
struct LaneResults {
  virtual ~LaneResults() = default;
};
template <class Resp>
struct LaneResultsOf final : LaneResults {
  std::vector<Resp> out;
};

// What the join asks of a lane's reactor. Each method takes the lane's own lock; the join calls
// them holding none of its own.
class LaneEndpoint {
 public:
  virtual void JoinAdmitted() = 0;                          // the array holds its admission slot
  virtual void JoinFailed(const grpc::Status& status) = 0;  // end this lane with `status`
  virtual void JoinDeliver(std::unique_ptr<LaneResults> out) = 0;  // the results of this lane's next chunk
  // The array is complete: queue `final_out` (bidi) or take the owner's answer (Reduce).
  virtual void JoinFinished(const LaneResults& final_out, LaneEndpoint* owner) = 0;
  virtual void JoinReleased() = 0;  // the join will not call this lane again
  // Owner only, from the driver (one thread at a time, no lock held): run the RPC's hooks.
  // They catch engine errors and return them as the status the call would get. A chunk runs
  // in two halves: JoinBegin (its responses in *out, which it makes, may stay unfinished) and
  // JoinEnd(ticket), which the driver calls after beginning the next chunk, so the engine
  // overlaps them.
  virtual grpc::Status JoinBegin(LaneChunk& chunk, std::unique_ptr<LaneResults>* out, uint64_t* ticket) = 0;
  virtual grpc::Status JoinEnd(uint64_t ticket) = 0;
  // Whether JoinEnd of one chunk may run on another thread while the next one begins, for
  // chunks of `chunk_elements` (asked once, after the first JoinBegin).
  virtual bool JoinOverlaps(uint64_t chunk_elements) = 0;
  virtual grpc::Status JoinComplete(std::unique_ptr<LaneResults>* out) = 0;

 protected:
  ~LaneEndpoint() = default;
};

class LaneRegistry;

class LaneJoin final : public std::enable_shared_from_this<LaneJoin> {
 public:
  using Endpoint = LaneEndpoint;

  // `header`: the header of the lane that made the join; every lane must agree with it (and with
  // `spec`, which it gave) whichever attaches first. `chunk_type`: the RPC's request type.
  LaneJoin(LaneRegistry* registry, Admission* admission, Executor* executor, const ServerOptions* options,
           const LaneSpec& spec, const google::protobuf::Message& header, std::optional<uint64_t> declared,
           const char* rpc, std::type_index chunk_type);

  bool all_arrived() const { return all_arrived_.load(); }
  const char* rpc() const { return rpc_; }
  std::type_index chunk_type() const { return chunk_type_; }

  // A lane's header arrived (its reactor's lock held). The first lane becomes the owner and asks
  // admission for the array. On OK the join holds a reference to the lane until JoinReleased;
  // *admitted says whether the array already holds its slot (else JoinAdmitted follows).
  grpc::Status Attach(const google::protobuf::Message& header, const LaneSpec& spec, uint64_t reservation,
                      Endpoint* lane, bool* admitted);
  // A lane's next chunk (its worker thread, no lock held). Runs chunks in global order while
  // this thread holds the next one.
  void Submit(uint32_t lane, std::unique_ptr<LaneChunk> chunk);
  // The lane's client half-closed and all its chunks were handed over.
  void Closed(uint32_t lane);
  // The lane failed on its own (its status already set): fail its siblings, naming it.
  void LaneFailed(uint32_t lane, const grpc::Status& status);
  // Lanes still missing after `waited` (the registry's timer): fail them.
  void Expire(std::chrono::milliseconds waited);

 private:
  // A chunk begun but not yet ended, with the lane its results go back on.
  struct Begun {
    uint64_t ticket = 0;
    Endpoint* to = nullptr;
    std::unique_ptr<LaneResults> out;  // unfinished until JoinEnd: must not move
  };
  using Window = std::map<uint64_t, std::unique_ptr<LaneChunk>>;

  bool Admit(uint64_t reservation);
  void OnAdmitted();
  grpc::Status CheckGap() const;
  void FailAfterShort(std::unique_lock<std::mutex>& lock, uint64_t g);
  std::unique_ptr<LaneChunk> TakeNext(std::unique_lock<std::mutex>& lock, Window::iterator it, Begun* cur);
  grpc::Status Begin(LaneChunk& chunk, Begun* cur);
  grpc::Status EndChunk(Begun& b);
  void Drive(std::unique_lock<std::mutex>& lock);
  void DriveOverlapped(std::unique_lock<std::mutex>& lock);
  void PostEnds(std::unique_lock<std::mutex>&);
  void RunEnds(std::unique_lock<std::mutex>& lock);
  void Complete(std::unique_lock<std::mutex>& lock);
  void FailLocked(std::unique_lock<std::mutex>& lock, std::optional<uint32_t> culprit, const grpc::Status& status,
                  std::optional<uint32_t> newcomer = std::nullopt);
  // Once the array is over and nobody is using the lanes: give back the admission slot, leave
  // the registry and let every lane finish. Lock held on entry and return.
  void MaybeRelease(std::unique_lock<std::mutex>& lock);

  LaneRegistry* registry_;
  Executor* executor_;
  Admission* admission_;
  const ServerOptions* options_;
  const LaneSpec spec_;
  const std::string id_text_;
  const std::optional<uint64_t> declared_;
  const uint64_t max_request_bytes_;
  const char* rpc_;
  const std::type_index chunk_type_;

  std::mutex mu_;
  Endpoint* owner_ = nullptr;            // the first lane to attach: its hooks run the array
  std::vector<Endpoint*> lanes_;         // by lane index; null until it arrives
  uint32_t attached_ = 0;
  std::atomic<bool> all_arrived_{false};
  std::vector<uint64_t> next_of_lane_;   // the global index of each lane's next chunk
  std::vector<bool> closed_;
  const std::unique_ptr<google::protobuf::Message> first_header_;  // the join's maker's
  const uint32_t first_lane_;
  uint32_t closed_count_ = 0;
  uint64_t min_closed_end_ = UINT64_MAX; // smallest chunk index that a closed lane never sent
  uint64_t max_submitted_ = 0;           // highest chunk index handed over, plus one
  Window window_;                        // chunks waiting for their turn (a few per lane)
  uint64_t next_ = 0;                    // the next chunk to run
  std::optional<uint64_t> short_at_;     // the short chunk, which must be the last
  uint64_t elements_ = 0, bytes_ = 0;
  bool driving_ = false;
  // Overlapped driving (DriveOverlapped): whether the session allows it (asked once), the
  // chunks begun and not yet ended, and who ends them.
  static constexpr size_t kInFlight = 2;
  std::optional<bool> overlaps_;
  std::deque<Begun> begun_;
  bool ending_ = false;        // a thread is in RunEnds
  bool ends_posted_ = false;   // a RunEnds task is queued
  std::condition_variable room_;
  LaneClock::duration driver_busy_{};    // time spent running chunks and handing results over
  const LaneClock::time_point created_ = LaneClock::now();
  int callers_ = 0;                      // threads calling lanes outside the lock
  bool failed_ = false, done_ = false, released_ = false;
  grpc::Status failure_;
  bool admitted_ = false, queued_ = false, holds_slot_ = false;
  uint64_t ticket_ = 0, reservation_ = 0;
};

}  // namespace gpuscan::server
