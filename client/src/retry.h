// Internal: retries of calls with a replayable input (RetryOptions in client.h). One deadline
// spans every try: the retry loop sets it for the calling thread, and every context a try makes
// on that thread (NewContext, the lanes' contexts) takes it from CallDeadline.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include "call_registry.h"
#include "gpuscan/client.h"

namespace gpuscan::detail {

using Deadline = std::optional<std::chrono::system_clock::time_point>;

// The deadline of a call starting now on this thread: the enclosing retry loop's, else
// options.timeout from now (none when the timeout is 0).
Deadline CallDeadline(const ClientOptions& options);

// Sets the deadline CallDeadline returns on this thread while it lives, and starts the call's
// one wait for a refused connection afresh (RefusedWaitEnd).
class DeadlineScope {
 public:
  explicit DeadlineScope(const Deadline& deadline);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  bool had_;
  Deadline previous_;
  Deadline previous_refused_by_;
};

// When a connection refused now stops being waited for (targets.h's ConnectAll): `proposed`
// (now + one gRPC reconnect) at the call's first refusal, and that same time for every later
// refusal in the call's tries. Why: each try waiting afresh made a striped call begun as its
// server shut down end three waits (~6.3 s) after the SIGTERM. Outside a retry loop: `proposed`.
std::chrono::system_clock::time_point RefusedWaitEnd(std::chrono::system_clock::time_point proposed);

// UNAVAILABLE: the server went away, is shutting down or could not be reached. CANCELLED: this
// client never cancels a call without throwing its own exception instead, so a CANCELLED status
// came from the other end; gRPC 1.51 servers cancel calls that reach them as they begin to shut
// down (seen in the chaos test), before any handler ran. INTERNAL "Received RST_STREAM": the
// HTTP/2 transport reset the stream, a fault of the link like UNAVAILABLE (a handler's INTERNAL
// comes as a status, never as a reset); seen once under CI's soak (docs/RELIABILITY.md, Known
// defects). Every call is a pure function of its input, so trying again is safe.
inline bool Retryable(const RpcError& e) {
  const grpc::StatusCode code = e.code();
  if (code == grpc::StatusCode::INTERNAL) return e.message().rfind("Received RST_STREAM", 0) == 0;
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED;
}

// The wait before try `next` (2, 3, ...): initial_backoff doubled per earlier retry, capped,
// with +-20% jitter so clients that failed together do not come back together.
std::chrono::milliseconds Backoff(const RetryOptions& retry, uint32_t next);

// The error of the last try, saying how many were made.
RpcError GaveUp(const RpcError& last, uint32_t attempts);

// Runs attempt() until it returns or throws an error that is not retried, the tries run out
// or the next wait would pass the deadline.
// A CANCELLED after the Client's CancelCalls (calls' count changed) is the caller's: not retried.
template <class Attempt>
auto WithRetries(const ClientOptions& options, const CallRegistry& calls, Attempt&& attempt) -> decltype(attempt()) {
  const Deadline deadline = CallDeadline(options);
  DeadlineScope scope(deadline);
  const uint32_t attempts = std::max<uint32_t>(1, options.retry.attempts);
  const uint64_t cancels = calls.cancels();
  for (uint32_t n = 1;; ++n) {
    try {
      return attempt();
    } catch (const RpcError& e) {
      const bool asked = e.code() == grpc::StatusCode::CANCELLED && calls.cancels() != cancels;
      if (!Retryable(e) || asked || n >= attempts) {
        if (n > 1) throw GaveUp(e, n);
        throw;
      }
      const std::chrono::milliseconds wait = Backoff(options.retry, n + 1);
      if (deadline && std::chrono::system_clock::now() + wait >= *deadline) throw GaveUp(e, n);
      if (options.retry.on_retry) options.retry.on_retry(e, n + 1, wait);
      std::this_thread::sleep_for(wait);
    }
  }
}

// Passes each result byte to the caller's Sink once, whatever the tries: a try's first bytes,
// up to what earlier tries delivered, are skipped (they are the same bytes).
class ResumingSink {
 public:
  explicit ResumingSink(Sink inner) : inner_(std::move(inner)) {}
  // The Sink for the next try (empty when the caller gave none).
  Sink NextAttempt() {
    seen_ = 0;
    if (!inner_) return {};
    // Results written by position need no skipping: a try writes every position again.
    if (inner_.target<SinkAt>()) return inner_;
    return [this](const void* data, size_t bytes) { Take(static_cast<const char*>(data), bytes); };
  }

 private:
  void Take(const char* data, size_t bytes) {
    if (seen_ < delivered_) {
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(bytes, delivered_ - seen_));
      data += skip;
      bytes -= skip;
      seen_ += skip;
    }
    if (bytes == 0) return;
    inner_(data, bytes);
    delivered_ += bytes;
    seen_ += bytes;
  }
  Sink inner_;
  uint64_t delivered_ = 0;  // bytes the caller has had
  uint64_t seen_ = 0;       // bytes this try has produced
};

}  // namespace gpuscan::detail
