#include "service/resident_narrow.h"

#include <algorithm>
#include <vector>

namespace gpuscan::server {
namespace {

// Elements a host piece holds: chunk_bytes of the widest side, at least one.
uint64_t NarrowPieceElements(uint64_t chunk_bytes, size_t widest) { return std::max<uint64_t>(1, chunk_bytes / widest); }

}  // namespace

grpc::Status WidenResident(ResidentStore& store, const std::string& tenant, const engine::ResidentMemory& src,
                           const NarrowInput& narrow, engine::DType engine, uint64_t count, uint64_t chunk_bytes,
                           std::shared_ptr<engine::ResidentMemory>* out) {
  const size_t wide = engine::SizeOf(engine);
  if (auto s = store.Allocate(tenant, std::max<uint64_t>(count * wide, 1), out, &src); !s.ok()) return s;
  const uint64_t step = NarrowPieceElements(chunk_bytes, wide);
  std::vector<std::byte> in(std::min(step, count) * narrow.size), widened(std::min(step, count) * wide);
  for (uint64_t first = 0; first < count; first += step) {
    const uint64_t n = std::min(step, count - first);
    src.Read(first * narrow.size, in.data(), n * narrow.size);
    Widen(narrow, engine, in.data(), widened.data(), n);
    (*out)->Write(first * wide, widened.data(), n * wide);
  }
  return grpc::Status::OK;
}

void ReadNarrowed(const engine::ResidentMemory& src, const NarrowInput& narrow, engine::DType engine, uint64_t first,
                  uint64_t n, void* out) {
  if (n == 0) return;
  const size_t wide = engine::SizeOf(engine);
  std::vector<std::byte> buf(n * wide);
  src.Read(first * wide, buf.data(), n * wide);
  if (narrow.half_out) {
    RoundToHalf(buf.data(), out, n);
  } else {
    NarrowBack(narrow, engine, buf.data(), out, n);
  }
}

void NarrowInto(const engine::ResidentMemory& src, const NarrowInput& narrow, engine::DType engine, uint64_t count,
                engine::ResidentMemory& dst, uint64_t chunk_bytes) {
  const uint64_t step = NarrowPieceElements(chunk_bytes, engine::SizeOf(engine));
  std::vector<std::byte> piece(std::min(step, count) * narrow.size);
  for (uint64_t first = 0; first < count; first += step) {
    const uint64_t n = std::min(step, count - first);
    ReadNarrowed(src, narrow, engine, first, n, piece.data());
    dst.Write(first * narrow.size, piece.data(), n * narrow.size);
  }
}

}  // namespace gpuscan::server
