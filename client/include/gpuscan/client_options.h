// How a gpuscan::Client reaches its server (client.h): the target, TLS, retries, lanes, shards,
// the tenant, and the metadata names the calls carry.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "gpuscan/rpc_error.h"

namespace gpuscan {

// TLS towards the server. PEM file paths; empty ones are not used.
struct TlsOptions {
  bool enabled = false;      // also implied by any file below
  std::string ca_file;       // CAs that sign the server's certificate; empty = system roots
  std::string cert_file;     // client certificate chain, for servers that demand mutual TLS
  std::string key_file;      // its private key
  std::string server_name;   // name to verify the server's certificate against (default: target's host)
  bool wanted() const { return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// Retries (README "Retries"): a call whose input can be replayed (the typed calls on arrays in
// memory; the streaming calls given a Replay) is tried again after UNAVAILABLE, which is what
// a server that died, restarted, shut down or could not be reached gives, or after a CANCELLED
// the client did not ask for (a server beginning to shut down cancels calls reaching it), or
// an INTERNAL "Received RST_STREAM" (the HTTP/2 transport reset the stream). Each try is a new
// call on the channel, so under round_robin it goes to the next address that is up. Results
// already passed to the caller's Sink are not passed again: a retry sends the input again from
// its start and skips the result bytes delivered before (the service's results are the same
// bits every time for the default algorithms). The call's deadline (ClientOptions::timeout)
// covers every try and the waits between them. Other errors are not retried: they would recur.
struct RetryOptions {
  // Tries in all, the first included; 1 = no retries. 3 (two retries) as the CLI's --retries and
  // Python's retries= by default: a server restarting is no reason for a caller to fail.
  uint32_t attempts = 3;
  std::chrono::milliseconds initial_backoff{100};  // wait before the second try
  std::chrono::milliseconds max_backoff{2000};     // the wait doubles per try up to this; +-20% jitter
  // Called on the calling thread before each retry: the error, the try about to start, the wait.
  std::function<void(const RpcError& error, uint32_t next_attempt, std::chrono::milliseconds wait)> on_retry;
};

// Request metadata every lane of a striped array carries: the array id as 32 lowercase hex
// digits, for an L7 balancer to hash an array's lanes to one replica (Lanes in gpuscan.proto).
inline constexpr char kArrayIdMetadata[] = "gpuscan-array-id";
// Request metadata naming the caller's tenant (ClientOptions::tenant): whose resident arrays a
// call sees (see ArrayInfo in gpuscan.proto). With mutual TLS the certificate decides instead.
inline constexpr char kTenantMetadata[] = "gpuscan-tenant";

struct ClientOptions {
  // Any gRPC target: host:port, dns:///host:port (every address the name resolves to),
  // unix:/path, ...
  std::string target = "127.0.0.1:50051";
  size_t chunk_bytes = 1 << 20;            // bytes of elements per request message
  std::chrono::milliseconds timeout{0};    // per-call deadline; 0 = none
  TlsOptions tls;                          // off by default: plaintext
  // Channel load-balancing policy: "" keeps gRPC's default (pick_first: every call on one
  // connection); "round_robin" spreads calls over every address the target resolves to, e.g.
  // the pods behind a headless Kubernetes Service reached as dns:///name:port.
  std::string load_balancing_policy;
  // Custom channel credentials; when set they replace `tls`.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Striped lanes: calls that do not say otherwise send each array over this many concurrent
  // calls, each on its own connection, all to one server (one resolved address of `target`;
  // behind a balancer, the one its hash of kArrayIdMetadata picks).
  // 1 = one ordinary call. See Lanes in gpuscan.proto. Before its first striped call a Client
  // asks the server (GetServerInfo) for its Limits.max_lanes and uses at most that many; a
  // server that does not join lanes fails the call with FAILED_PRECONDITION.
  uint32_t lanes = 1;
  // Shards: the typed calls (Scan, Reduce, Compact on arrays in memory) split each array into
  // this many contiguous pieces, run them at once on the servers behind `target` (every
  // address of an ipv4:/ipv6: list, of a dns: name, or of any name under round_robin; shard i
  // on address i mod their number, each shard on its own connection) and combine the results:
  // scans fixed up with the carry of the shards before them, partial reductions folded in
  // order, kept indices offset. 1 = one call. Never more shards than chunks. Float SUM/PRODUCT
  // scans and reduces with the deterministic (default) algorithm stay one call: their bits are
  // tied to global positions, which a carry fix-up would change. A failing shard fails the
  // call and cancels the others; the error names the shard and its server.
  uint32_t shards = 1;
  RetryOptions retry;  // two retries by default (attempts = 3); attempts = 1 turns them off
  // Extra integer gRPC channel arguments (e.g. keepalive settings).
  std::map<std::string, int> channel_int_args;
  // Sent as kTenantMetadata on every call (lanes and shards included) when not empty: the
  // tenant whose resident arrays the calls put, see and drop (at most 128 bytes). No security
  // boundary without mutual TLS, where the client certificate names the tenant.
  std::string tenant;
};

// Channel credentials for `tls` (insecure when !tls.wanted()). Throws std::invalid_argument
// naming the file that cannot be read or the option that is missing.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsOptions& tls);

}  // namespace gpuscan
