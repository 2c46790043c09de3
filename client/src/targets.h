// Internal: the server addresses behind a target. Striped lanes pin one array to one of them;
// shards spread one array over all of them.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// The addresses `options.target` stands for, as gRPC targets ("ipv4:1.2.3.4:80"): every entry
// of an ipv4:/ipv6: list, or every address a dns: name (or any host:port under round_robin)
// resolves to; otherwise the target itself, alone. *tls_name receives the host name the
// server's certificate names when the target was resolved to addresses ("" otherwise).
std::vector<std::string> ExpandTarget(const ClientOptions& options, std::string* tls_name);

// How long a call waits for the fresh connections it needs: 10 s, or the call timeout if shorter.
inline std::chrono::milliseconds ConnectWait(const ClientOptions& options) {
  constexpr std::chrono::milliseconds kMost{10000};
  return options.timeout.count() > 0 ? std::min(options.timeout, kMost) : kMost;
}

// Waits until every channel is connected, all connecting at once, for at most `wait` (gRPC
// retries a failed connect meanwhile, after ~1 s); a channel still not connected 2 s after the
// call's first failed connect (over all its tries) is given up (refused: a server shutting down
// or gone). Fresh connections made for one call (a lane, a shard) use it: a first connect that
// fails would otherwise fail the call at once. When
// one does not connect: `required`, UNAVAILABLE naming what[i] and its target; otherwise the
// call goes ahead and fails (or not) on its own.
void ConnectAll(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const std::vector<std::string>& what,
                const std::vector<std::string>& targets, std::chrono::milliseconds wait, bool required);

}  // namespace gpuscan::detail
