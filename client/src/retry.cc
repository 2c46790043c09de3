// Retries: the per-thread deadline of a call's tries, backoff, and the replayable calls.
#include "retry.h"

#include <random>
#include <string>

namespace gpuscan::detail {
namespace {
thread_local bool t_scoped = false;
thread_local Deadline t_deadline;
thread_local Deadline t_refused_by;  // the end of the call's wait for a refused connection, once set
}  // namespace

Deadline CallDeadline(const ClientOptions& options) {
  if (t_scoped) return t_deadline;
  if (options.timeout.count() <= 0) return std::nullopt;
  return std::chrono::system_clock::now() + options.timeout;
}

DeadlineScope::DeadlineScope(const Deadline& deadline)
    : had_(t_scoped), previous_(t_deadline), previous_refused_by_(t_refused_by) {
  t_scoped = true;
  t_deadline = deadline;
  t_refused_by.reset();
}

DeadlineScope::~DeadlineScope() {
  t_scoped = had_;
  t_deadline = previous_;
  t_refused_by = previous_refused_by_;
}

std::chrono::system_clock::time_point RefusedWaitEnd(std::chrono::system_clock::time_point proposed) {
  if (!t_scoped) return proposed;
  if (!t_refused_by) t_refused_by = proposed;
  return *t_refused_by;
}

std::chrono::milliseconds Backoff(const RetryOptions& retry, uint32_t next) {
  double ms = static_cast<double>(std::max<int64_t>(retry.initial_backoff.count(), 0));
  for (uint32_t i = 2; i < next && ms < retry.max_backoff.count(); ++i) ms *= 2;
  ms = std::min(ms, static_cast<double>(std::max<int64_t>(retry.max_backoff.count(), 0)));
  thread_local std::minstd_rand rng{std::random_device{}()};
  ms *= std::uniform_real_distribution<double>(0.8, 1.2)(rng);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

RpcError GaveUp(const RpcError& last, uint32_t attempts) {
  return RpcError(last.code(), last.message() + " (gave up after " + std::to_string(attempts) + " tries)");
}

}  // namespace gpuscan::detail

namespace gpuscan {

Timing Client::ScanStream(const v1::ScanHeader& header, const Replay& in, Sink out, Progress progress,
                          uint32_t lanes) {
  detail::ResumingSink resume(std::move(out));
  return detail::WithRetries(options_, *calls_, [&] { return ScanStream(header, in(), resume.NextAttempt(), progress, lanes); });
}

Timing Client::Scan2DStream(const v1::Scan2DHeader& header, const Replay& in, Sink out, Progress progress) {
  detail::ResumingSink resume(std::move(out));
  return detail::WithRetries(options_, *calls_, [&] { return Scan2DStream(header, in(), resume.NextAttempt(), progress); });
}

v1::ReduceResponse Client::ReduceStream(const v1::ReduceHeader& header, const Replay& in, Progress progress,
                                        uint32_t lanes) {
  return detail::WithRetries(options_, *calls_, [&] { return ReduceStream(header, in(), progress, lanes); });
}

v1::HistogramResponse Client::HistogramStream(const v1::HistogramHeader& header, const Replay& in, Progress progress) {
  return detail::WithRetries(options_, *calls_, [&] { return HistogramStream(header, in(), progress); });
}

Timing Client::SegmentedScanStream(const v1::SegmentedScanHeader& header, const Replay& values, const Replay& keys,
                                   Sink out, Progress progress) {
  detail::ResumingSink resume(std::move(out));
  return detail::WithRetries(
      options_, *calls_, [&] { return SegmentedScanStream(header, values(), keys(), resume.NextAttempt(), progress); });
}

v1::ReduceByKeyResponse Client::ReduceByKeyStream(const v1::ReduceByKeyHeader& header, const Replay& values,
                                                  const Replay& keys, Sink keys_out, Sink values_out,
                                                  Progress progress) {
  detail::ResumingSink keys_resume(std::move(keys_out)), values_resume(std::move(values_out));
  return detail::WithRetries(options_, *calls_, [&] {
    return ReduceByKeyStream(header, values(), keys(), keys_resume.NextAttempt(), values_resume.NextAttempt(),
                             progress);
  });
}

v1::SortResponse Client::SortStream(const v1::SortHeader& header, const Replay& keys, const Replay& values,
                                    Sink keys_out, Sink values_out, Sink indices_out, Progress progress) {
  detail::ResumingSink k(std::move(keys_out)), v(std::move(values_out)), i(std::move(indices_out));
  return detail::WithRetries(options_, *calls_, [&] {
    return SortStream(header, keys(), values ? values() : Source{}, k.NextAttempt(), v.NextAttempt(), i.NextAttempt(),
                      progress);
  });
}

v1::CompactResponse Client::CompactStream(const v1::CompactHeader& header, const Replay& values, const Replay& flags,
                                          Sink values_out, Sink indices_out, Progress progress, uint32_t lanes) {
  detail::ResumingSink values_resume(std::move(values_out)), indices_resume(std::move(indices_out));
  return detail::WithRetries(options_, *calls_, [&] {
    return CompactStream(header, values(), flags ? flags() : Source{}, values_resume.NextAttempt(),
                         indices_resume.NextAttempt(), progress, lanes);
  });
}

}  // namespace gpuscan
