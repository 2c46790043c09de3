// Client: channel setup, per-call contexts and the unary calls (GetServerInfo).
#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "call_registry.h"
#include "gpuscan/client.h"
#include "lane_pool.h"
#include "retry.h"
#include "shards.h"

namespace gpuscan {

size_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_UINT8: return 1;
    case v1::DTYPE_INT16:
    case v1::DTYPE_UINT16:
    case v1::DTYPE_FLOAT16: return 2;
    case v1::DTYPE_INT32:
    case v1::DTYPE_UINT32:
    case v1::DTYPE_FLOAT32: return 4;
    case v1::DTYPE_INT64:
    case v1::DTYPE_UINT64:
    case v1::DTYPE_FLOAT64: return 8;
    default: return 0;
  }
}

size_t ScanOutputSize(const v1::ScanHeader& header) { return ScanOutputSize(header.dtype(), header.output_dtype()); }

size_t ScanOutputSize(v1::DType dtype, v1::DType output_dtype) {
  if (output_dtype != v1::DTYPE_UNSPECIFIED) return DTypeSize(output_dtype);
  switch (dtype) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_UINT8:
    case v1::DTYPE_INT16:
    case v1::DTYPE_UINT16: return 8;  // numpy's int64 / uint64
    default: return DTypeSize(dtype);
  }
}

Client::Client(ClientOptions options)
    : options_(std::move(options)), calls_(std::make_unique<detail::CallRegistry>()) {
  grpc::ChannelArguments args = detail::BaseChannelArguments(options_);
  if (!options_.load_balancing_policy.empty()) args.SetLoadBalancingPolicyName(options_.load_balancing_policy);
  if (!options_.tls.server_name.empty()) args.SetSslTargetNameOverride(options_.tls.server_name);
  auto creds = options_.credentials ? options_.credentials : MakeChannelCredentials(options_.tls);
  channel_ = grpc::CreateCustomChannel(options_.target, creds, args);
  stub_ = v1::GpuScan::NewStub(channel_);
  lane_pool_ = std::make_unique<LanePool>(options_);  // connects only when a call uses lanes
  shard_pool_ = std::make_unique<detail::ShardPool>(options_);  // likewise for shards
  operations_ = std::make_unique<Operations>();
}

Client::~Client() = default;

struct Client::Operations {
  std::mutex mu;
  std::optional<std::vector<std::string>> names;
};

bool Client::ServesOperation(const std::string& operation) {
  std::lock_guard<std::mutex> lock(operations_->mu);
  if (!operations_->names) {
    const v1::ServerInfo info = Info();
    operations_->names.emplace(info.operations().begin(), info.operations().end());
  }
  const auto& names = *operations_->names;
  return std::find(names.begin(), names.end(), operation) != names.end();
}

detail::ContextPtr Client::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (const detail::Deadline deadline = detail::CallDeadline(options_)) ctx->set_deadline(*deadline);
  if (!options_.tenant.empty()) ctx->AddMetadata(kTenantMetadata, options_.tenant);
  return calls_->Track(std::move(ctx));
}

void Client::CancelCalls() { calls_->CancelAll(); }

namespace detail {
void ContextRelease::operator()(grpc::ClientContext* ctx) const {
  if (calls) {
    calls->Release(ctx);
  } else {
    delete ctx;
  }
}
}  // namespace detail

size_t Client::ChunkBytes(size_t element_size) const {
  if (element_size == 0) element_size = 1;  // unknown dtype: the server rejects the header
  size_t chunk = options_.chunk_bytes / element_size * element_size;
  return chunk == 0 ? element_size : chunk;
}

v1::ServerInfo Client::Info() {
  auto ctx = NewContext();
  v1::ServerInfo info;
  grpc::Status status = stub_->GetServerInfo(ctx.get(), v1::GetServerInfoRequest(), &info);
  if (!status.ok()) throw RpcError(status);
  return info;
}

}  // namespace gpuscan
