// Expanding a target into its server addresses (targets.h).
#include "targets.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "retry.h"

namespace gpuscan::detail {
namespace {

// The addresses `host` resolves to, as gRPC targets ("ipv4:1.2.3.4:80", "ipv6:[::1]:80").
std::vector<std::string> Resolve(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return out;
  std::set<std::string> seen;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) != 0) continue;
    const std::string t = a->ai_family == AF_INET6 ? "ipv6:[" + std::string(text) + "]:" + port
                                                   : "ipv4:" + std::string(text) + ":" + port;
    if (seen.insert(t).second) out.push_back(t);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

std::vector<std::string> ExpandTarget(const ClientOptions& options, std::string* tls_name) {
  const std::string& target = options.target;
  tls_name->clear();
  for (const char* scheme : {"ipv4:", "ipv6:"}) {
    if (target.rfind(scheme, 0) != 0) continue;
    std::vector<std::string> list;  // "ipv4:a:1,b:2": each of them
    for (size_t at = std::strlen(scheme); at <= target.size();) {
      const size_t comma = std::min(target.find(',', at), target.size());
      list.push_back(scheme + target.substr(at, comma - at));
      at = comma + 1;
    }
    return list;
  }
  // A name: expanded only where separate channels could land on different servers (a dns:
  // target or round_robin), since pick_first on one resolution order reaches the same one.
  std::string name = target;
  const bool dns = name.rfind("dns:", 0) == 0;
  if (!dns && options.load_balancing_policy.empty()) return {target};
  if (dns) {
    name = name.substr(4);
    if (name.rfind("//", 0) == 0) name = name.substr(std::min(name.find('/', 2), name.size()) + 1);
  }
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos || name.find('/') != std::string::npos) return {target};
  std::string host = name.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::vector<std::string> addresses = Resolve(host, name.substr(colon + 1));
  if (addresses.size() < 2) return {target};
  *tls_name = host;  // the certificate names the host, not the address
  return addresses;
}

void ConnectAll(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const std::vector<std::string>& what,
                const std::vector<std::string>& targets, std::chrono::milliseconds wait, bool required) {
  // After a connect fails, gRPC tries again once its backoff (1 s, +-20%) has passed: this long
  // after the first failure a channel not connected is refused, not slow (a server shutting down
  // or gone), and the call fails now; a retry (the caller's retries) finds the server if it comes
  // back. Counting failures instead waited out `wait`: pick_first stays in TRANSIENT_FAILURE
  // between tries, so no second failure is ever seen (striped calls begun as their server shut
  // down ended 10 s later, at the wait). A call waits this once over all its tries
  // (RefusedWaitEnd).
  constexpr std::chrono::milliseconds kOneRetry{2000};
  const auto deadline = std::chrono::system_clock::now() + wait;
  for (auto& c : channels) c->GetState(true);
  for (size_t i = 0; i < channels.size(); ++i) {
    std::optional<std::chrono::system_clock::time_point> retried_by;  // set at the first failure
    grpc_connectivity_state state = channels[i]->GetState(true);
    bool connected = state == GRPC_CHANNEL_READY;
    while (!connected) {
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !retried_by) {
        retried_by = RefusedWaitEnd(std::chrono::system_clock::now() + kOneRetry);
      }
      if (!channels[i]->WaitForStateChange(state, retried_by ? std::min(deadline, *retried_by) : deadline)) break;
      state = channels[i]->GetState(true);
      connected = state == GRPC_CHANNEL_READY;
    }
    if (!connected && required) {
      const bool refused = retried_by && *retried_by <= deadline;
      throw RpcError(grpc::StatusCode::UNAVAILABLE,
                     what[i] + " could not connect to " + targets[i] +
                         (refused ? ": refused, and still " + std::to_string(kOneRetry.count()) +
                                        " ms after the call's first refusal"
                                  : " within " + std::to_string(wait.count()) + " ms"));
    }
  }
}

}  // namespace gpuscan::detail
