// Admission control. A call runs when a slot is free (at most `max_active` compute at once) and
// its byte reservation fits the budget (`max_bytes`: what running calls may buffer in all, so
// many large requests cannot drive the server out of memory). Calls that do not fit wait in
// arrival order, up to `max_queued`; beyond that a call is refused (the handler answers
// RESOURCE_EXHAUSTED).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace gpuscan::server {

class Admission {
 public:
  // max_bytes 0 = no byte budget.
  Admission(uint32_t max_active, uint32_t max_queued, uint64_t max_bytes = 0);

  enum class Result { kAdmitted, kQueued, kRejected };
  // Asks for a slot and `bytes` of the budget (clamped to the whole budget, so a call alone
  // always fits). kAdmitted: both are taken now. kQueued: `on_admit` runs later, on the thread
  // that frees room, with both already taken; *ticket identifies the wait for CancelQueued.
  Result TryAdmit(uint64_t bytes, std::function<void()> on_admit, uint64_t* ticket);
  // Withdraws a queued call; false when it was already admitted (then it holds a slot).
  bool CancelQueued(uint64_t ticket);
  // Frees a slot and the call's `bytes` (as passed to TryAdmit), admitting waiting calls in
  // order while they fit.
  void Release(uint64_t bytes);

  uint32_t active() const;
  uint32_t queued() const;
  uint64_t bytes_in_use() const;
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  struct Waiter {
    uint64_t ticket;
    uint64_t bytes;
    std::function<void()> on_admit;
  };
  uint64_t Clamp(uint64_t bytes) const;
  bool FitsLocked(uint64_t bytes) const;

  const uint32_t max_active_;
  const uint32_t max_queued_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  uint32_t active_ = 0;
  uint64_t bytes_ = 0;
  uint64_t next_ticket_ = 1;
  std::deque<Waiter> waiting_;
};

}  // namespace gpuscan::server
