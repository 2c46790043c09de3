#include "service/resident_store.h"

#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include "service/narrow.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// Bytes from the kernel's CSPRNG (getrandom: /dev/urandom's pool, never blocking once seeded).
std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("getrandom failed: no random bytes for a resident array id");
    }
    got += static_cast<size_t>(r);
  }
  return out;
}

uint64_t UnixMillis(std::chrono::system_clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

std::string Figure(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace

std::string DTypeText(int dtype) {
  return v1::DType_IsValid(dtype) ? v1::DType_Name(static_cast<v1::DType>(dtype)) : std::to_string(dtype);
}

size_t WireDTypeSize(int dtype) {
  engine::DType wide;
  if (dtype >= v1::DTYPE_INT8 && dtype <= v1::DTYPE_FLOAT16) return NarrowSize(static_cast<v1::DType>(dtype));
  return ToEngineDType(dtype, &wide).ok() ? engine::SizeOf(wide) : 0;
}

// Bytes held by tenant: memory is counted from Allocate until its last holder lets it go, so a
// dropped array still in use stays in the budget until that call ends. Spilled copies count in
// `spilled` (--spill-bytes) and in their tenant's bytes (the quota covers both).
struct ResidentStore::Accounts {
  std::mutex mu;
  uint64_t used = 0;     // device memory (the budget)
  uint64_t spilled = 0;  // host memory of spilled arrays
  std::map<std::string, uint64_t> by_tenant;

  void Give(const std::string& tenant, uint64_t bytes, bool spill) {
    std::lock_guard<std::mutex> lock(mu);
    (spill ? spilled : used) -= bytes;
    auto it = by_tenant.find(tenant);
    if (it != by_tenant.end() && (it->second -= bytes) == 0) by_tenant.erase(it);
  }
};

std::shared_ptr<engine::ResidentMemory> ResidentStore::Counted(std::unique_ptr<engine::ResidentMemory> memory,
                                                               std::shared_ptr<Accounts> accounts,
                                                               const std::string& tenant, uint64_t bytes, bool spill) {
  return std::shared_ptr<engine::ResidentMemory>(
      memory.release(), [accounts = std::move(accounts), tenant, bytes, spill](engine::ResidentMemory* m) {
        delete m;
        accounts->Give(tenant, bytes, spill);
      });
}

ResidentStore::ResidentStore(engine::Engine* engine, ResidentOptions options)
    : engine_(engine), options_(options), epoch_(RandomBytes(8)), accounts_(std::make_shared<Accounts>()) {
  if (options_.route >= 0) epoch_[0] = static_cast<char>(options_.route);
  if (options_.budget_bytes == 0) return;  // not served: no sweeper either
  sweeper_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, options_.sweep_every);
      if (stopping_) break;
      lock.unlock();
      Expire();
      lock.lock();
    }
  });
}

ResidentStore::~ResidentStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

grpc::Status ResidentStore::CheckServed() const {
  if (options_.budget_bytes) return grpc::Status::OK;
  return {grpc::StatusCode::UNIMPLEMENTED,
          "this server keeps no resident arrays (start gpuscan-server with --resident-bytes)"};
}

grpc::Status ResidentStore::CheckLabel(const std::string& label, const std::string& field) {
  if (label.size() <= kMaxLabelBytes) return grpc::Status::OK;
  return InvalidArgument(field + " has " + std::to_string(label.size()) + " bytes; at most " +
                         std::to_string(kMaxLabelBytes));
}

grpc::Status ResidentStore::Allocate(const std::string& tenant, uint64_t bytes,
                                     std::shared_ptr<engine::ResidentMemory>* out, const engine::ResidentMemory* near) {
  return AllocateDevice(tenant, bytes, false, out, near);
}

grpc::Status ResidentStore::AllocateDevice(const std::string& tenant, uint64_t bytes, bool restoring,
                                           std::shared_ptr<engine::ResidentMemory>* out,
                                           const engine::ResidentMemory* near) {
  if (auto s = CheckServed(); !s.ok()) return s;
  for (;;) {
    uint64_t used = 0, spilled = 0;
    {
      std::lock_guard<std::mutex> lock(accounts_->mu);
      const uint64_t mine = accounts_->by_tenant.count(tenant) ? accounts_->by_tenant[tenant] : 0;
      const uint64_t quota = options_.tenant_quota_bytes;
      if (!restoring && quota && bytes > quota - std::min(mine, quota)) {
        return ResourceExhausted("resident arrays: " + Figure(bytes) + " more would pass this tenant's quota of " +
                                 Figure(quota) + " (--tenant-quota-bytes), " + Figure(mine) + " in use by it");
      }
      if (bytes <= options_.budget_bytes - std::min(accounts_->used, options_.budget_bytes)) {
        accounts_->used += bytes;
        accounts_->by_tenant[tenant] += bytes;
        break;
      }
      used = accounts_->used;
      spilled = accounts_->spilled;
    }
    // Past the budget: make room by spilling, while an array can go and the room it makes can help.
    // A restore swaps: it may spill past --spill-bytes, since its own bytes leave the spill room as
    // soon as it is back (else a full spill room would keep every spilled array out for good).
    const uint64_t needed = bytes - (options_.budget_bytes - std::min(used, options_.budget_bytes));
    if (bytes > options_.budget_bytes || !SpillOne(needed, restoring)) {
      std::string m = "resident arrays: " + Figure(bytes) + " more would pass the budget of " +
                      Figure(options_.budget_bytes) + " (--resident-bytes), " + Figure(used) + " in use";
      if (options_.spill_bytes) {
        m += ", and no array can spill (" + Figure(spilled) + " of " + Figure(options_.spill_bytes) +
             " (--spill-bytes) in use, the rest held by calls)";
      }
      return ResourceExhausted(m + "; drop arrays (DropArray) or wait for their ttl");
    }
  }
  std::unique_ptr<engine::ResidentMemory> memory;
  try {
    memory = (near ? near->engine : engine_)->AllocateResident(std::max<uint64_t>(bytes, 1));
    if (near) memory->device = near->device;  // a DeviceSet's label of that device
  } catch (const engine::Error& e) {
    accounts_->Give(tenant, bytes, false);
    return ToStatus(e);
  } catch (const std::bad_alloc&) {
    accounts_->Give(tenant, bytes, false);
    return ResourceExhausted("resident arrays: no memory for " + Figure(bytes));
  }
  *out = Counted(std::move(memory), accounts_, tenant, bytes, false);
  return grpc::Status::OK;
}

bool ResidentStore::SpillOne(uint64_t needed, bool restoring) {
  if (options_.spill_bytes == 0) return false;
  std::shared_ptr<engine::ResidentMemory> freed;  // the device memory, freed once the lock is let go
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t room = 0;
  {
    std::lock_guard<std::mutex> a(accounts_->mu);
    room = restoring ? UINT64_MAX : options_.spill_bytes - std::min(accounts_->spilled, options_.spill_bytes);
  }
  // The least recently used array on the device that no call holds (the entry's is the only
  // reference: a call takes one only under mu_) and that the spill room takes; of those, the
  // least recently used that makes the `needed` room alone, if one does (fewer arrays move).
  Entry* victim = nullptr;
  bool enough = false;
  for (auto& [tenant, ids] : tenants_) {
    for (auto& [id, entry] : ids) {
      const ResidentArray& a = *entry.array;
      if (entry.array.use_count() != 1 || !a.memory || a.count == 0 || a.memory->bytes() > room) continue;
      const bool makes = a.memory->bytes() >= needed;
      if (!victim || (makes && !enough) || (makes == enough && entry.last_used < victim->last_used)) {
        victim = &entry;
        enough = makes;
      }
    }
  }
  if (!victim) return false;
  ResidentArray& a = *victim->array;
  const uint64_t bytes = a.memory->bytes();
  {
    std::lock_guard<std::mutex> acc(accounts_->mu);
    accounts_->spilled += bytes;
    accounts_->by_tenant[a.tenant] += bytes;
  }
  std::shared_ptr<engine::ResidentMemory> host;
  try {
    host = Counted(engine_->AllocateSpill(bytes), accounts_, a.tenant, bytes, true);
  } catch (const std::exception&) {  // no host memory: nothing spilled
    accounts_->Give(a.tenant, bytes, true);
    return false;
  }
  try {
    a.memory->Read(0, host->data(), bytes);
  } catch (const std::exception&) {  // the device failed: nothing spilled (host gives its bytes back)
    return false;
  }
  // Where it comes back to (Restore): the device it left, so that the arrays a call reads together
  // stay on one device of a DeviceSet (they had been put beside each other).
  host->engine = a.memory->engine;
  host->device = a.memory->device;
  a.spilled = std::move(host);
  freed = std::move(a.memory);
  ++spills_;
  return true;
}

grpc::Status ResidentStore::Restore(const std::shared_ptr<ResidentArray>& array, const std::string& field) {
  std::lock_guard<std::mutex> one(restore_mu_);
  std::shared_ptr<engine::ResidentMemory> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!array->spilled) return grpc::Status::OK;  // another call brought it back meanwhile
    host = array->spilled;
  }
  // The caller holds the array, so no spill takes it while it comes back.
  std::shared_ptr<engine::ResidentMemory> memory;
  if (auto s = AllocateDevice(array->tenant, host->bytes(), true, &memory, host.get()); !s.ok()) {
    return {s.error_code(), field + " " + HexText(array->id) + " spilled to host memory and cannot come back: " +
                                s.error_message()};
  }
  try {
    memory->Write(0, host->data(), host->bytes());
  } catch (const engine::Error& e) {
    return ToStatus(e);
  }
  std::lock_guard<std::mutex> lock(mu_);
  array->memory = std::move(memory);
  array->spilled.reset();  // its host memory goes with `host`, outside the lock
  ++restores_;
  return grpc::Status::OK;
}

v1::ArrayInfo ResidentStore::Add(const std::string& tenant, int dtype, uint64_t count,
                                 std::shared_ptr<engine::ResidentMemory> memory, uint64_t ttl_ms,
                                 const std::string& label) {
  auto array = std::make_shared<ResidentArray>();
  array->id = RandomBytes(kIdBytes - epoch_.size()) + epoch_;
  array->tenant = tenant;
  array->dtype = dtype;
  array->count = count;
  array->label = label;
  const auto cap = static_cast<uint64_t>(options_.max_ttl.count());
  array->ttl = std::chrono::milliseconds(ttl_ms == 0 || ttl_ms > cap ? cap : ttl_ms);
  array->memory = std::move(memory);
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = tenants_[tenant][array->id];
  entry.array = std::move(array);
  entry.last_used = std::chrono::steady_clock::now();
  entry.order = next_order_++;
  return InfoLocked(entry);
}

grpc::Status ResidentStore::NotFound(const std::string& id, const std::string& field) const {
  if (id.empty()) return InvalidArgument(field + " is required (an ArrayInfo.id); it has 0 bytes");
  if (id.size() == kIdBytes && id.compare(kIdBytes - epoch_.size(), epoch_.size(), epoch_) != 0) {
    return {grpc::StatusCode::NOT_FOUND, field + " " + HexText(id) +
                                             ": the server restarted since this id was issued (its arrays are gone)"};
  }
  return {grpc::StatusCode::NOT_FOUND,
          field + " " + HexText(id) + ": no such resident array (unknown, dropped, or idle past its ttl)"};
}

grpc::Status ResidentStore::Find(const std::string& tenant, const std::string& id, const std::string& field,
                                 std::shared_ptr<const ResidentArray>* out) {
  if (auto s = CheckServed(); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return NotFound(id, field);
  auto it = t->second.find(id);
  if (it == t->second.end()) return NotFound(id, field);
  const auto now = std::chrono::steady_clock::now();
  if (now - it->second.last_used >= it->second.array->ttl) return NotFound(id, field);  // the sweeper's next
  it->second.last_used = now;
  std::shared_ptr<ResidentArray> array = it->second.array;
  if (array->spilled) {
    lock.unlock();
    if (auto s = Restore(array, field); !s.ok()) return s;
  }
  *out = std::move(array);
  return grpc::Status::OK;
}

grpc::Status ResidentStore::Drop(const std::string& tenant, const std::string& id, v1::ArrayInfo* info) {
  if (auto s = CheckServed(); !s.ok()) return s;
  std::shared_ptr<ResidentArray> dropped;  // freed (when no call holds it) outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return NotFound(id, "id");
  auto it = t->second.find(id);
  if (it == t->second.end()) return NotFound(id, "id");
  *info = InfoLocked(it->second);
  dropped = std::move(it->second.array);
  t->second.erase(it);
  if (t->second.empty()) tenants_.erase(t);
  return grpc::Status::OK;
}

// A page token: the run's epoch and the creation order of the page's last array, in hex. Only a
// position: a token used by another tenant lists that tenant's own arrays from there.
grpc::Status ResidentStore::List(const std::string& tenant, uint32_t page_size, const std::string& page_token,
                                 v1::ListArraysResponse* out) const {
  uint64_t after = 0;  // list the arrays of order >= after
  if (!page_token.empty()) {
    const std::string epoch_hex = HexText(epoch_);
    char* end = nullptr;
    const std::string tail = page_token.size() > epoch_hex.size() + 1 ? page_token.substr(epoch_hex.size() + 1) : "";
    const unsigned long long last = tail.empty() ? 0 : std::strtoull(tail.c_str(), &end, 16);
    const bool well_formed = page_token.size() > epoch_hex.size() + 1 && page_token[epoch_hex.size()] == '.' &&
                             tail.find_first_not_of("0123456789abcdef") == std::string::npos && end && *end == '\0' &&
                             tail.size() <= 16;
    if (!well_formed) {
      return InvalidArgument("page_token \"" + page_token.substr(0, 64) +
                             "\" is not a token this server issued (pass a ListArraysResponse.next_page_token, or "
                             "none for the first page)");
    }
    if (page_token.compare(0, epoch_hex.size(), epoch_hex) != 0) {
      return InvalidArgument("page_token is of another run of the server (it restarted since): list from the "
                             "first page");
    }
    after = static_cast<uint64_t>(last) + 1;
  }
  const size_t size = page_size == 0 ? kListPageDefault : std::min<uint32_t>(page_size, kListPageMax);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto t = tenants_.find(tenant); t != tenants_.end()) {
      std::vector<const Entry*> entries;
      for (const auto& [id, entry] : t->second) {
        if (entry.order >= after) entries.push_back(&entry);
      }
      auto by_order = [](const Entry* a, const Entry* b) { return a->order < b->order; };
      const bool more = entries.size() > size;
      if (more) std::nth_element(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(size), entries.end(), by_order);
      entries.resize(std::min(entries.size(), size));
      std::sort(entries.begin(), entries.end(), by_order);
      for (const Entry* e : entries) *out->add_arrays() = InfoLocked(*e);
      if (more) out->set_next_page_token(HexText(epoch_) + "." + fmt::format("{:x}", entries.back()->order));
    }
  }
  std::lock_guard<std::mutex> lock(accounts_->mu);
  auto mine = accounts_->by_tenant.find(tenant);
  out->set_tenant_bytes(mine == accounts_->by_tenant.end() ? 0 : mine->second);
  out->set_tenant_quota_bytes(options_.tenant_quota_bytes);
  out->set_budget_bytes(options_.budget_bytes);
  out->set_used_bytes(accounts_->used);
  out->set_spill_bytes(options_.spill_bytes);
  out->set_spilled_bytes(accounts_->spilled);
  return grpc::Status::OK;
}

v1::ArrayInfo ResidentStore::Info(const ResidentArray& array) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto t = tenants_.find(array.tenant); t != tenants_.end()) {
    if (auto it = t->second.find(array.id); it != t->second.end()) return InfoLocked(it->second);
  }
  Entry gone;  // dropped meanwhile: expires now
  gone.array = std::make_shared<ResidentArray>(array);
  gone.last_used = std::chrono::steady_clock::now() - array.ttl;
  return InfoLocked(gone);
}

v1::ArrayInfo ResidentStore::InfoLocked(const Entry& entry) const {
  const ResidentArray& a = *entry.array;
  v1::ArrayInfo info;
  info.set_id(a.id);
  info.set_dtype(static_cast<v1::DType>(a.dtype));
  info.set_element_count(a.count);
  info.set_bytes(a.count * WireDTypeSize(a.dtype));
  const engine::ResidentMemory& where = a.memory ? *a.memory : *a.spilled;
  info.set_device(a.memory ? (where.device.empty() ? where.engine->device_name() : where.device) : "host (spilled)");
  info.set_spilled(!a.memory);
  info.set_ttl_ms(static_cast<uint64_t>(a.ttl.count()));
  const auto left = a.ttl - std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - entry.last_used);
  info.set_expires_unix_ms(UnixMillis(std::chrono::system_clock::now()) +
                           static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
  info.set_label(a.label);
  return info;
}

size_t ResidentStore::Expire() {
  std::vector<std::shared_ptr<ResidentArray>> expired;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto t = tenants_.begin(); t != tenants_.end();) {
      for (auto it = t->second.begin(); it != t->second.end();) {
        if (now - it->second.last_used >= it->second.array->ttl) {
          expired.push_back(std::move(it->second.array));
          it = t->second.erase(it);
        } else {
          ++it;
        }
      }
      t = t->second.empty() ? tenants_.erase(t) : std::next(t);
    }
    expired_ += expired.size();
  }
  return expired.size();
}

uint64_t ResidentStore::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

std::map<std::string, uint64_t> ResidentStore::tenant_bytes() const {
  std::lock_guard<std::mutex> lock(accounts_->mu);
  return accounts_->by_tenant;
}

std::map<std::string, ResidentStore::DeviceHold> ResidentStore::by_device() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, DeviceHold> out;
  for (const auto& [tenant, ids] : tenants_) {
    for (const auto& [id, entry] : ids) {
      const engine::ResidentMemory* m = entry.array->memory.get();
      if (!m) continue;
      DeviceHold& d = out[m->device.empty() ? m->engine->device_name() : m->device];
      ++d.arrays;
      d.bytes += m->bytes();
    }
  }
  return out;
}

size_t ResidentStore::arrays() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [tenant, ids] : tenants_) n += ids.size();
  return n;
}

uint64_t ResidentStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(accounts_->mu);
  return accounts_->used;
}

uint64_t ResidentStore::spilled_bytes() const {
  std::lock_guard<std::mutex> lock(accounts_->mu);
  return accounts_->spilled;
}

uint64_t ResidentStore::spills() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spills_;
}

uint64_t ResidentStore::restores() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restores_;
}

namespace {
std::atomic<bool> trust_front_tenant{false};
}  // namespace

void TrustFrontTenant() { trust_front_tenant = true; }

grpc::Status TenantOf(const grpc::ServerContextBase& ctx, std::string* tenant) {
  tenant->clear();
  if (trust_front_tenant) {
    const auto& metadata = ctx.client_metadata();
    if (auto it = metadata.find(kFrontTenantMetadata); it != metadata.end()) {
      *tenant = std::string(it->second.data(), it->second.size());
      return grpc::Status::OK;
    }
  }
  if (const auto auth = ctx.auth_context(); auth && auth->IsPeerAuthenticated()) {
    // Mutual TLS: the certificate names the tenant; metadata cannot claim another.
    for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
      const auto values = auth->FindPropertyValues(property);
      if (!values.empty()) {
        *tenant = "x509:" + std::string(values.front().data(), values.front().size());
        return grpc::Status::OK;
      }
    }
  }
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("gpuscan-tenant");
  if (it == metadata.end() || it->second.empty()) return grpc::Status::OK;  // empty: the default tenant
  if (it->second.size() > 128) {
    return InvalidArgument("metadata gpuscan-tenant has " + std::to_string(it->second.size()) +
                           " bytes; at most 128");
  }
  *tenant = "md:" + std::string(it->second.data(), it->second.size());
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
