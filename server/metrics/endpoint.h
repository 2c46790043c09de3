// MetricsEndpoint: serves a Metrics object as Prometheus text at http://ADDRESS/metrics
// (prometheus-cpp's Exposer, over civetweb). Stopping it is destroying it, within milliseconds.
#pragma once

#include <memory>
#include <string>

namespace prometheus {
class Exposer;
}

namespace gpuscan::server {

class Metrics;

class MetricsEndpoint {
 public:
  // Listens on `address` (host:port; port 0 picks a free one) and serves `metrics`, which must
  // outlive this object. Throws std::runtime_error when the address cannot be bound.
  MetricsEndpoint(const std::string& address, const Metrics& metrics);
  // Stops serving: the listening socket is closed and a scrape in progress is cut off.
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }                   // the bound port
  const std::string& address() const { return address_; }  // host:bound-port

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string address_;
};

}  // namespace gpuscan::server
