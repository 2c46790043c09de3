#include "service/admission.h"

#include <algorithm>

namespace gpuscan::server {

Admission::Admission(uint32_t max_active, uint32_t max_queued)
    : max_active_(std::max<uint32_t>(1, max_active)), max_queued_(max_queued) {}

Admission::Result Admission::TryAdmit(std::function<void()> on_admit, uint64_t* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ < max_active_ && waiting_.empty()) {
    ++active_;
    return Result::kAdmitted;
  }
  if (waiting_.size() >= max_queued_) return Result::kRejected;
  *ticket = next_ticket_++;
  waiting_.push_back({*ticket, std::move(on_admit)});
  return Result::kQueued;
}

bool Admission::CancelQueued(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [ticket](const Waiter& w) { return w.ticket == ticket; });
  if (it == waiting_.end()) return false;
  waiting_.erase(it);
  return true;
}

void Admission::Release() {
  std::function<void()> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_.empty()) {
      --active_;
      return;
    }
    // The slot passes straight to the oldest waiter: active_ stays the same.
    next = std::move(waiting_.front().on_admit);
    waiting_.pop_front();
  }
  next();
}

uint32_t Admission::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

uint32_t Admission::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(waiting_.size());
}

}  // namespace gpuscan::server
