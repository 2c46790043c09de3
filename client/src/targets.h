// Internal: the server addresses behind a target. Striped lanes pin one array to one of them;
// shards spread one array over all of them.
#pragma once

#include <string>
#include <vector>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// The addresses `options.target` stands for, as gRPC targets ("ipv4:1.2.3.4:80"): every entry
// of an ipv4:/ipv6: list, or every address a dns: name (or any host:port under round_robin)
// resolves to; otherwise the target itself, alone. *tls_name receives the host name the
// server's certificate names when the target was resolved to addresses ("" otherwise).
std::vector<std::string> ExpandTarget(const ClientOptions& options, std::string* tls_name);

}  // namespace gpuscan::detail
