#include "service/admission.h"

#include <algorithm>
#include <vector>

namespace gpuscan::server {

Admission::Admission(uint32_t max_active, uint32_t max_queued, uint64_t max_bytes)
    : max_active_(std::max<uint32_t>(1, max_active)), max_queued_(max_queued), max_bytes_(max_bytes) {}

uint64_t Admission::Clamp(uint64_t bytes) const { return max_bytes_ ? std::min(bytes, max_bytes_) : bytes; }

bool Admission::FitsLocked(uint64_t bytes) const {
  return active_ < max_active_ && (max_bytes_ == 0 || bytes_ + Clamp(bytes) <= max_bytes_);
}

Admission::Result Admission::TryAdmit(uint64_t bytes, std::function<void()> on_admit, uint64_t* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  // Arrival order: nobody overtakes a waiting call, so a large one is not starved by small ones.
  if (waiting_.empty() && FitsLocked(bytes)) {
    ++active_;
    bytes_ += Clamp(bytes);
    return Result::kAdmitted;
  }
  if (waiting_.size() >= max_queued_) return Result::kRejected;
  *ticket = next_ticket_++;
  waiting_.push_back({*ticket, bytes, std::move(on_admit)});
  return Result::kQueued;
}

bool Admission::CancelQueued(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [ticket](const Waiter& w) { return w.ticket == ticket; });
  if (it == waiting_.end()) return false;
  waiting_.erase(it);
  // The withdrawn call may have been the one blocking smaller calls behind it; they are
  // admitted at the next Release (a slot or bytes freeing), which is bounded by running calls.
  return true;
}

void Admission::Release(uint64_t bytes) {
  std::vector<std::function<void()>> admitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
    bytes_ -= Clamp(bytes);
    while (!waiting_.empty() && FitsLocked(waiting_.front().bytes)) {
      ++active_;
      bytes_ += Clamp(waiting_.front().bytes);
      admitted.push_back(std::move(waiting_.front().on_admit));
      waiting_.pop_front();
    }
  }
  for (auto& on_admit : admitted) on_admit();  // outside the lock: they take the call's own lock
}

uint32_t Admission::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

uint32_t Admission::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(waiting_.size());
}

uint64_t Admission::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace gpuscan::server
