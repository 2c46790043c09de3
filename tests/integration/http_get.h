// A tiny blocking HTTP/1.0 GET over a loopback socket: what a Prometheus scrape does, with
// nothing between the test and the server's endpoint. HTTP/1.0 has the server close the
// connection after the response, so the body is everything up to EOF.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gpuscan::testing {

struct HttpResponse {
  int status = 0;        // 200, 404, ...
  std::string headers;   // the status line and headers, as received
  std::string body;
};

// GETs http://127.0.0.1:port/path. Throws std::runtime_error when the connection or the
// response fails (10 s timeout on each send/receive, so a hung endpoint fails the test).
inline HttpResponse HttpGet(int port, const std::string& path) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error("GET 127.0.0.1:" + std::to_string(port) + path + ": " + what + " (" +
                             std::strerror(errno) + ")");
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("socket");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) fail("connect");

  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) fail("send");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) fail("recv");
    raw.append(buf, static_cast<size_t>(n));
  }

  HttpResponse r;
  const size_t split = raw.find("\r\n\r\n");
  if (split == std::string::npos) fail("no end of headers in " + std::to_string(raw.size()) + " bytes");
  r.headers = raw.substr(0, split);
  r.body = raw.substr(split + 4);
  // "HTTP/1.x 200 OK"
  const size_t space = r.headers.find(' ');
  if (r.headers.compare(0, 5, "HTTP/") != 0 || space == std::string::npos) fail("bad status line");
  r.status = std::atoi(r.headers.c_str() + space + 1);
  return r;
}

}  // namespace gpuscan::testing
