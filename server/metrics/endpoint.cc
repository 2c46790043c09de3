#include "metrics/endpoint.h"

#include <stdexcept>

#include <prometheus/exposer.h>

#include "metrics/metrics.h"

namespace gpuscan::server {

namespace {
// Scrapes are rare and cheap; two threads let a slow client not block the next scrape.
constexpr size_t kHttpThreads = 2;
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

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace gpuscan::server
