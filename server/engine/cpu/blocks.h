// What every CPU engine family shares: the pool, the block layout of a chunk, the loop over
// blocks, and the fold of one block.
//
// Why not tbb::parallel_scan / parallel_reduce: how they associate the operation depends on
// which ranges got stolen, so float sums and products would change from run to run and with
// the thread count. Here the association depends only on the block layout, which depends only
// on the chunk's length, so the same input and chunking give bit-identical results on any
// number of threads (and a chunk run serially uses the very same blocks).
//
// Elements are read and written with memcpy (host::Load/Store): buffers come from protobuf
// strings and need not be aligned for T (memcpy of sizeof(T) bytes compiles to a plain load or
// store).
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "engine/cpu_engine.h"
#include "engine/host_scan.h"

namespace gpuscan::engine::cpu {

// Asking for more threads than the hardware has gains nothing (TBB would not start the extra
// workers anyway, and says so on stderr), so the request is capped there.
struct Pool {
  explicit Pool(int threads)
      : arena(threads > 0 ? std::min(threads, tbb::info::default_concurrency())
                          : tbb::task_arena::automatic) {
    arena.initialize();
  }
  tbb::task_arena arena;
};

using host::KernelTimer;
using host::Load;
using host::Store;

inline constexpr uint64_t kBlock = CpuEngine::kBlockElems;

// The block layout of one chunk of n elements.
struct Blocks {
  explicit Blocks(uint64_t n_) : n(n_), count((n_ + kBlock - 1) / kBlock) {}
  uint64_t begin(uint64_t b) const { return b * kBlock; }
  uint64_t end(uint64_t b) const { return std::min(n, (b + 1) * kBlock); }
  uint64_t n;
  uint64_t count;
};

// Runs f(b) for b in [0, count): on the pool when `parallel`, else in order on this thread.
// Either way each block's arithmetic is the same, so the results are too.
template <class F>
void ForBlocks(Pool& pool, uint64_t count, bool parallel, const F& f) {
  if (!parallel || count < 2) {
    for (uint64_t b = 0; b < count; ++b) f(b);
    return;
  }
  pool.arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<uint64_t>(0, count, 1),
        [&](const tbb::blocked_range<uint64_t>& r) {
          for (uint64_t b = r.begin(); b != r.end(); ++b) f(b);
        },
        tbb::simple_partitioner());
  });
}

inline bool RunParallel(const Pool& pool, uint64_t n) {
  return n >= CpuEngine::kParallelMinElems && pool.arena.max_concurrency() > 1;
}

inline void CheckBuffer(const void* p, uint64_t n, const char* what) {
  if (n != 0 && p == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, std::string("null ") + what + " buffer");
  }
}

// Whether Op may take its operands in either order (every ops:: operator); a segmented scan's
// pair operator (seg::SegOp) says it may not.
template <class Op, class = void>
struct Commutative : std::true_type {};
template <class Op>
struct Commutative<Op, std::void_t<decltype(Op::kCommutative)>> : std::bool_constant<Op::kCommutative> {};

// Folds elements [begin, end) from the identity. Eight interleaved accumulators break the
// dependency chain (floats add in ~4 cycles); their layout is fixed, so the result is too.
// They regroup the elements, which only a commutative operator allows.
template <class T, class Op>
T Fold(const unsigned char* in, uint64_t begin, uint64_t end) {
  constexpr int kLanes = 8;
  const Op op;
  if constexpr (!Commutative<Op>::value) {
    T total = Op::identity();
    for (uint64_t i = begin; i < end; ++i) total = op(total, Load<T>(in, i));
    return total;
  }
  T acc[kLanes];
  for (T& a : acc) a = Op::identity();
  uint64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    // One copy of the eight elements, then the folds: GCC 12's -O3 loop vectoriser miscompiled
    // eight Load()s at i + l here (integer sums wrong past one 16384-element block; the image's
    // Release build, tests/container). Same association, so the same bits.
    T v[kLanes];
    std::memcpy(v, in + i * sizeof(T), sizeof(v));
    for (int l = 0; l < kLanes; ++l) acc[l] = op(acc[l], v[l]);
  }
  T total = acc[0];
  for (int l = 1; l < kLanes; ++l) total = op(total, acc[l]);
  for (; i < end; ++i) total = op(total, Load<T>(in, i));
  return total;
}

}  // namespace gpuscan::engine::cpu
