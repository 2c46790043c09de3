#include "service/lane_join.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "service/lane_registry.h"

namespace gpuscan::server {

LaneJoin::LaneJoin(LaneRegistry* registry, Admission* admission, Executor* executor, const ServerOptions* options,
                   const LaneSpec& spec, const google::protobuf::Message& header, std::optional<uint64_t> declared,
                   const char* rpc, std::type_index chunk_type)
    : registry_(registry),
      executor_(executor),
      admission_(admission),
      options_(options),
      spec_(spec),
      id_text_(ArrayIdText(spec.array_id)),
      declared_(declared),
      max_request_bytes_(options->max_request_bytes),
      rpc_(rpc),
      chunk_type_(chunk_type),
      lanes_(spec.lane_count, nullptr),
      next_of_lane_(spec.lane_count),
      closed_(spec.lane_count, false),
      first_header_(header.New()),
      first_lane_(spec.lane) {
  first_header_->CopyFrom(header);
  for (uint32_t l = 0; l < spec.lane_count; ++l) next_of_lane_[l] = l;
}

grpc::Status LaneJoin::Attach(const google::protobuf::Message& header, const LaneSpec& spec, uint64_t reservation,
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

void LaneJoin::Submit(uint32_t lane, std::unique_ptr<LaneChunk> chunk) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_ || done_) return;
  const uint64_t g = next_of_lane_[lane];
  next_of_lane_[lane] += spec_.lane_count;
  bytes_ += chunk->bytes;
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
  window_.emplace(g, std::move(chunk));
  Drive(lock);
}

void LaneJoin::Closed(uint32_t lane) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_ || done_ || closed_[lane]) return;
  closed_[lane] = true;
  ++closed_count_;
  min_closed_end_ = std::min(min_closed_end_, next_of_lane_[lane]);
  if (auto s = CheckGap(); !s.ok()) return FailLocked(lock, std::nullopt, s);
  Drive(lock);
}

void LaneJoin::LaneFailed(uint32_t lane, const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_ || done_) return;
  FailLocked(lock, lane, status);
}

void LaneJoin::Expire(std::chrono::milliseconds waited) {
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

// Admission for the whole array, once (the owner's header; lock held). False: refused.
bool LaneJoin::Admit(uint64_t reservation) {
  reservation_ = reservation;
  auto self = shared_from_this();
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

void LaneJoin::OnAdmitted() {
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

grpc::Status LaneJoin::CheckGap() const {
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

void LaneJoin::FailAfterShort(std::unique_lock<std::mutex>& lock, uint64_t g) {
  const uint32_t lane = static_cast<uint32_t>(g % spec_.lane_count);
  FailLocked(lock, lane,
             {grpc::StatusCode::INVALID_ARGUMENT,
              "array " + id_text_ + ": chunk " + std::to_string(g) + " (lanes.lane=" + std::to_string(lane) +
                  ") follows the short chunk " + std::to_string(*short_at_) +
                  "; only the array's last chunk may be shorter than lanes.chunk_elements=" +
                  std::to_string(spec_.chunk_elements)},
             lane);
}

// Takes the next chunk in global order (`it`) out of the window: counts it, checks that only
// the last chunk is short, and readies `cur` for its results on its lane. Null when the array
// failed (lock held throughout).
std::unique_ptr<LaneChunk> LaneJoin::TakeNext(std::unique_lock<std::mutex>& lock, Window::iterator it, Begun* cur) {
  std::unique_ptr<LaneChunk> chunk = std::move(it->second);
  window_.erase(it);
  const uint64_t g = next_++;
  const uint64_t n = chunk->elements;
  elements_ += n;
  if (n < spec_.chunk_elements) {
    short_at_ = g;
    if (max_submitted_ > g + 1) {
      FailAfterShort(lock, max_submitted_ - 1);
      return nullptr;
    }
  }
  *cur = Begun{0, lanes_[static_cast<uint32_t>(g % spec_.lane_count)], nullptr};
  return chunk;
}

// Begins a taken chunk on the owner's session (no lock held), counting the driver's time.
grpc::Status LaneJoin::Begin(LaneChunk& chunk, Begun* cur) {
  const auto t0 = LaneClock::now();
  grpc::Status s = owner_->JoinBegin(chunk, &cur->out, &cur->ticket);
  driver_busy_ += LaneClock::now() - t0;
  return s;
}

// Ends a begun chunk and hands its results to its lane (no lock held).
grpc::Status LaneJoin::EndChunk(Begun& b) {
  grpc::Status s = owner_->JoinEnd(b.ticket);
  if (s.ok()) b.to->JoinDeliver(std::move(b.out));
  return s;
}

// Runs the chunks that are next in global order, unless another thread already does. Chunk
// g + 1 begins before chunk g ends, so the engine's copies and kernels of one overlap the
// host's work on the other; the last begun chunk is ended before the driver stops.
void LaneJoin::Drive(std::unique_lock<std::mutex>& lock) {
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
    Begun cur;
    std::unique_ptr<LaneChunk> chunk = TakeNext(lock, it, &cur);
    if (!chunk) break;
    lock.unlock();
    grpc::Status s = Begin(*chunk, &cur);
    const auto t0 = LaneClock::now();
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
void LaneJoin::DriveOverlapped(std::unique_lock<std::mutex>& lock) {
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
    Begun cur;
    std::unique_ptr<LaneChunk> chunk = TakeNext(lock, it, &cur);
    if (!chunk) break;
    lock.unlock();
    grpc::Status s = Begin(*chunk, &cur);
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
void LaneJoin::PostEnds(std::unique_lock<std::mutex>&) {
  if (ending_ || ends_posted_ || begun_.empty()) return;
  ends_posted_ = true;
  executor_->Post([self = shared_from_this()] {
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
void LaneJoin::RunEnds(std::unique_lock<std::mutex>& lock) {
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
void LaneJoin::Complete(std::unique_lock<std::mutex>& lock) {
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
  std::unique_ptr<LaneResults> final_out;
  grpc::Status s = owner_->JoinComplete(&final_out);
  lock.lock();
  if (!s.ok()) return FailLocked(lock, std::nullopt, s);
  done_ = true;
  std::vector<Endpoint*> lanes(lanes_);
  lock.unlock();
  for (Endpoint* l : lanes) l->JoinFinished(*final_out, owner_);
  lock.lock();
}

// Fails the array. `culprit`: the lane at fault (it gets `status` as is; the others get it
// prefixed with the lane's name); none: every lane gets `status`. `newcomer`: a lane not
// attached that caused it. Returns with the lock held, unless the join was released.
void LaneJoin::FailLocked(std::unique_lock<std::mutex>& lock, std::optional<uint32_t> culprit, const grpc::Status& status,
                std::optional<uint32_t> newcomer) {
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
void LaneJoin::MaybeRelease(std::unique_lock<std::mutex>& lock) {
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
  auto self = shared_from_this();  // the registry's reference goes below
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
