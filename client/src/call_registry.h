// Internal: the contexts of a Client's calls in flight, so that Client::CancelCalls can cancel
// them from another thread (the C API's, for a Python caller's Ctrl-C).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include <grpcpp/client_context.h>

#include "gpuscan/client.h"

namespace gpuscan::detail {

class CallRegistry {
 public:
  // `ctx`, registered until the returned pointer deletes it.
  ContextPtr Track(std::unique_ptr<grpc::ClientContext> ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(ctx.get());
    return ContextPtr(ctx.release(), ContextRelease{this});
  }

  // Cancels every registered context (their calls fail CANCELLED).
  void CancelAll() {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.fetch_add(1);
    for (grpc::ClientContext* c : live_) c->TryCancel();
  }

  // How many CancelAll so far: a call that saw it change was cancelled by its client, and a
  // CANCELLED it gets is not retried.
  uint64_t cancels() const { return cancels_.load(); }

  void Release(grpc::ClientContext* ctx) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(ctx);
    }
    delete ctx;
  }

 private:
  std::mutex mu_;
  std::unordered_set<grpc::ClientContext*> live_;
  std::atomic<uint64_t> cancels_{0};
};

}  // namespace gpuscan::detail
