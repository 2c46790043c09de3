// The connections of striped lanes (lane_pool.h): one channel per lane, all lanes of an array
// pinned to one server address; and the random ids that name the arrays.
#include "lane_pool.h"

#include <algorithm>
#include <cstring>
#include <random>

#include <grpcpp/create_channel.h>

#include "retry.h"
#include "targets.h"

namespace gpuscan {
namespace {

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  return rng;
}

}  // namespace

namespace detail {

std::string NewArrayId() {
  std::string id(16, '\0');
  for (int i = 0; i < 2; ++i) {
    const uint64_t r = Rng()();
    std::memcpy(id.data() + 8 * i, &r, 8);
  }
  return id;
}

}  // namespace detail

std::string Client::LanePool::PickTarget(std::string* tls_name) const {
  const std::vector<std::string> addresses = detail::ExpandTarget(options_, tls_name);
  return addresses[Rng()() % addresses.size()];
}

std::vector<v1::GpuScan::Stub*> Client::LanePool::Stubs(uint32_t lanes,
                                                        std::vector<std::shared_ptr<grpc::Channel>>* lane_channels) {
  std::string tls_name;
  const std::string target = PickTarget(&tls_name);
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<Lane>& pool = by_target_[target];
  while (pool.size() < lanes) {
    grpc::ChannelArguments args = detail::BaseChannelArguments(options_);
    // A distinct argument per lane and a channel-local subchannel pool: one connection per lane.
    args.SetInt("gpuscan.lane", static_cast<int>(pool.size()));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (target == options_.target && !options_.load_balancing_policy.empty()) {
      args.SetLoadBalancingPolicyName(options_.load_balancing_policy);
    }
    if (!options_.tls.server_name.empty()) {
      args.SetSslTargetNameOverride(options_.tls.server_name);
    } else if (!tls_name.empty()) {
      args.SetSslTargetNameOverride(tls_name);
    }
    auto creds = options_.credentials ? options_.credentials : MakeChannelCredentials(options_.tls);
    Lane lane;
    lane.channel = grpc::CreateCustomChannel(target, creds, args);
    lane.stub = v1::GpuScan::NewStub(lane.channel);
    pool.push_back(std::move(lane));
  }
  std::vector<v1::GpuScan::Stub*> out;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (uint32_t i = 0; i < lanes; ++i) {
    out.push_back(pool[i].stub.get());
    channels.push_back(pool[i].channel);
  }
  lock.unlock();
  Connect(channels, target);
  if (lane_channels) *lane_channels = std::move(channels);
  return out;
}

void Client::LanePool::Connect(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                               const std::string& target) const {
  std::vector<std::string> what;
  for (size_t i = 0; i < channels.size(); ++i) {
    what.push_back("lane " + std::to_string(i) + " of " + std::to_string(channels.size()));
  }
  // At most the connect wait, and never past the call's own deadline (its retries' included).
  std::chrono::milliseconds wait = detail::ConnectWait(options_);
  if (const detail::Deadline deadline = detail::CallDeadline(options_)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::system_clock::now());
    wait = std::max(std::chrono::milliseconds(0), std::min(wait, left));
  }
  detail::ConnectAll(channels, what, std::vector<std::string>(channels.size(), target), wait, /*required=*/true);
}

uint32_t Client::UsableLanes(uint32_t wanted) {
  std::lock_guard<std::mutex> lock(lane_pool_->info_mu);
  if (!lane_pool_->server_max_lanes) lane_pool_->server_max_lanes = Info().limits().max_lanes();
  const uint32_t max = *lane_pool_->server_max_lanes;
  if (max == 0) {
    // An older server would answer each lane as an array of its own: a wrong result, not an error.
    throw RpcError(grpc::StatusCode::FAILED_PRECONDITION,
                   "the server does not join striped lanes (Limits.max_lanes is 0: an older version); "
                   "use lanes = 1 (CLI: --lanes 1)");
  }
  return std::min(wanted, max);
}

}  // namespace gpuscan
