// Internal: the connections of striped lanes. Each lane of an array gets its own channel (its
// own connection: distinct channel arguments and a local subchannel pool, so gRPC does not
// share one connection among them), and all lanes of one array go to one server: a target that
// resolves to several addresses (dns:, ipv4:/ipv6: lists, round_robin over pods) is pinned to
// one of them, picked at random per array so arrays still spread. Channels are kept for later
// calls.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpc/grpc.h>
#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include "gpuscan/client.h"

namespace gpuscan {

namespace detail {

// The arguments every channel of a Client starts from (the main one and each lane's): no
// receive limit (a compaction answering values and indices sends up to 3x the request chunk,
// and callers may pick chunks above 1 MiB), keepalive, then the caller's channel_int_args (the
// CLI's --channel-arg), which win.
// Keepalive while calls are active, unless the caller set it. Why: a Write blocked on a silent
// connection (link cut mid-upload) outlives the call's deadline -- neither the deadline nor
// TryCancel completes it in gRPC 1.51, only closing the transport does -- and RunBidi joins that
// writer, so without this the call returned only when the link came back (or TCP gave up, ~15
// min). An unanswered ping closes the connection within kKeepaliveTimeMs + kKeepaliveTimeoutMs
// of the cut (docs/configuration.md, "Keepalive"). The server accepts pings this often (its
// min_recv_ping_interval_without_data default is below kKeepaliveTimeMs).
inline constexpr int kKeepaliveTimeMs = 2000;
inline constexpr int kKeepaliveTimeoutMs = 2000;
inline grpc::ChannelArguments BaseChannelArguments(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  const auto& user = options.channel_int_args;
  if (!user.count(GRPC_ARG_KEEPALIVE_TIME_MS)) args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  if (!user.count(GRPC_ARG_KEEPALIVE_TIMEOUT_MS)) args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  for (const auto& [name, value] : user) args.SetInt(name, value);
  return args;
}

// A new array's id (Lanes.array_id): 16 random bytes.
std::string NewArrayId();

}  // namespace detail

class Client::LanePool {
 public:
  explicit LanePool(ClientOptions options) : options_(std::move(options)) {}
  // `lanes` stubs, lane i on connection i, all to one server address; with `channels`, also the
  // lanes' channels (for raw calls).
  std::vector<v1::GpuScan::Stub*> Stubs(uint32_t lanes, std::vector<std::shared_ptr<grpc::Channel>>* channels = nullptr);

  // The server's Limits.max_lanes, asked once (0: it does not join lanes).
  std::mutex info_mu;
  std::optional<uint32_t> server_max_lanes;

 private:
  struct Lane {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::GpuScan::Stub> stub;
  };
  // The target every lane of the next array uses, and the TLS name to verify when pinned to an
  // address ("" = the target's own).
  std::string PickTarget(std::string* tls_name) const;
  // Waits until every lane's connection is up (a connect that fails is retried meanwhile), at
  // most detail::ConnectWait. A lane still connecting when the array starts would
  // stall every other lane at its turn; one that cannot connect fails the call here, by name.
  void Connect(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const std::string& target) const;

  const ClientOptions options_;
  std::mutex mu_;
  std::map<std::string, std::vector<Lane>> by_target_;
};

}  // namespace gpuscan
