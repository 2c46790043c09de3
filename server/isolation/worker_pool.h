// WorkerPool: one worker process per device, for --isolate-devices. CUDA's sticky errors (an
// illegal address, say) poison every context of the process that met them, so a server that
// runs all its devices in one process loses all of them to one device's fault. Here each device
// is served by a gpuscan-server of its own (same binary, --devices N, listening on a unix socket
// in a private directory); the front (front.h) forwards calls to them. A worker whose device
// turns unhealthy exits, and the pool starts it again after a backoff; meanwhile its device gets
// no calls and the others serve.
//
// Threads: a monitor thread reaps and restarts workers and probes their health; Pick and Status
// may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/channel.h>

namespace gpuscan {
class Client;
}

namespace gpuscan::server {

struct WorkerPoolOptions {
  std::string exe;                 // the worker executable (normally this server's own: /proc/self/exe)
  std::string argv0;               // what `ps` shows for it (empty: exe)
  std::vector<std::string> args;   // every worker's arguments, before the pool's own (address, device)
  std::vector<std::string> env;    // every worker's environment, NAME=VALUE
  std::vector<int> devices;        // one worker each
  std::string socket_dir;          // where the workers' unix sockets go (private: mode 0700)
  std::chrono::milliseconds probe_every{200};
  std::chrono::milliseconds restart_min{250}, restart_max{10000};  // backoff between restarts
};

// What the pool knows of one worker now.
struct WorkerStatus {
  int device = 0;
  std::string label;        // "1: NVIDIA H200" once the worker has said; "1" before
  bool up = false;          // its health is SERVING: calls may go to it
  std::string reason;       // why not up (starting, exited with..., restarting in...)
  uint64_t open_calls = 0;  // calls the front has open on it
  pid_t pid = 0;            // 0 while no process runs
  uint64_t starts = 0;      // processes started for this device so far
};

class WorkerPool {
 public:
  // A call's hold on a worker: its channel, and one open call counted until it is destroyed.
  class Lease {
   public:
    virtual ~Lease() = default;
    virtual const std::shared_ptr<grpc::Channel>& channel() const = 0;
    virtual Client& control() const = 0;  // a client of the worker (2 s deadline), for Info
    virtual const std::string& address() const = 0;  // the worker's unix: target
    virtual const std::string& label() const = 0;
    virtual int device() const = 0;
  };

  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();  // Stop(0)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts every worker and the monitor. Called once.
  void Start();
  // Blocks until every worker is up or `timeout` passes; true when all are up.
  bool WaitAllUp(std::chrono::milliseconds timeout);

  // The up worker with the fewest open calls (ties: round robin), or `device`'s when given
  // (null when that one is not up); null when none is up.
  std::unique_ptr<Lease> Pick(std::optional<int> device = std::nullopt);
  std::vector<WorkerStatus> Status() const;
  // A call on `device` failed with UNAVAILABLE (its worker died, is shutting down or turned
  // unhealthy): no calls go there until the monitor, woken now, finds it serving again.
  void Suspect(int device, const std::string& why);
  bool any_up() const;

  // Called (monitor thread, no lock held) whenever a worker goes up or down.
  void OnChange(std::function<void()> fn);

  // Asks every worker to stop (SIGTERM), waits up to `grace` plus a second, then kills what is
  // left. No restarts afterwards. Idempotent.
  void Stop(std::chrono::milliseconds grace);

 private:
  struct Worker;
  class LeaseImpl;

  static constexpr int kConnectionsPerWorker = 8;
  void Spawn(Worker& w);          // lock held
  void MonitorLoop();

  const WorkerPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Worker>> workers_;
  size_t next_ = 0;  // round robin among equals
  bool stopping_ = false;
  bool wake_ = false;  // probe now (Suspect)
  std::function<void()> on_change_;
  std::thread monitor_;
};

// The arguments a worker gets from the front's own: `argv` without the flags that only the
// front acts on (its address, metrics, TLS, devices, isolation, connection age), in either
// form (--flag value, --flag=value).
std::vector<std::string> WorkerArgs(int argc, const char* const* argv);
// The front's environment without the variables of those flags.
std::vector<std::string> WorkerEnv(const char* const* environ_list);

}  // namespace gpuscan::server
