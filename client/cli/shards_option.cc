// The CLI's sharded calls (shards_option.h): whole input in memory, the typed API per dtype.
#include "shards_option.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace gpuscan::cli {
namespace {

// The whole of `in`, read in 4 MiB pieces into storage aligned for any element type.
struct WholeInput {
  std::vector<uint64_t> words;
  size_t bytes = 0;
  const void* data() const { return words.data(); }
};

WholeInput ReadAll(ArrayInput& in) {
  constexpr size_t kPiece = size_t{4} << 20;
  WholeInput w;
  // Known sizes get one allocation (a piece of slack for the read that finds the end).
  w.words.resize((in.payload_bytes().value_or(3 * kPiece) + kPiece) / 8);
  for (;;) {
    if (w.words.size() * 8 - w.bytes < kPiece) w.words.resize(w.words.size() * 2 + kPiece / 8);
    const size_t got = in.Read(reinterpret_cast<char*>(w.words.data()) + w.bytes, kPiece);
    if (got == 0) break;
    w.bytes += got;
  }
  if (in.element_size() && w.bytes % in.element_size() != 0) {
    throw std::runtime_error(in.name() + " ends with a partial element (" + std::to_string(w.bytes) + " bytes)");
  }
  return w;
}

// Hands `bytes` to the Sink in pieces (text outputs format as they go).
void Emit(const Sink& sink, const void* data, size_t bytes) {
  constexpr size_t kPiece = size_t{4} << 20;
  for (size_t at = 0; at < bytes; at += kPiece) {
    sink(static_cast<const char*>(data) + at, std::min(kPiece, bytes - at));
  }
}

}  // namespace

Timing ShardedScan(Client& client, const v1::ScanHeader& header, ArrayInput& in, const Sink& out, uint32_t lanes,
                   uint32_t shards) {
  const WholeInput x = ReadAll(in);
  return WithElementType(header.dtype(), [&](auto t) {
    using T = decltype(t);
    ScanOptions o;
    o.op = header.op();
    o.exclusive = header.kind() == v1::SCAN_KIND_EXCLUSIVE;
    o.algorithm = header.algorithm();
    o.lanes = lanes;
    o.shards = shards;
    // Left uninitialized: the shards' threads fault its pages in as their results land.
    const size_t n = x.bytes / sizeof(T);
    std::unique_ptr<T[]> result(new T[n]);
    const Timing timing = client.ScanInto(static_cast<const T*>(x.data()), n, result.get(), o);
    Emit(out, result.get(), n * sizeof(T));
    return timing;
  });
}

ShardedReduceResult ShardedReduce(Client& client, const v1::ReduceHeader& header, ArrayInput& in, uint32_t lanes,
                                  uint32_t shards) {
  const WholeInput x = ReadAll(in);
  return WithElementType(header.dtype(), [&](auto t) {
    using T = decltype(t);
    const ReduceResult<T> r = client.Reduce(static_cast<const T*>(x.data()), x.bytes / sizeof(T), header.op(), lanes, shards);
    ShardedReduceResult out;
    out.raw_value.assign(reinterpret_cast<const char*>(&r.value), sizeof(T));
    out.element_count = r.element_count;
    out.timing = r.timing;
    return out;
  });
}

ShardedCompactResult ShardedCompact(Client& client, const v1::CompactHeader& header, ArrayInput& in,
                                    ArrayInput* flags, const Sink& values, const Sink& indices, uint32_t lanes,
                                    uint32_t shards) {
  const WholeInput x = ReadAll(in);
  CompactOptions o;
  if (flags) {
    const WholeInput f = ReadAll(*flags);
    const auto* p = static_cast<const uint8_t*>(f.data());
    o.flags.assign(p, p + f.bytes);
    o.use_flags = true;
  } else {
    o.predicate = header.predicate();
  }
  o.output = header.output();
  o.lanes = lanes;
  o.shards = shards;
  return WithElementType(header.dtype(), [&](auto t) {
    using T = decltype(t);
    const CompactResult<T> r = client.Compact(static_cast<const T*>(x.data()), x.bytes / sizeof(T), o);
    if (values) Emit(values, r.values.data(), r.values.size() * sizeof(T));
    if (indices) Emit(indices, r.indices.data(), r.indices.size() * sizeof(int64_t));
    ShardedCompactResult out;
    out.kept_count = r.kept_count;
    out.element_count = x.bytes / sizeof(T);
    out.timing = r.timing;
    return out;
  });
}

}  // namespace gpuscan::cli
