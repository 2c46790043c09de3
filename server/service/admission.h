// Admission control: at most `max_active` calls compute at once; up to `max_queued` more wait
// in arrival order; beyond that a call is refused (the handler answers RESOURCE_EXHAUSTED).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace gpuscan::server {

class Admission {
 public:
  Admission(uint32_t max_active, uint32_t max_queued);

  enum class Result { kAdmitted, kQueued, kRejected };
  // kAdmitted: a slot is taken now. kQueued: `on_admit` runs later, on the thread that frees a
  // slot, with the slot already taken; *ticket identifies the wait for CancelQueued.
  Result TryAdmit(std::function<void()> on_admit, uint64_t* ticket);
  // Withdraws a queued call; false when it was already admitted (then it holds a slot).
  bool CancelQueued(uint64_t ticket);
  // Frees a slot, handing it to the oldest waiting call, if any.
  void Release();

  uint32_t active() const;
  uint32_t queued() const;

 private:
  struct Waiter {
    uint64_t ticket;
    std::function<void()> on_admit;
  };
  const uint32_t max_active_;
  const uint32_t max_queued_;
  mutable std::mutex mu_;
  uint32_t active_ = 0;
  uint64_t next_ticket_ = 1;
  std::deque<Waiter> waiting_;
};

}  // namespace gpuscan::server
