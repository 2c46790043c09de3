#include "isolation/worker_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <spdlog/spdlog.h>

#include "gpuscan/client.h"

namespace gpuscan::server {

using Clock = std::chrono::steady_clock;

struct WorkerPool::Worker {
  int device = 0;
  std::string address;  // unix:...
  std::string label;
  pid_t pid = 0;
  bool up = false;
  std::string reason = "starting";
  uint64_t starts = 0;
  std::chrono::milliseconds backoff{0};
  Clock::time_point restart_at{};   // while no process runs: when the next one starts
  Clock::time_point started_at{};
  // The current process's, for calls: several connections, as one HTTP/2 connection carries
  // about one stream's speed (striped lanes would share it); calls take them in turn.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::shared_ptr<std::atomic<uint64_t>> turn = std::make_shared<std::atomic<uint64_t>>(0);
  std::shared_ptr<Client> control;         // the same process's, for health, info and benchmarks
  std::shared_ptr<std::atomic<uint64_t>> open = std::make_shared<std::atomic<uint64_t>>(0);
};

class WorkerPool::LeaseImpl final : public WorkerPool::Lease {
 public:
  LeaseImpl(std::shared_ptr<grpc::Channel> channel, std::shared_ptr<Client> control, std::string address,
            std::string label, int device, std::shared_ptr<std::atomic<uint64_t>> open)
      : channel_(std::move(channel)),
        address_(std::move(address)),
        control_(std::move(control)),
        label_(std::move(label)),
        device_(device),
        open_(std::move(open)) {
    ++*open_;
  }
  ~LeaseImpl() override { --*open_; }
  const std::shared_ptr<grpc::Channel>& channel() const override { return channel_; }
  Client& control() const override { return *control_; }
  const std::string& address() const override { return address_; }
  const std::string& label() const override { return label_; }
  int device() const override { return device_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string address_;
  std::shared_ptr<Client> control_;
  std::string label_;
  int device_;
  std::shared_ptr<std::atomic<uint64_t>> open_;
};

namespace {

// The flags only the front acts on; a worker gets the pool's own values instead (or none).
const std::set<std::string>& FrontOnlyFlags() {
  static const std::set<std::string> flags = {"--address",  "--metrics-address", "--devices",
                                              "--device",   "--isolate-devices", "--max-connection-age",
                                              "--tls-cert", "--tls-key",         "--tls-client-ca",
                                              "--worker-exe"};
  return flags;
}

const std::set<std::string>& FrontOnlyVariables() {
  static const std::set<std::string> vars = {
      "GPUSCAN_ADDRESS",  "GPUSCAN_METRICS_ADDRESS", "GPUSCAN_DEVICES",  "GPUSCAN_DEVICE",
      "GPUSCAN_ISOLATE_DEVICES", "GPUSCAN_MAX_CONNECTION_AGE", "GPUSCAN_TLS_CERT", "GPUSCAN_TLS_KEY",
      "GPUSCAN_TLS_CLIENT_CA"};
  return vars;
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

std::vector<std::string> WorkerArgs(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string name = a.substr(0, a.find('='));
    if (FrontOnlyFlags().count(name)) {
      if (a.find('=') == std::string::npos && i + 1 < argc) ++i;  // its value follows
      continue;
    }
    out.push_back(a);
  }
  return out;
}

std::vector<std::string> WorkerEnv(const char* const* environ_list) {
  std::vector<std::string> out;
  for (const char* const* e = environ_list; e && *e; ++e) {
    const std::string kv = *e;
    if (!FrontOnlyVariables().count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  return out;
}

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)) {
  for (const int d : options_.devices) {
    auto w = std::make_shared<Worker>();
    w->device = d;
    w->label = std::to_string(d);
    w->address = "unix:" + options_.socket_dir + "/device-" + std::to_string(d) + ".sock";
    workers_.push_back(std::move(w));
  }
}

WorkerPool::~WorkerPool() { Stop(std::chrono::milliseconds(0)); }

void WorkerPool::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : workers_) Spawn(*w);
  }
  monitor_ = std::thread([this] { MonitorLoop(); });
}

void WorkerPool::Spawn(Worker& w) {
  const std::string path = w.address.substr(std::strlen("unix:"));
  ::unlink(path.c_str());  // a socket left by the process before
  std::vector<std::string> args;
  args.push_back(options_.argv0.empty() ? options_.exe : options_.argv0);
  args.insert(args.end(), options_.args.begin(), options_.args.end());
  for (std::string a : {std::string("--address"), w.address, std::string("--devices"), std::to_string(w.device),
                        std::string("--isolate-devices"), std::string("off"), std::string("--worker-of-front"),
                        std::string("true")}) {
    args.push_back(std::move(a));
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = options_.env;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* exe = options_.exe.c_str();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec. It dies with the front.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(125);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the front blocks its shutdown signals
    ::execve(exe, argv.data(), envp.data());
    ::_exit(127);
  }
  ++w.starts;
  w.started_at = Clock::now();
  w.up = false;
  if (pid < 0) {
    w.pid = 0;
    w.reason = std::string("cannot start a worker process: ") + std::strerror(errno);
    w.restart_at = Clock::now() + options_.restart_max;
    spdlog::error("device {}: {}", w.label, w.reason);
    return;
  }
  w.pid = pid;
  w.reason = "starting (pid " + std::to_string(pid) + ")";
  w.channels.clear();
  for (int i = 0; i < kConnectionsPerWorker; ++i) {
    grpc::ChannelArguments ca;
    ca.SetMaxReceiveMessageSize(-1);
    ca.SetMaxSendMessageSize(-1);
    // Distinct arguments, distinct connections (gRPC shares one between equal channels).
    ca.SetInt("grpc.gpuscan_worker_start", static_cast<int>(w.starts));
    ca.SetInt("grpc.gpuscan_connection", i);
    w.channels.push_back(grpc::CreateCustomChannel(w.address, grpc::InsecureChannelCredentials(), ca));
  }
  ClientOptions co;
  co.target = w.address;
  co.timeout = std::chrono::milliseconds(2000);  // a worker that stops answering is not up
  co.channel_int_args["grpc.gpuscan_worker_start"] = static_cast<int>(w.starts);
  // Reconnects as often as the monitor probes: the first probe comes before the new process
  // listens, and gRPC's default reconnect backoff (1 s, then 1.6 s, ...) kept a worker that was
  // serving within ~0.2 s out of the pool for ~1 s (a front's start, each restart).
  const int probe_ms = static_cast<int>(options_.probe_every.count());
  co.channel_int_args[GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS] = probe_ms;
  co.channel_int_args[GRPC_ARG_MIN_RECONNECT_BACKOFF_MS] = probe_ms;
  co.channel_int_args[GRPC_ARG_MAX_RECONNECT_BACKOFF_MS] = probe_ms;
  w.control = std::make_shared<Client>(co);
  spdlog::info("device {}: worker process {} started (start {}), serving on {}", w.label, pid, w.starts, w.address);
}

void WorkerPool::MonitorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    bool changed = false;
    for (auto& wp : workers_) {
      Worker& w = *wp;
      if (w.pid != 0) {
        int status = 0;
        const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
        if (r == w.pid) {
          // Quick deaths back off; a worker that served a while restarts at once.
          const bool served = Clock::now() - w.started_at > std::chrono::seconds(30);
          w.backoff = served ? options_.restart_min
                             : std::min(options_.restart_max, std::max(options_.restart_min, w.backoff * 2));
          w.restart_at = Clock::now() + w.backoff;
          w.reason = "worker process " + std::to_string(w.pid) + " " + ExitText(status) +
                     (w.reason.rfind("unhealthy", 0) == 0 ? " (" + w.reason + ")" : "") + "; restarting in " +
                     std::to_string(w.backoff.count()) + " ms";
          spdlog::error("device {} gets no calls: {}", w.label, w.reason);
          w.pid = 0;
          if (w.up) changed = true;
          w.up = false;
          w.channels.clear();
          w.control.reset();
          continue;
        }
        // Alive: is it serving?
        const std::shared_ptr<Client> probe = w.control;
        const int device = w.device;
        const bool known = w.label.find(':') != std::string::npos;
        lock.unlock();
        std::string health, label, error;
        try {
          health = probe->Health("");
          if (health == "SERVING" && !known) {
            const v1::ServerInfo info = probe->Info();
            for (const auto& d : info.devices()) {
              if (d.ordinal() == device) label = std::to_string(device) + ": " + d.name();
            }
            if (label.empty()) label = std::to_string(device) + ": " + info.engine();
          }
        } catch (const std::exception& e) {
          error = e.what();
        }
        lock.lock();
        if (stopping_) break;
        if (w.device != device || w.pid == 0) continue;  // (it exited meanwhile: the next round sees it)
        const bool up = health == "SERVING";
        if (up && !label.empty()) w.label = label;
        if (up != w.up) {
          changed = true;
          if (up) {
            spdlog::info("device {}: worker process {} is serving", w.label, w.pid);
            w.reason.clear();
          } else {
            w.reason = "unhealthy: health " + (health.empty() ? "unreachable (" + error + ")" : health);
            spdlog::error("device {} gets no calls: worker process {} {}", w.label, w.pid, w.reason);
          }
        }
        w.up = up;
      } else if (Clock::now() >= w.restart_at) {
        Spawn(w);
      }
    }
    if (changed && on_change_) {
      auto fn = on_change_;
      lock.unlock();
      fn();
      lock.lock();
    }
    cv_.notify_all();
    cv_.wait_for(lock, options_.probe_every, [this] { return stopping_ || wake_; });
    wake_ = false;
  }
}

bool WorkerPool::WaitAllUp(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] {
    return std::all_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->up; });
  });
}

std::unique_ptr<WorkerPool::Lease> WorkerPool::Pick(std::optional<int> device) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker* best = nullptr;
  const size_t n = workers_.size();
  for (size_t k = 0; k < n; ++k) {
    Worker& w = *workers_[(next_ + k) % n];
    if (!w.up || w.channels.empty()) continue;
    if (device && w.device != *device) continue;
    if (!best || w.open->load() < best->open->load()) best = &w;
  }
  if (!best) return nullptr;
  if (!device) next_ = (next_ + 1) % n;  // calls bound to a device take no turn from the others
  auto& channel = best->channels[best->turn->fetch_add(1) % best->channels.size()];
  return std::make_unique<LeaseImpl>(channel, best->control, best->address, best->label, best->device, best->open);
}

std::vector<WorkerStatus> WorkerPool::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerStatus> out;
  for (const auto& w : workers_) {
    out.push_back({w->device, w->label, w->up, w->reason, w->open->load(), w->pid, w->starts});
  }
  return out;
}

void WorkerPool::Suspect(int device, const std::string& why) {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : workers_) {
      if (w->device != device || !w->up) continue;
      w->up = false;
      w->reason = "a call failed: " + why;
      spdlog::warn("device {} gets no calls until it answers its health check: {}", w->label, w->reason);
      fn = on_change_;
    }
    wake_ = true;
  }
  cv_.notify_all();
  if (fn) fn();
}

bool WorkerPool::any_up() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->up; });
}

void WorkerPool::OnChange(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = std::move(fn);
}

void WorkerPool::Stop(std::chrono::milliseconds grace) {
  std::vector<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !monitor_.joinable()) {
      // already stopped
    }
    stopping_ = true;
    for (auto& w : workers_) {
      if (w->pid != 0) pids.push_back(w->pid);
      w->pid = 0;
      w->up = false;
    }
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  for (const pid_t p : pids) ::kill(p, SIGTERM);
  const auto deadline = Clock::now() + grace + std::chrono::seconds(1);
  std::vector<pid_t> left = pids;
  while (!left.empty() && Clock::now() < deadline) {
    left.erase(std::remove_if(left.begin(), left.end(), [](pid_t p) { return ::waitpid(p, nullptr, WNOHANG) == p; }),
               left.end());
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const pid_t p : left) {
    spdlog::warn("worker process {} did not stop within the grace: killed", p);
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  // The sockets' private directory goes with the workers.
  for (const auto& w : workers_) ::unlink(w->address.substr(std::strlen("unix:")).c_str());
  ::rmdir(options_.socket_dir.c_str());
}

}  // namespace gpuscan::server
