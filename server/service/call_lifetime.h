// CallLifetime: who holds a reactor, and its end; one place for every reactor of the service
// (StreamingCall through CallCore, Transport, Benchmark).
//
// gRPC holds a call from its start until OnDone; the admission queue holds it while it waits for
// a slot; a worker task, a lane join or the suite thread while they use it (the owner counts
// those with ++refs_ / --refs_). Once nobody does, the admission slot and its bytes go back and
// the call deletes itself (through the reactor's virtual destructor). Every member is guarded by
// the owner's mutex: the *Locked methods are called with it held, and ReleaseIfUnused releases it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

#include "service/admission.h"

namespace gpuscan::server {

class CallLifetime {
 public:
  virtual ~CallLifetime() = default;
  CallLifetime(const CallLifetime&) = delete;
  CallLifetime& operator=(const CallLifetime&) = delete;

 protected:
  explicit CallLifetime(Admission* admission) : admission_(admission) {}

  // Asks for a slot and `bytes` of admission's budget. kAdmitted: the call holds them now.
  // kQueued: the queue holds the call until `on_admit` runs (which calls AdmittedLocked) or
  // CancelQueuedLocked takes it out. kRejected: nothing is held.
  Admission::Result TryAdmitLocked(uint64_t bytes, std::function<void()> on_admit) {
    reservation_ = bytes;
    uint64_t ticket = 0;
    const Admission::Result r = admission_->TryAdmit(bytes, std::move(on_admit), &ticket);
    if (r == Admission::Result::kAdmitted) holds_slot_ = true;
    if (r == Admission::Result::kQueued) {
      queued_ = true;
      ticket_ = ticket;
      ++refs_;
    }
    return r;
  }

  // In on_admit: the queue lets go of the call, which now holds its slot.
  void AdmittedLocked() {
    queued_ = false;
    --refs_;
    holds_slot_ = true;
  }

  // Takes a call still waiting in the queue out of it; false when it was not waiting, or its
  // on_admit is already on its way.
  bool CancelQueuedLocked() {
    if (!queued_ || !admission_->CancelQueued(ticket_)) return false;
    queued_ = false;
    --refs_;
    return true;
  }

  // gRPC's OnDone: the queue (if still waiting) and gRPC let go. Releases the lock; `this` may
  // be gone when it returns.
  void DoneLocked(std::unique_lock<std::mutex>& lock) {
    CancelQueuedLocked();
    --refs_;
    ReleaseIfUnused(lock);
  }

  // Releases the lock; if nobody holds the call any more, gives its slot back and deletes it.
  void ReleaseIfUnused(std::unique_lock<std::mutex>& lock) {
    if (refs_ != 0) {
      lock.unlock();
      return;
    }
    const bool release_slot = holds_slot_;
    const uint64_t bytes = reservation_;
    Admission* admission = admission_;
    lock.unlock();
    if (release_slot) admission->Release(bytes);
    delete this;
  }

  // Finishes the call once, when `ready`: sets `finished` and runs `finish` (which calls the
  // reactor's Finish) outside the lock. Otherwise releases the lock as ReleaseIfUnused does.
  // Either way the lock is released and `this` may be gone when it returns.
  template <class FinishFn>
  void FinishOnceOrRelease(std::unique_lock<std::mutex>& lock, bool ready, bool& finished, FinishFn&& finish) {
    if (ready && !finished) {
      finished = true;
      lock.unlock();
      finish();
      return;
    }
    ReleaseIfUnused(lock);
  }

  int refs_ = 1;  // gRPC's, until OnDone; plus the queue's while queued and each user's

 private:
  Admission* const admission_;
  bool queued_ = false;
  bool holds_slot_ = false;
  uint64_t reservation_ = 0;  // bytes of admission's budget asked for (and given back)
  uint64_t ticket_ = 0;       // the wait, while queued
};

}  // namespace gpuscan::server
