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
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>
#include <spdlog/spdlog.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "service/admission.h"
#include "service/executor.h"
#include "service/server.h"
#include "service/wire.h"

namespace gpuscan::server {

using LaneClock = std::chrono::steady_clock;

// What a lane's header says about its array, once checked alone (CheckLanes).
struct LaneSpec {
  std::string array_id;      // 16 bytes
  uint32_t lane = 0;
  uint32_t lane_count = 1;
  uint64_t chunk_elements = 1;
  size_t element_size = 4;
  bool flags = false;        // Compact with use_flags: each request carries its chunk's flags
};

// The lanes header of one call, alone: id length, lane < lane_count <= --max-lanes, a chunk size
// within the chunk limit. INVALID_ARGUMENT naming the field and value.
grpc::Status CheckLanes(const v1::Lanes& lanes, size_t element_size, const ServerOptions& options, LaneSpec* spec);
// The id as 32 hex digits, for messages and logs.
std::string ArrayIdText(const std::string& id);
// The first field where two headers of one array differ, ignoring lanes.lane:
// "header.dtype (DTYPE_INT64 here, DTYPE_INT32 on lane 0)"; empty when they agree.
std::string FirstDifference(const google::protobuf::Message& here, const google::protobuf::Message& first,
                            uint32_t first_lane);

// The status of a lane whose array already ended (`how`: OK, or the array's failure).
grpc::Status EndedStatus(const std::string& id, const grpc::Status& how);

// Elements of one lane request (values for Compact).
inline uint64_t RequestElements(const ScanChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestElements(const ReduceChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestElements(const CompactChunk& r, size_t esize) { return r.values.size() / esize; }
inline uint64_t RequestBytes(const ScanChunk& r) { return r.data.size(); }
inline uint64_t RequestBytes(const ReduceChunk& r) { return r.data.size(); }
inline uint64_t RequestBytes(const CompactChunk& r) { return r.values.size() + r.flags.size(); }
inline uint64_t RequestFlags(const ScanChunk&) { return 0; }
inline uint64_t RequestFlags(const ReduceChunk&) { return 0; }
inline uint64_t RequestFlags(const CompactChunk& r) { return r.flags.size(); }
// Histogram has no lanes (yet): these only let StreamingCall's lane paths compile for it.
inline uint64_t RequestElements(const HistogramChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestBytes(const HistogramChunk& r) { return r.data.size(); }
inline uint64_t RequestFlags(const HistogramChunk&) { return 0; }
// Nor have SegmentedScan, ReduceByKey, Sort and Scan2D.
inline uint64_t RequestElements(const v1::Scan2DRequest& r, size_t esize) { return r.data().size() / esize; }
inline uint64_t RequestBytes(const v1::Scan2DRequest& r) { return r.data().size(); }
inline uint64_t RequestFlags(const v1::Scan2DRequest&) { return 0; }
template <class Msg>
uint64_t RequestElements(const KeyedChunk<Msg>& r, size_t esize) { return r.data.size() / esize; }
template <class Msg>
uint64_t RequestBytes(const KeyedChunk<Msg>& r) { return r.data.size() + r.keys.size(); }
template <class Msg>
uint64_t RequestFlags(const KeyedChunk<Msg>&) { return 0; }
inline uint64_t RequestElements(const v1::SortRequest& r, size_t esize) { return r.keys().size() / esize; }
inline uint64_t RequestBytes(const v1::SortRequest& r) { return r.keys().size() + r.values().size(); }
inline uint64_t RequestFlags(const v1::SortRequest&) { return 0; }

// The checks of one lane request that need no other lane (gRPC thread, after the RPC's own
// CheckRequest): one chunk per request, full except the lane's last; with flags, the chunk's
// flags in the same request. *short_seen remembers a short chunk on this lane.
template <class Req>
grpc::Status CheckLaneChunk(const Req& req, uint64_t index, const LaneSpec& spec, bool* short_seen) {
  const uint64_t n = RequestElements(req, spec.element_size);
  const std::string where = "request #" + std::to_string(index) + " of lanes.lane=" + std::to_string(spec.lane);
  if (spec.flags && RequestFlags(req) != n) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            where + ": flags length " + std::to_string(RequestFlags(req)) + " differs from its " + std::to_string(n) +
                " values: with lanes each request carries one chunk's values and its flags"};
  }
  if (n == 0) return grpc::Status::OK;  // no chunk (a header sent alone)
  if (*short_seen) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            where + ": a chunk after this lane's short chunk; only the array's last chunk may be shorter than "
                    "lanes.chunk_elements=" + std::to_string(spec.chunk_elements)};
  }
  if (n > spec.chunk_elements) {
    return {grpc::StatusCode::INVALID_ARGUMENT, where + ": " + std::to_string(n) +
                                                    " elements is more than lanes.chunk_elements=" +
                                                    std::to_string(spec.chunk_elements) + " (one chunk per request)"};
  }
  if (n < spec.chunk_elements) *short_seen = true;
  return grpc::Status::OK;
}

// What the join asks of a lane's reactor. Each method takes the lane's own lock; the join calls
// them holding none of its own.
template <class Req, class Resp>
class LaneEndpoint {
 public:
  virtual void JoinAdmitted() = 0;                       // the array holds its admission slot
  virtual void JoinFailed(const grpc::Status& status) = 0;  // end this lane with `status`
  virtual void JoinDeliver(std::vector<Resp> out) = 0;   // the results of this lane's next chunk
  // The array is complete: queue `final_out` (bidi) or take the owner's answer (Reduce).
  virtual void JoinFinished(std::vector<Resp> final_out, LaneEndpoint* owner) = 0;
  virtual void JoinReleased() = 0;  // the join will not call this lane again
  // Owner only, from the driver (one thread at a time, no lock held): run the RPC's hooks.
  // They catch engine errors and return them as the status the call would get. A chunk runs
  // in two halves: JoinBegin (its responses in `out` may stay unfinished) and JoinEnd(ticket),
  // which the driver calls after beginning the next chunk, so the engine overlaps them.
  virtual grpc::Status JoinBegin(Req& req, std::vector<Resp>& out, uint64_t* ticket) = 0;
  virtual grpc::Status JoinEnd(uint64_t ticket) = 0;
  // Whether JoinEnd of one chunk may run on another thread while the next one begins, for
  // chunks of `chunk_elements` (asked once, after the first JoinBegin).
  virtual bool JoinOverlaps(uint64_t chunk_elements) = 0;
  virtual grpc::Status JoinComplete(std::vector<Resp>& out) = 0;

 protected:
  ~LaneEndpoint() = default;
};

class LaneRegistry;

// What the registry needs of a join, whatever its RPC.
class LaneJoinBase {
 public:
  virtual ~LaneJoinBase() = default;
  virtual bool all_arrived() const = 0;
  virtual void Expire(std::chrono::milliseconds waited) = 0;  // lanes still missing: fail them
  virtual const char* rpc() const = 0;
  virtual void LaneFailed(uint32_t lane, const grpc::Status& status) = 0;  // fail the siblings
};

template <class Req, class Resp>
class LaneJoin final : public LaneJoinBase, public std::enable_shared_from_this<LaneJoin<Req, Resp>> {
 public:
  using Endpoint = LaneEndpoint<Req, Resp>;

  // `header`: the header of the lane that made the join; every lane must agree with it (and with
  // `spec`, which it gave) whichever attaches first.
  LaneJoin(LaneRegistry* registry, Admission* admission, Executor* executor, const ServerOptions* options,
           const LaneSpec& spec, const google::protobuf::Message& header, std::optional<uint64_t> declared,
           const char* rpc)
      : registry_(registry),
        executor_(executor),
        admission_(admission),
        options_(options),
        spec_(spec),
        id_text_(ArrayIdText(spec.array_id)),
        declared_(declared),
        max_request_bytes_(options->max_request_bytes),
        rpc_(rpc),
        lanes_(spec.lane_count, nullptr),
        next_of_lane_(spec.lane_count),
        closed_(spec.lane_count, false),
        first_header_(header.New()),
        first_lane_(spec.lane) {
    first_header_->CopyFrom(header);
    for (uint32_t l = 0; l < spec.lane_count; ++l) next_of_lane_[l] = l;
  }

  bool all_arrived() const override { return all_arrived_.load(); }
  const char* rpc() const override { return rpc_; }

  // A lane's header arrived (its reactor's lock held). The first lane becomes the owner and asks
  // admission for the array. On OK the join holds a reference to the lane until JoinReleased;
  // *admitted says whether the array already holds its slot (else JoinAdmitted follows).
  grpc::Status Attach(const google::protobuf::Message& header, const LaneSpec& spec, uint64_t reservation,
                      Endpoint* lane, bool* admitted) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_ || done_) return EndedStatus(spec_.array_id, failed_ ? failure_ : grpc::Status::OK);
    // Same header, hence same lane count and chunk size: spec.lane indexes lanes_ safely below.
    const std::string diff = FirstDifference(header, *first_header_, first_lane_);
    if (!diff.empty()) {
      grpc::Status s(grpc::StatusCode::INVALID_ARGUMENT,
                     "lanes of array " + id_text_ + " disagree: " + diff + "; every lane must send the same header");
      FailLocked(lock, std::nullopt, s, spec.lane);
      return s;
    }
    if (lanes_[spec.lane] != nullptr) {
      return {grpc::StatusCode::ALREADY_EXISTS, "lanes.lane=" + std::to_string(spec.lane) + " of array " + id_text_ +
                                                    " has already joined (two calls claim the same lane)"};
    }
    lanes_[spec.lane] = lane;
    if (!owner_) {
      owner_ = lane;
      if (!Admit(reservation)) {
        lanes_[spec.lane] = nullptr;  // refused: the join holds no reference to it
        grpc::Status s(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       "server busy: " + std::to_string(admission_->active()) + " calls running (--max-concurrent=" +
                           std::to_string(options_->max_concurrent) + ") and " +
                           std::to_string(options_->max_queued) + " waiting (--max-queued), or the array's " +
                           std::to_string(reservation) + " bytes do not fit --max-inflight-bytes=" +
                           std::to_string(options_->max_inflight_bytes) + "; retry later");
        FailLocked(lock, std::nullopt, s);
        return s;
      }
    }
    if (++attached_ == spec_.lane_count) all_arrived_ = true;
    *admitted = admitted_;
    return grpc::Status::OK;
  }

  // A lane's next chunk (its worker thread, no lock held). Runs chunks in global order while
  // this thread holds the next one.
  void Submit(uint32_t lane, Req req) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_ || done_) return;
    const uint64_t g = next_of_lane_[lane];
    next_of_lane_[lane] += spec_.lane_count;
    const uint64_t bytes = RequestBytes(req);
    bytes_ += bytes;
    if (max_request_bytes_ != 0 && bytes_ > max_request_bytes_) {
      return FailLocked(lock, std::nullopt,
                        {grpc::StatusCode::RESOURCE_EXHAUSTED,
                         "the array's input exceeds --max-request-bytes=" + std::to_string(max_request_bytes_) +
                             " bytes (received " + std::to_string(bytes_) + " so far over its " +
                             std::to_string(spec_.lane_count) + " lanes)"});
    }
    if (short_at_ && g > *short_at_) return FailAfterShort(lock, g);
    max_submitted_ = std::max(max_submitted_, g + 1);
    if (auto s = CheckGap(); !s.ok()) return FailLocked(lock, std::nullopt, s);
    window_.emplace(g, std::move(req));
    Drive(lock);
  }

  // The lane's client half-closed and all its chunks were handed over.
  void Closed(uint32_t lane) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_ || done_ || closed_[lane]) return;
    closed_[lane] = true;
    ++closed_count_;
    min_closed_end_ = std::min(min_closed_end_, next_of_lane_[lane]);
    if (auto s = CheckGap(); !s.ok()) return FailLocked(lock, std::nullopt, s);
    Drive(lock);
  }

  // The lane failed on its own (its status already set): fail its siblings, naming it.
  void LaneFailed(uint32_t lane, const grpc::Status& status) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_ || done_) return;
    FailLocked(lock, lane, status);
  }

  void Expire(std::chrono::milliseconds waited) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_ || done_ || attached_ == spec_.lane_count) return;
    std::string missing;
    for (uint32_t l = 0; l < spec_.lane_count; ++l) {
      if (!lanes_[l]) missing += (missing.empty() ? "" : ", ") + std::to_string(l);
    }
    FailLocked(lock, std::nullopt,
               {grpc::StatusCode::DEADLINE_EXCEEDED,
                "lanes.array_id=" + id_text_ + ": lane(s) " + missing + " of lanes.lane_count=" +
                    std::to_string(spec_.lane_count) + " never arrived within --lane-wait-ms=" +
                    std::to_string(waited.count()) + " (" + std::to_string(attached_) +
                    " joined); all lanes of one array must reach the same server"});
  }

 private:
  // Admission for the whole array, once (the owner's header; lock held). False: refused.
  bool Admit(uint64_t reservation) {
    reservation_ = reservation;
    auto self = this->shared_from_this();
    switch (admission_->TryAdmit(reservation, [self] { self->OnAdmitted(); }, &ticket_)) {
      case Admission::Result::kAdmitted:
        admitted_ = holds_slot_ = true;
        return true;
      case Admission::Result::kQueued:
        queued_ = true;
        return true;
      case Admission::Result::kRejected:
        break;
    }
    return false;
  }

  void OnAdmitted() {
    std::unique_lock<std::mutex> lock(mu_);
    if (released_) {  // the array ended while queued, too late to withdraw: give the slot back
      lock.unlock();
      admission_->Release(reservation_);
      return;
    }
    queued_ = false;
    holds_slot_ = true;
    admitted_ = true;
    if (failed_ || done_) return MaybeRelease(lock);
    std::vector<Endpoint*> lanes;
    for (Endpoint* l : lanes_) {
      if (l) lanes.push_back(l);
    }
    ++callers_;  // keeps the lanes from being released while they are told
    lock.unlock();
    for (Endpoint* l : lanes) l->JoinAdmitted();
    lock.lock();
    --callers_;
    MaybeRelease(lock);
  }

  grpc::Status CheckGap() const {
    // Chunk min_closed_end_ will never come (its lane has closed): a later chunk means a hole.
    if (max_submitted_ > min_closed_end_) {
      const uint32_t lane = static_cast<uint32_t>(min_closed_end_ % spec_.lane_count);
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "array " + id_text_ + ": chunk " + std::to_string(min_closed_end_) + " is missing: lanes.lane=" +
                  std::to_string(lane) + " ended after " + std::to_string(min_closed_end_ / spec_.lane_count) +
                  " chunks while chunk " + std::to_string(max_submitted_ - 1) +
                  " was sent; chunk i must travel on lane i mod lane_count"};
    }
    return grpc::Status::OK;
  }

  void FailAfterShort(std::unique_lock<std::mutex>& lock, uint64_t g) {
    const uint32_t lane = static_cast<uint32_t>(g % spec_.lane_count);
    FailLocked(lock, lane,
               {grpc::StatusCode::INVALID_ARGUMENT,
                "array " + id_text_ + ": chunk " + std::to_string(g) + " (lanes.lane=" + std::to_string(lane) +
                    ") follows the short chunk " + std::to_string(*short_at_) +
                    "; only the array's last chunk may be shorter than lanes.chunk_elements=" +
                    std::to_string(spec_.chunk_elements)},
               lane);
  }

  // A chunk begun but not yet ended, with the lane its results go back on.
  struct Begun {
    uint64_t ticket = 0;
    Endpoint* to = nullptr;
    std::unique_ptr<std::vector<Resp>> out;  // unfinished until JoinEnd: must not move
  };

  // Takes the next chunk in global order (its request already out of the window): counts it,
  // checks that only the last chunk is short, and readies `cur` for its results on its lane.
  // False when the array failed (lock held throughout).
  bool Next(std::unique_lock<std::mutex>& lock, const Req& req, Begun* cur) {
    const uint64_t g = next_++;
    const uint64_t n = RequestElements(req, spec_.element_size);
    elements_ += n;
    if (n < spec_.chunk_elements) {
      short_at_ = g;
      if (max_submitted_ > g + 1) {
        FailAfterShort(lock, max_submitted_ - 1);
        return false;
      }
    }
    *cur = Begun{0, lanes_[static_cast<uint32_t>(g % spec_.lane_count)], std::make_unique<std::vector<Resp>>()};
    return true;
  }

  // Ends a begun chunk and hands its results to its lane (no lock held).
  grpc::Status EndChunk(Begun& b) {
    grpc::Status s = owner_->JoinEnd(b.ticket);
    if (s.ok()) b.to->JoinDeliver(std::move(*b.out));
    return s;
  }

  // Runs the chunks that are next in global order, unless another thread already does. Chunk
  // g + 1 begins before chunk g ends, so the engine's copies and kernels of one overlap the
  // host's work on the other; the last begun chunk is ended before the driver stops.
  void Drive(std::unique_lock<std::mutex>& lock) {
    if (driving_ || !admitted_) return MaybeRelease(lock);
    driving_ = true;
    if (overlaps_.value_or(false)) return DriveOverlapped(lock);
    std::optional<Begun> prev;
    while (!failed_ && !done_) {
      auto it = window_.find(next_);
      if (it == window_.end()) {
        if (prev) {
          lock.unlock();
          const auto t0 = LaneClock::now();
          grpc::Status s = EndChunk(*prev);
          prev.reset();
          driver_busy_ += LaneClock::now() - t0;
          lock.lock();
          if (!s.ok()) FailLocked(lock, std::nullopt, s);
          continue;  // chunks may have come meanwhile
        }
        if (closed_count_ == spec_.lane_count && window_.empty()) Complete(lock);
        break;
      }
      Req req = std::move(it->second);
      window_.erase(it);
      Begun cur;
      if (!Next(lock, req, &cur)) break;
      lock.unlock();
      const auto t0 = LaneClock::now();
      grpc::Status s = owner_->JoinBegin(req, *cur.out, &cur.ticket);
      if (s.ok() && prev) s = EndChunk(*prev);
      prev.reset();
      if (s.ok()) prev = std::move(cur);
      const bool first = !overlaps_;
      if (first && s.ok()) overlaps_ = owner_->JoinOverlaps(spec_.chunk_elements);
      driver_busy_ += LaneClock::now() - t0;
      lock.lock();
      if (!s.ok()) FailLocked(lock, std::nullopt, s);
      if (first && s.ok() && *overlaps_) {
        // From now on chunks end on another thread (the first one, begun here, too).
        begun_.push_back(std::move(*prev));
        prev.reset();
        PostEnds(lock);
        return DriveOverlapped(lock);
      }
    }
    // A chunk still begun here belongs to a failed array: the engine session drops it.
    driving_ = false;
    MaybeRelease(lock);
  }

  // Overlapped: the driver only begins chunks (at most kInFlight begun and not ended); an
  // executor task ends them in order and hands the results over (RunEnds). Lock held; driving_
  // set by the caller.
  void DriveOverlapped(std::unique_lock<std::mutex>& lock) {
    while (!failed_ && !done_) {
      auto it = window_.find(next_);
      if (it == window_.end()) {
        if (!begun_.empty() && !ending_) {
          // Nothing to begin: end what is in flight before stopping. An idle array then holds
          // no engine lane, so a driver waiting for one never waits on a task queued behind it.
          RunEnds(lock);
          continue;  // chunks may have come meanwhile
        }
        if (closed_count_ == spec_.lane_count && window_.empty() && begun_.empty() && !ending_) Complete(lock);
        break;  // (or the thread in RunEnds drives on when it is done)
      }
      if (begun_.size() >= kInFlight) {
        // Wait for the thread that ends chunks; if none is running yet (its task still
        // queued behind busy workers), end them here rather than wait on it.
        if (ending_) {
          room_.wait(lock, [&] { return failed_ || begun_.size() < kInFlight; });
        } else {
          RunEnds(lock);
        }
        continue;
      }
      Req req = std::move(it->second);
      window_.erase(it);
      Begun cur;
      if (!Next(lock, req, &cur)) break;
      lock.unlock();
      const auto t0 = LaneClock::now();
      grpc::Status s = owner_->JoinBegin(req, *cur.out, &cur.ticket);
      driver_busy_ += LaneClock::now() - t0;
      lock.lock();
      if (!s.ok()) {
        FailLocked(lock, std::nullopt, s);
        break;
      }
      begun_.push_back(std::move(cur));
      PostEnds(lock);
    }
    driving_ = false;
    MaybeRelease(lock);
  }

  // Makes sure a task will end the begun chunks (lock held).
  void PostEnds(std::unique_lock<std::mutex>&) {
    if (ending_ || ends_posted_ || begun_.empty()) return;
    ends_posted_ = true;
    executor_->Post([self = this->shared_from_this()] {
      std::unique_lock<std::mutex> lock(self->mu_);
      self->ends_posted_ = false;
      if (self->ending_) return;
      self->RunEnds(lock);
      // The array may be complete now, or its lanes freed to read the next chunks.
      if (!self->driving_) return self->Drive(lock);
      self->MaybeRelease(lock);
    });
  }

  // Ends the begun chunks in order and hands their results to their lanes. Lock held on entry
  // and return; unlocked while ending.
  void RunEnds(std::unique_lock<std::mutex>& lock) {
    if (ending_) return;
    ending_ = true;
    while (!begun_.empty() && !failed_ && !released_) {
      Begun& b = begun_.front();  // stays put: only this thread pops
      lock.unlock();
      grpc::Status s = EndChunk(b);
      lock.lock();
      begun_.pop_front();
      room_.notify_all();
      if (!s.ok()) FailLocked(lock, std::nullopt, s);
    }
    ending_ = false;
    room_.notify_all();
  }

  // Every lane closed and every chunk ran (driver, lock held; returns with it held).
  void Complete(std::unique_lock<std::mutex>& lock) {
    if (declared_ && *declared_ != elements_) {
      return FailLocked(lock, std::nullopt,
                        {grpc::StatusCode::INVALID_ARGUMENT,
                         "header.element_count=" + std::to_string(*declared_) + " but the array's " +
                             std::to_string(spec_.lane_count) + " lanes carried " + std::to_string(elements_) +
                             " elements"});
    }
    // Where a striped array's time goes: chunks run one at a time, so when the driver was busy
    // for most of the array's life, that (not the lanes' wire) bounds its speed.
    spdlog::debug("lanes array {}: {} chunks over {} lanes, driver busy {} us of {} us since the first lane",
                  id_text_, next_, spec_.lane_count,
                  std::chrono::duration_cast<std::chrono::microseconds>(driver_busy_).count(),
                  std::chrono::duration_cast<std::chrono::microseconds>(LaneClock::now() - created_).count());
    lock.unlock();
    std::vector<Resp> final_out;
    grpc::Status s = owner_->JoinComplete(final_out);
    lock.lock();
    if (!s.ok()) return FailLocked(lock, std::nullopt, s);
    done_ = true;
    std::vector<Endpoint*> lanes(lanes_);
    lock.unlock();
    for (Endpoint* l : lanes) l->JoinFinished(final_out, owner_);
    lock.lock();
  }

  // Fails the array. `culprit`: the lane at fault (it gets `status` as is; the others get it
  // prefixed with the lane's name); none: every lane gets `status`. `newcomer`: a lane not
  // attached that caused it. Returns with the lock held, unless the join was released.
  void FailLocked(std::unique_lock<std::mutex>& lock, std::optional<uint32_t> culprit, const grpc::Status& status,
                  std::optional<uint32_t> newcomer = std::nullopt) {
    if (failed_ || done_) return;
    failed_ = true;
    window_.clear();
    grpc::Status sibling = status;
    const std::optional<uint32_t> named = culprit ? culprit : newcomer;
    if (named) {
      sibling = grpc::Status(status.error_code(), "lanes.lane=" + std::to_string(*named) + " of array " + id_text_ +
                                                      " failed: " + status.error_message());
    }
    failure_ = sibling;
    std::vector<std::pair<Endpoint*, grpc::Status>> told;
    for (uint32_t l = 0; l < spec_.lane_count; ++l) {
      if (lanes_[l]) told.emplace_back(lanes_[l], culprit && *culprit == l ? status : sibling);
    }
    ++callers_;
    lock.unlock();
    for (auto& [l, s] : told) l->JoinFailed(s);
    lock.lock();
    --callers_;
    MaybeRelease(lock);
  }

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
  std::map<uint64_t, Req> window_;       // chunks waiting for their turn (a few per lane)
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

// The arrays in flight, by id, and the timer that fails arrays whose lanes do not all arrive.
class LaneRegistry {
 public:
  LaneRegistry(Admission* admission, Executor* executor, const ServerOptions* options);
  ~LaneRegistry();  // stops the timer
  LaneRegistry(const LaneRegistry&) = delete;
  LaneRegistry& operator=(const LaneRegistry&) = delete;

  // The join of spec.array_id for this RPC, made when this is the array's first lane. A reused
  // id (an array that ended) or a join of another RPC: a status instead.
  template <class Req, class Resp>
  grpc::Status Find(const LaneSpec& spec, const google::protobuf::Message& header, std::optional<uint64_t> declared,
                    const char* rpc, std::shared_ptr<LaneJoin<Req, Resp>>* join) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto r = ended_.find(spec.array_id); r != ended_.end()) return EndedStatus(spec.array_id, r->second);
    auto it = joins_.find(spec.array_id);
    if (it == joins_.end()) {
      *join = std::make_shared<LaneJoin<Req, Resp>>(this, admission_, executor_, options_, spec, header, declared, rpc);
      joins_.emplace(spec.array_id, Entry{*join, LaneClock::now() + wait_});
      cv_.notify_one();
      return grpc::Status::OK;
    }
    *join = std::dynamic_pointer_cast<LaneJoin<Req, Resp>>(it->second.join);
    if (!*join) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "lanes of array " + ArrayIdText(spec.array_id) +
                                                      " disagree: the RPC (" + rpc + " here, " +
                                                      it->second.join->rpc() + " on the first lane)"};
    }
    return grpc::Status::OK;
  }

  // A lane whose header was refused: its array fails now, naming it (or, when no sibling has
  // arrived yet, the id is remembered as failed, so siblings are told when they come).
  void Fail(const LaneSpec& spec, const grpc::Status& status);

  // The join is over: forget it and remember its id (and how it ended: OK or its failure) for a
  // while, so a late or reused lane is told.
  void Ended(const std::string& id, const grpc::Status& how);

 private:
  void TimerLoop();

  struct Entry {
    std::shared_ptr<LaneJoinBase> join;
    LaneClock::time_point deadline;
  };
  static constexpr size_t kEndedKept = 4096;  // ids remembered after their array ended

  Admission* admission_;
  Executor* executor_;
  const ServerOptions* options_;
  const std::chrono::milliseconds wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, Entry> joins_;
  std::map<std::string, grpc::Status> ended_;  // id -> how its array ended
  std::deque<std::string> ended_order_;
  std::thread timer_;
};

template <class Req, class Resp>
void LaneJoin<Req, Resp>::MaybeRelease(std::unique_lock<std::mutex>& lock) {
  if (released_ || driving_ || ending_ || callers_ > 0 || !(failed_ || done_)) return;
  released_ = true;
  const bool release_slot = holds_slot_;
  holds_slot_ = false;
  const bool cancel = queued_;
  std::vector<Endpoint*> lanes;
  for (Endpoint*& l : lanes_) {
    if (l) lanes.push_back(l);
    l = nullptr;
  }
  owner_ = nullptr;
  const grpc::Status how = failed_ ? failure_ : grpc::Status::OK;
  auto self = this->shared_from_this();  // the registry's reference goes below
  lock.unlock();
  if (cancel && !admission_->CancelQueued(ticket_)) {
    // Admitted meanwhile: OnAdmitted runs (or ran) and finds the join released; it must give
    // the slot back itself.
  } else if (release_slot) {
    admission_->Release(reservation_);
  }
  registry_->Ended(spec_.array_id, how);
  for (Endpoint* l : lanes) l->JoinReleased();
  lock.lock();
}

}  // namespace gpuscan::server
