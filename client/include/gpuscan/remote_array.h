// gpuscan::RemoteArray: a resident array (see Resident in gpuscan.proto and docs/resident.md),
// kept by the server between calls, owned here. Made by Client::Put and by a Scan that keeps its
// result (Client::Scan(const RemoteArray&, const ScanOptions&, const ResidentOptions&)); operations
// name it by id, and only the results the caller asks for cross the wire.
//
// Ownership: the array is dropped (DropArray) when its RemoteArray is destroyed or assigned over,
// unless release() gave it up first; errors of that drop are ignored (the array may have expired
// after its ttl, or the server gone: either way it is no longer held). Move-only. A RemoteArray
// keeps a pointer to its Client, which must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuscan/dtypes.h"
#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan {

class Client;

// What an array put or kept is to be: its ttl and label (PutArrayHeader's, Resident's).
struct ResidentOptions {
  // Idle time after which the server drops it (every call that uses it renews it). 0: the
  // server's --resident-ttl-ms, which also caps it (ArrayInfo.ttl_ms says what it got).
  std::chrono::milliseconds ttl{0};
  std::string label;  // the caller's name for it, at most 128 bytes; ListArrays shows it
};

// An array id (24 bytes) as 48 lowercase hex digits, and back: ArrayIdFromHex throws
// std::invalid_argument for anything but 48 hex digits (either case).
std::string ArrayIdHex(const std::string& id);
std::string ArrayIdFromHex(const std::string& hex);

class RemoteArray {
 public:
  RemoteArray() = default;  // empty: holds no array
  // Takes ownership of the array `info` describes, on `client`'s server (under its tenant).
  RemoteArray(Client& client, v1::ArrayInfo info) : client_(&client), info_(std::move(info)) {}
  ~RemoteArray();
  RemoteArray(RemoteArray&& other) noexcept;
  RemoteArray& operator=(RemoteArray&& other) noexcept;  // drops the array held before
  RemoteArray(const RemoteArray&) = delete;
  RemoteArray& operator=(const RemoteArray&) = delete;

  explicit operator bool() const { return client_ != nullptr; }
  Client* client() const { return client_; }

  // As the server last described it (Put, the keeping Scan, or Refresh).
  const v1::ArrayInfo& info() const { return info_; }
  const std::string& id() const { return info_.id(); }  // 24 raw bytes
  std::string id_hex() const { return ArrayIdHex(info_.id()); }
  v1::DType dtype() const { return info_.dtype(); }
  uint64_t size() const { return info_.element_count(); }  // elements
  uint64_t bytes() const { return info_.bytes(); }
  const std::string& device() const { return info_.device(); }
  std::chrono::milliseconds ttl() const { return std::chrono::milliseconds(info_.ttl_ms()); }
  // When the server drops it unless it is used again before.
  std::chrono::system_clock::time_point expires() const {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(info_.expires_unix_ms()));
  }
  const std::string& label() const { return info_.label(); }

  // Elements [offset, offset + count) (count unset: to the end) as raw little-endian bytes
  // (GetArray); RpcError OUT_OF_RANGE for a range past the end, NOT_FOUND once it is gone.
  std::string Get(uint64_t offset = 0, std::optional<uint64_t> count = std::nullopt) const;
  // The same as elements of T, which must be the array's dtype (std::invalid_argument otherwise).
  template <class T>
  std::vector<T> Get(uint64_t offset = 0, std::optional<uint64_t> count = std::nullopt) const;

  // Asks the server for the array's info now (its expiry moves with every use); returns it.
  const v1::ArrayInfo& Refresh();
  // Drops the array now (RpcError on failure, NOT_FOUND when it is gone already); returns its
  // last info. The RemoteArray is empty afterwards, whatever the outcome.
  v1::ArrayInfo Drop();
  // Gives the array up: it stays on the server (until dropped by id or expired) and this
  // RemoteArray is empty. Returns its info.
  v1::ArrayInfo release();

 private:
  void CheckHeld(const char* what) const;
  static void CheckDType(v1::DType want, v1::DType have);

  Client* client_ = nullptr;
  v1::ArrayInfo info_;
};

template <class T>
std::vector<T> RemoteArray::Get(uint64_t offset, std::optional<uint64_t> count) const {
  CheckDType(DTypeOf<T>(), dtype());
  const std::string raw = Get(offset, count);
  std::vector<T> out(raw.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace gpuscan
