#include "service/resident_feed.h"

#include <algorithm>

#include "service/status.h"

namespace gpuscan::server {

grpc::Status ResidentFeed::Each(const std::function<bool()>& cancelled, const Chunk& f) {
  const ResidentArray& values = *call_.values;
  const ResidentArray* second = call_.keys ? call_.keys.get() : call_.flags.get();
  const size_t size = WireDTypeSize(values.dtype);
  const size_t second_size = second ? WireDTypeSize(second->dtype) : 0;
  // Cut where a stream of chunk_bytes requests would be cut: at most that much of either input.
  const uint64_t step = std::max<uint64_t>(1, chunk_bytes_ / std::max(size, second_size));
  for (uint64_t first = 0; first < values.count; first += step) {
    if (cancelled && cancelled()) return {grpc::StatusCode::CANCELLED, "the call was cancelled"};
    const uint64_t n = std::min(step, values.count - first);
    Payload v = payloads_.Take(n * size);
    values.memory->Read(first * size, v.data(), n * size);
    Payload s;
    if (second) {
      s = payloads_.Take(n * second_size);
      second->memory->Read(first * second_size, s.data(), n * second_size);
    }
    f(std::move(v), std::move(s));
  }
  return grpc::Status::OK;
}

grpc::Status ResidentFeed::OpenResult(uint64_t bytes, bool exact) {
  exact_ = exact;
  written_ = 0;
  if (exact) return store_.Allocate(call_.tenant, bytes, &result_, call_.values->memory.get());
  try {  // scratch outside the budget, as ResidentOutput's; Keep takes what was written from it
    result_ = call_.values->memory->engine->AllocateResident(std::max<uint64_t>(bytes, 1));
  } catch (const engine::Error& e) {
    return ToStatus(e);
  }
  return grpc::Status::OK;
}

void ResidentFeed::Append(const void* data, uint64_t bytes) {
  if (bytes == 0) return;
  result_->Write(written_, data, bytes);
  written_ += bytes;
}

grpc::Status ResidentFeed::Keep(int dtype, v1::ArrayInfo* info) {
  std::shared_ptr<engine::ResidentMemory> memory = result_;
  if (!exact_) {
    if (auto s = store_.Allocate(call_.tenant, written_, &memory, call_.values->memory.get()); !s.ok()) return s;
    if (written_ > 0) result_->CopyTo(0, *memory, 0, written_);
  }
  result_.reset();  // scratch goes now
  *info = store_.Add(call_.tenant, dtype, written_ / WireDTypeSize(dtype), std::move(memory), call_.ttl_ms,
                     call_.label);
  return grpc::Status::OK;
}

}  // namespace gpuscan::server

