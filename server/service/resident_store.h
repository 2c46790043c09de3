// ResidentStore: the arrays callers keep on the server (PutArray, an operation's header.resident):
// their ids, tenants, ttl, the budget of every tenant's arrays together and each tenant's quota.
// The memory itself is the engine's (engine::ResidentMemory: the device's on the cuda engine).
// Past the budget, the least recently used arrays that no call holds spill to host memory (up
// to --spill-bytes) and come back on their next use (Find). One per server; thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan::server {

struct ResidentOptions {
  uint64_t budget_bytes = 0;        // --resident-bytes: every tenant's arrays together; 0 = not served
  uint64_t tenant_quota_bytes = 0;  // --tenant-quota-bytes: each tenant's (device and spilled); 0 = no cap
  uint64_t spill_bytes = 0;         // --spill-bytes: host memory arrays spill to past the budget; 0 = none
  std::chrono::milliseconds max_ttl{std::chrono::hours(1)};  // --resident-ttl-ms: the default and the cap
  std::chrono::milliseconds sweep_every{200};                 // how often expired arrays are dropped
  int route = -1;  // 0-255: the first byte of the epoch (ResidentStore::RouteOf); -1: random as the rest
};

// One resident array. A call that uses it holds it (a shared_ptr), so memory dropped during the
// call is freed, and leaves the budget, when that call ends.
struct ResidentArray {
  std::string id;  // kIdBytes: random, then the store's epoch
  std::string tenant;
  int dtype = 0;  // a v1::DType (narrow ones too: a Put takes any)
  uint64_t count = 0;
  std::string label;
  std::chrono::milliseconds ttl{0};
  // Where it lies. A call's array (Find's) is never spilled: memory is set for as long as it holds
  // it. In the store, one of the two is set (under the store's lock).
  std::shared_ptr<engine::ResidentMemory> memory;   // on the device
  std::shared_ptr<engine::ResidentMemory> spilled;  // in host memory (AllocateSpill), past the budget
};

class ResidentStore {
 public:
  static constexpr size_t kIdBytes = 24;     // 16 random bytes, then 8 of the epoch
  static constexpr size_t kMaxLabelBytes = 128;
  // The byte of an id that names the worker of a front that issued it (ResidentOptions::route):
  // the epoch's first. -1 for an id that is not kIdBytes long.
  static constexpr size_t kRouteByte = kIdBytes - 8;
  static int RouteOf(const std::string& id) {
    return id.size() == kIdBytes ? static_cast<unsigned char>(id[kRouteByte]) : -1;
  }

  ResidentStore(engine::Engine* engine, ResidentOptions options);
  ~ResidentStore();  // stops the sweeper; arrays still held by calls are freed when those end
  ResidentStore(const ResidentStore&) = delete;
  ResidentStore& operator=(const ResidentStore&) = delete;

  const ResidentOptions& options() const { return options_; }
  // UNIMPLEMENTED naming --resident-bytes when the server keeps no arrays.
  grpc::Status CheckServed() const;

  // Memory for a new array of `bytes` for `tenant`, counted against the budget and the tenant's
  // quota until it is freed. Past the budget, arrays no call holds spill (least recently used
  // first) while --spill-bytes has room. RESOURCE_EXHAUSTED with the figures when it would pass
  // the quota, when spilling cannot make room, or when the engine cannot hold it. `near`: memory
  // the new memory must lie beside (a call's input: its kernels write the result there), else
  // the engine's choice (a DeviceSet's freest device).
  grpc::Status Allocate(const std::string& tenant, uint64_t bytes, std::shared_ptr<engine::ResidentMemory>* out,
                        const engine::ResidentMemory* near = nullptr);
  // Registers filled memory (from Allocate) as a new array of `tenant`; returns its info.
  // ttl_ms 0 or past the cap: the cap. The label has been checked (CheckLabel).
  v1::ArrayInfo Add(const std::string& tenant, int dtype, uint64_t count, std::shared_ptr<engine::ResidentMemory> memory,
                    uint64_t ttl_ms, const std::string& label);
  // The array `id` of `tenant`, renewed (its idle time starts again) and, when it had spilled,
  // copied back to the device first, spilling others for room: a swap, which may leave the spilled
  // bytes past --spill-bytes (then Puts past the budget are refused until they are back under);
  // RESOURCE_EXHAUSTED when calls hold the room. NOT_FOUND naming `field` for an unknown id,
  // another tenant's and an expired or dropped one alike; an id of an earlier run of the server
  // says that the server restarted.
  grpc::Status Find(const std::string& tenant, const std::string& id, const std::string& field,
                    std::shared_ptr<const ResidentArray>* out);
  // Forgets the array (its memory goes once no call holds it): Find's NOT_FOUND otherwise.
  grpc::Status Drop(const std::string& tenant, const std::string& id, v1::ArrayInfo* info);
  // ListArrays: a page of the tenant's arrays in creation order, those made after the position
  // `page_token` names (empty: from the first), `page_size` at most (0: kListPageDefault; more
  // than kListPageMax: that), with the totals and the next page's token. INVALID_ARGUMENT naming
  // page_token for a token this run did not issue.
  static constexpr uint32_t kListPageDefault = 1000, kListPageMax = 10000;
  grpc::Status List(const std::string& tenant, uint32_t page_size, const std::string& page_token,
                    v1::ListArraysResponse* out) const;
  v1::ArrayInfo Info(const ResidentArray& array) const;  // expiry from its last use

  // Drops the arrays idle for their ttl; returns how many (the sweeper's step; tests call it).
  size_t Expire();
  size_t arrays() const;
  uint64_t used_bytes() const;  // memory held for arrays now, dropped ones still in use included
  uint64_t spilled_bytes() const;  // host memory held for spilled arrays now
  uint64_t spills() const;         // arrays spilled since the start
  uint64_t restores() const;       // spilled arrays copied back since the start
  uint64_t expired() const;        // arrays dropped at the end of their ttl since the start
  // For the metrics: each tenant's bytes (on the device and spilled; tenants with none left out),
  // and each device's arrays and bytes (spilled ones left out), by Timing.device's name.
  std::map<std::string, uint64_t> tenant_bytes() const;
  struct DeviceHold {
    uint64_t arrays = 0, bytes = 0;
  };
  std::map<std::string, DeviceHold> by_device() const;

  // INVALID_ARGUMENT naming `field` for a label over kMaxLabelBytes.
  static grpc::Status CheckLabel(const std::string& label, const std::string& field);

 private:
  struct Accounts;  // bytes by tenant, shared with the memory's deleters
  struct Entry {
    std::shared_ptr<ResidentArray> array;
    std::chrono::steady_clock::time_point last_used;
    uint64_t order = 0;  // creation order, for List
  };
  grpc::Status NotFound(const std::string& id, const std::string& field) const;
  v1::ArrayInfo InfoLocked(const Entry& entry) const;
  // Allocate's: `bytes` of device memory counted for `tenant` (the quota unchecked when `restoring`:
  // the array's spilled bytes count already and go once it is back).
  grpc::Status AllocateDevice(const std::string& tenant, uint64_t bytes, bool restoring,
                              std::shared_ptr<engine::ResidentMemory>* out, const engine::ResidentMemory* near);
  // Spills the least recently used array no call holds to host memory, preferring one that makes
  // `needed` device bytes alone: false when none can. A restore's (`restoring`) may pass
  // --spill-bytes (a swap: the restored array's host copy goes right after).
  bool SpillOne(uint64_t needed, bool restoring);
  // Memory that gives its bytes back to the accounts (device or spill) when its last holder lets it go.
  static std::shared_ptr<engine::ResidentMemory> Counted(std::unique_ptr<engine::ResidentMemory> memory,
                                                         std::shared_ptr<Accounts> accounts, const std::string& tenant,
                                                         uint64_t bytes, bool spill);
  grpc::Status Restore(const std::shared_ptr<ResidentArray>& array, const std::string& field);

  engine::Engine* engine_;
  const ResidentOptions options_;
  std::string epoch_;  // 8 random bytes of this run
  std::shared_ptr<Accounts> accounts_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t next_order_ = 0;
  uint64_t spills_ = 0, restores_ = 0, expired_ = 0;  // under mu_
  std::mutex restore_mu_;  // one restore at a time: a second Find of the array waits for the first
  std::map<std::string, std::unordered_map<std::string, Entry>> tenants_;  // tenant -> id -> entry
  std::thread sweeper_;  // last: started once the rest is built
};

// A v1::DType's element size in bytes, narrow ones included; 0 for a value that is none.
size_t WireDTypeSize(int dtype);
// A v1::DType's name for messages ("DTYPE_INT32"), or its number when it is none.
std::string DTypeText(int dtype);

// The caller's tenant: under mutual TLS the client certificate's identity (its subject's common
// name, else its first subject alternative name); otherwise the `gpuscan-tenant` request
// metadata ("" when absent: the default tenant). INVALID_ARGUMENT naming the metadata when it
// has more than 128 bytes.
grpc::Status TenantOf(const grpc::ServerContextBase& ctx, std::string* tenant);

// A front of worker processes (server/isolation/) terminates the caller's TLS, so its worker
// cannot see the certificate: the front sends the tenant it found (TenantOf, "x509:...") in this
// metadata and drops any the caller sent. A worker (--worker-of-front, on a socket only its
// front can reach) trusts it once TrustFrontTenant() is called; no other server reads it.
inline constexpr const char* kFrontTenantMetadata = "gpuscan-front-tenant";
void TrustFrontTenant();

}  // namespace gpuscan::server
