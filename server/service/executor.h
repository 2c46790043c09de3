// A fixed pool of worker threads for the compute part of calls, so gRPC's callback threads
// never block on an engine.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuscan::server {

class Executor {
 public:
  explicit Executor(unsigned threads);
  ~Executor();  // runs the queued tasks, then joins
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Post(std::function<void()> task);
  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpuscan::server
