#include "server_process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <grpc/grpc.h>

#include "gpuscan/client.h"

extern char** environ;

namespace gpuscan::soak {
// A loopback port free right now (the server binds it a moment later; a clash shows as a
// server that does not come up, and the caller retries on another port).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot find a free port: " + std::string(std::strerror(errno)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}


uint64_t ReadProcMemory(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream in(line.substr(key.size()));
    uint64_t kb = 0;
    in >> kb;
    return kb * 1024;
  }
  return 0;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

pid_t WorkerPid(pid_t front, int device) {
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 > line.size()) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != front) continue;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
    const std::string all((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (all.find(std::string("--devices") + '\0' + std::to_string(device) + '\0') != std::string::npos) found = pid;
  }
  closedir(proc);
  return found;
}

ServerProcess::ServerProcess(const std::string& binary, const std::string& engine,
                             const std::vector<std::string>& extra, const std::vector<std::string>& env,
                             const std::string& log_path, std::chrono::seconds ready, int port, bool shm)
    : binary_(binary), log_path_(log_path) {
  if (shm) {
    char pattern[] = "/dev/shm/gpuscan-soak-XXXXXX";  // mode 0700: this user's only
    if (mkdtemp(pattern) == nullptr) {
      throw std::runtime_error("cannot make a --shm-dir under /dev/shm: " + std::string(std::strerror(errno)));
    }
    shm_dir_ = pattern;
  }
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(env.begin(), env.end(), [&](const std::string& x) {
      return x.compare(0, key.size() + 1, key + "=") == 0;
    });
    if (!overridden) env_strings.push_back(entry);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    target_ = "127.0.0.1:" + std::to_string(port ? port : FreePort());
    std::vector<std::string> args = {binary_, "--address", target_, "--engine", engine, "--log-level", "warn"};
    if (!shm_dir_.empty()) args.insert(args.end(), {"--shm-dir", shm_dir_});
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = posix_spawn(&pid_, binary_.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      RemoveShmDir();
      throw std::runtime_error("cannot start " + binary_ + ": " + std::strerror(rc));
    }
    exited_ = false;

    // The probe reconnects every 20 ms: with gRPC's default reconnect backoff (1 s, then 1.6 s,
    // ...) a probe that found the port closed at first saw the server ready only 1-3 s after it
    // was (a front with its workers: ~3 s), and every test that starts a server paid it. Its own
    // subchannel pool, so that no other channel to the target shares its connection or backoff.
    ClientOptions o;
    o.target = target_;
    o.timeout = std::chrono::seconds(2);
    o.channel_int_args[GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS] = 20;
    o.channel_int_args[GRPC_ARG_MIN_RECONNECT_BACKOFF_MS] = 20;
    o.channel_int_args[GRPC_ARG_MAX_RECONNECT_BACKOFF_MS] = 20;
    o.channel_int_args[GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL] = 1;
    Client probe(o);
    const auto deadline = std::chrono::steady_clock::now() + ready;
    while (std::chrono::steady_clock::now() < deadline) {
      std::string why;
      if (!Alive(&why)) {
        last_error = "the server exited at start (" + why + ")";
        break;
      }
      try {
        if (probe.Health() == "SERVING") return;
      } catch (const std::exception& e) {
        last_error = e.what();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Alive()) {
      std::string ignored;
      Stop(std::chrono::seconds(5), &ignored);
      last_error = "not SERVING within " + std::to_string(ready.count()) + " s (" + last_error + ")";
    }
  }
  RemoveShmDir();
  throw std::runtime_error("gpuscan-server did not come up: " + last_error + "\n--- server log:\n" + LogTail());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  RemoveShmDir();
}

// The regions are the clients' to delete; whatever a failed run left behind goes with the directory.
void ServerProcess::RemoveShmDir() {
  if (shm_dir_.empty()) return;
  if (DIR* d = opendir(shm_dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") unlink((shm_dir_ + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(shm_dir_.c_str());
  shm_dir_.clear();
}

void ServerProcess::Kill() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &exit_status_, 0);
    exited_ = true;
  }
}

bool ServerProcess::Alive(std::string* why) {
  if (!exited_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_status_ = status;
    }
  }
  if (exited_ && why) *why = DescribeExit(exit_status_);
  return !exited_;
}

bool ServerProcess::Stop(std::chrono::seconds grace, std::string* why) {
  if (Alive()) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (Alive() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (Alive()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &exit_status_, 0);
      exited_ = true;
      *why = "did not exit within " + std::to_string(grace.count()) + " s of SIGTERM; killed";
      return false;
    }
  }
  *why = DescribeExit(exit_status_);
  return WIFEXITED(exit_status_) && WEXITSTATUS(exit_status_) == 0;
}

std::string ServerProcess::LogTail(size_t bytes) const {
  std::ifstream f(log_path_, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace gpuscan::soak
