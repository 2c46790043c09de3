#include "metrics/endpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <prometheus/exposer.h>

#include "metrics/metrics.h"

namespace gpuscan::server {

namespace {
// Scrapes are rare and cheap; two threads let a slow client not block the next scrape.
constexpr size_t kHttpThreads = 2;

// The TCP port of a socket's local address, or -1 when `fd` is no IPv4/IPv6 socket.
int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

// Wakes civetweb's threads before mg_stop, so that stopping takes milliseconds, not seconds.
// civetweb (1.15, Debian's) waits for connections in poll() with a 2000 ms quantum
// (SOCKET_TIMEOUT_QUANTUM) and reads the stop flag only between quanta, and mg_stop only sets
// that flag and waits: every stop took up to 2 s, ~2 s for an endpoint stopped within 2 s of its
// start (each test server with metrics, each gpuscan-server at SIGTERM). shutdown() of the
// listening socket (and of the connections it accepted) ends those polls at once; civetweb then
// finds the stop flag set and exits. The sockets are those of this process bound to the
// endpoint's TCP port, found in /proc/self/fd; each is dup'ed first, so the check and the
// shutdown are of the same socket even if its fd is closed and reused meanwhile. Without
// /proc, nothing is woken and the stop takes its 2 s as before.
void WakeCivetweb(int port) {
  if (port <= 0) return;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  std::vector<int> fds;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != ::dirfd(dir)) fds.push_back(fd);
  }
  ::closedir(dir);
  for (const int fd : fds) {
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) continue;  // closed meanwhile
    int type = 0;
    socklen_t len = sizeof(type);
    // The listener and the connections it accepted (a client socket's local port is never one
    // that a listener of this host holds).
    if (::getsockopt(own, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM && LocalPort(own) == port) {
      ::shutdown(own, SHUT_RDWR);
    }
    ::close(own);
  }
}
}  // namespace

MetricsEndpoint::MetricsEndpoint(const std::string& address, const Metrics& metrics) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, kHttpThreads);
  } catch (const std::exception& e) {
    // civetweb's own message ("null context ...") does not name the address.
    throw std::runtime_error("cannot serve metrics on " + address + " (" + e.what() + ")");
  }
  for (const auto& collectable : metrics.collectables()) exposer_->RegisterCollectable(collectable);
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  const size_t colon = address.rfind(':');  // civetweb also takes a bare port: all interfaces
  address_ = (colon == std::string::npos ? "0.0.0.0" : address.substr(0, colon)) + ":" + std::to_string(port_);
}

MetricsEndpoint::~MetricsEndpoint() {
  WakeCivetweb(port_);
  exposer_.reset();
}

}  // namespace gpuscan::server
