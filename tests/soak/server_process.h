// gpuscan-server as a child process of the soak test: started on a free loopback port, watched
// (alive? resident memory?) while the load runs, stopped with SIGTERM at the end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuscan::soak {

// A loopback port free right now (bound a moment later by a server; a clash shows as a server
// that does not come up).
int FreePort();

// VmRSS (or another "Vm..." line, in bytes) of /proc/<pid>/status; 0 when it cannot be read.
uint64_t ReadProcMemory(pid_t pid, const char* field = "VmRSS");

class ServerProcess {
 public:
  // Starts `binary --address 127.0.0.1:<free port> --engine <engine> --log-level warn <extra>`,
  // its stdout and stderr going to `log_path`; waits until its health service says SERVING.
  // Throws std::runtime_error (with the log's tail) when it does not come up within `ready`.
  // `env`: extra KEY=VALUE entries for its environment (on top of this process's). `port`: 0 = a
  // free one; else that one (a server restarted at its old address). `shm`: also serve shared
  // memory, with --shm-dir a private directory made for it under /dev/shm (mode 0700; shm_dir()).
  ServerProcess(const std::string& binary, const std::string& engine, const std::vector<std::string>& extra,
                const std::vector<std::string>& env, const std::string& log_path,
                std::chrono::seconds ready = std::chrono::seconds(60), int port = 0, bool shm = false);
  ~ServerProcess();  // kills it if still running; removes its --shm-dir (and any file left in it)
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& target() const { return target_; }
  pid_t pid() const { return pid_; }
  // The server's --shm-dir; empty without `shm`.
  const std::string& shm_dir() const { return shm_dir_; }
  // False once the process has exited (a crash, while the load runs); `why` says how.
  bool Alive(std::string* why = nullptr);
  // SIGTERM, then waits up to `grace` for a clean exit. True when it exited with status 0.
  bool Stop(std::chrono::seconds grace, std::string* why);
  void Kill();  // SIGKILL, reaped
  int port() const { return std::stoi(target_.substr(target_.rfind(':') + 1)); }
  std::string LogTail(size_t bytes = 2000) const;

 private:
  void RemoveShmDir();
  std::string binary_, log_path_, target_, shm_dir_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_status_ = 0;
};

std::string DescribeExit(int status);

// The worker process of device (slot) `device` under a front (--isolate-devices) `front`: its
// child whose command line says --devices <device>; 0 when there is none.
pid_t WorkerPid(pid_t front, int device);  // "exit 0", "killed by signal 11 (Segmentation fault)"

}  // namespace gpuscan::soak
