// The canonical tree's tile in shared memory and its block loads and stores: 256 segments of 16
// items, one a thread (canonical_tree.h). Shared by the one-pass scan (agent_canonical.cuh), the
// reduction's kernels (agent_canonical_reduce.cuh) and the widening scan's tail.
#pragma once

#include <cuda_pipeline.h>

#include <type_traits>

#include "common.cuh"
#include "gpuscan/kernels/scan_widen.h"

namespace gpuscan::kernels::detail::canonical {

constexpr int kThreads = 256;  // = segments per tile = tiles per super
constexpr int kItems = 16;     // = items per segment
constexpr int kTile = kThreads * kItems;

// How a tile sits in shared memory. Thread t folds its segment (items 16t..16t+15); loads and
// stores to global memory are striped (item r * kThreads + t is thread t's r-th).
//  - 4-byte types: 16-byte vectors, eight to a 128-byte row (all 32 banks), each row's vectors
//    XOR-swizzled by its row number (its low two bits). A segment is read and written as 4
//    vectors, and the 8 threads of one 128-bit access phase (a quarter-warp) touch 8 different
//    bank groups; so do the striped 16-byte copies to and from global memory. The padded layout
//    before took 16 scalar accesses a segment (float32 +2.6 points of copy on the H200).
//    2-byte inputs (the widening scan's float16, scan_widen.h) take the same layout, eight items
//    a vector: a segment is two vectors, and the swizzle keeps a quarter-warp's on 8 bank groups.
//  - 8-byte types: one padding item per 16 (a half-warp's 64-bit accesses then fall on 16
//    different bank pairs), items one at a time: the vector layout ran float64 4 points slower
//    on the H200 (bench/NOTES.md, 2026-11-26).
template <class T>
constexpr bool kVectorTile = sizeof(T) == 4 || sizeof(T) == 2;
template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // items a vector
constexpr int kPadEvery = 16;                              // 8-byte types: a padding item per 16
template <class T>
constexpr int kSmemItems = kVectorTile<T> ? kTile : kTile + kTile / kPadEvery;

template <class T>
struct alignas(16) Vec {
  T v[kVec<T>];
};

// Where vector k of a 4-byte tile sits (in vectors).
__device__ __forceinline__ int VecSlot(int k) { return k ^ ((k >> 3) & 3); }
// Where item i of a tile sits (in items).
template <class T>
__device__ __forceinline__ int ItemSlot(int i) {
  if constexpr (kVectorTile<T>) {
    return VecSlot(i / kVec<T>) * kVec<T> + i % kVec<T>;
  } else {
    return i + static_cast<int>(static_cast<unsigned>(i) / kPadEvery);
  }
}
// Where thread tid's r-th striped item (r * kThreads + tid) sits. The swizzle repeats every
// 8 * 16 items, so for vector tiles it is r * kThreads after the first (one address to keep,
// not 16); padded tiles keep the addressing their timed code had.
template <class T>
__device__ __forceinline__ int StripeSlot(int tid, int r) {
  static_assert(kThreads % (8 * kItems) == 0, "a stripe of kThreads items is whole swizzle periods");
  if constexpr (kVectorTile<T>) {
    return ItemSlot<T>(tid) + r * kThreads;
  } else {
    return ItemSlot<T>(r * kThreads + tid);
  }
}
template <class T>
__device__ __forceinline__ Vec<T>& VecAt(T* items, int k) {
  return *reinterpret_cast<Vec<T>*>(items + VecSlot(k) * kVec<T>);
}
template <class T>
__device__ __forceinline__ const Vec<T>& VecAt(const T* items, int k) {
  return *reinterpret_cast<const Vec<T>*>(items + VecSlot(k) * kVec<T>);
}

// 16-byte aligned for vector tiles only (an alignment that other types' code could exploit
// would change their machine code for nothing).
template <class T>
constexpr std::size_t kSmemAlign = kVectorTile<T> ? 16 : alignof(T);

template <class T>
struct alignas(kSmemAlign<T>) TileSmem {
  T items[kSmemItems<T>];
  T hs[2][kThreads];
};

// This thread's segment out of a tile in shared memory, and back.
template <class T>
__device__ __forceinline__ void ReadSegment(const T* items, T (&x)[kItems]) {
  if constexpr (kVectorTile<T>) {
#pragma unroll
    for (int v = 0; v < kItems / kVec<T>; ++v) {
      const Vec<T> q = VecAt(items, threadIdx.x * (kItems / kVec<T>) + v);
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) x[v * kVec<T> + k] = q.v[k];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) x[i] = items[ItemSlot<T>(threadIdx.x * kItems + i)];
  }
}
template <class T>
__device__ __forceinline__ void WriteSegment(T* items, const T (&y)[kItems]) {
  if constexpr (kVectorTile<T>) {
#pragma unroll
    for (int v = 0; v < kItems / kVec<T>; ++v) {
      Vec<T> q;
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) q.v[k] = y[v * kVec<T> + k];
      VecAt(items, threadIdx.x * (kItems / kVec<T>) + v) = q;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) items[ItemSlot<T>(threadIdx.x * kItems + i)] = y[i];
  }
}

// Striped (coalesced) loads, 16 bytes each for 4-byte types where `in` allows, then each thread
// takes its segment's 16 consecutive items.
template <class T>
__device__ __forceinline__ void LoadSegment(const T* in, T (&x)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
  if (kVectorTile<T> && Aligned16(in)) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      VecAt(sm.items, k) = reinterpret_cast<const Vec<T>*>(in)[k];
    }
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) sm.items[StripeSlot<T>(tid, r)] = in[r * kThreads + tid];
  }
  __syncthreads();
  ReadSegment(sm.items, x);
}

// ReadSegment of a tile of In, converted to T (Widen, scan_widen.h).
template <class T, class In>
__device__ __forceinline__ void ReadSegmentAs(const In* items, T (&x)[kItems]) {
  if constexpr (std::is_same_v<In, T>) {
    ReadSegment(items, x);
  } else {
    In raw[kItems];
    ReadSegment(items, raw);
#pragma unroll
    for (int i = 0; i < kItems; ++i) x[i] = Widen<In, T>::Convert(raw[i]);
  }
}

// Starts the copy of tile t's elements into items (striped: 16 bytes a copy when `vec`, the
// input being 16-byte aligned, for 4-byte types; else an item a copy).
template <class T>
__device__ __forceinline__ void IssueTileLoad(const T* in, uint32_t t, T* items, bool vec) {
  const int tid = threadIdx.x;
  const T* src = in + static_cast<uint64_t>(t) * kTile;
  if (kVectorTile<T> && vec) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      __pipeline_memcpy_async(&VecAt(items, k), src + k * kVec<T>, sizeof(Vec<T>));
    }
  } else if constexpr (sizeof(T) < 4) {  // cp.async copies 4, 8 or 16 bytes: plain loads
#pragma unroll
    for (int r = 0; r < kItems; ++r) items[StripeSlot<T>(tid, r)] = src[r * kThreads + tid];
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) {
      __pipeline_memcpy_async(&items[StripeSlot<T>(tid, r)], &src[r * kThreads + tid], sizeof(T));
    }
  }
}

// Stores a scanned tile from shared memory (striped, as IssueTileLoad).
template <class T>
__device__ __forceinline__ void StoreTile(const T* items, T* dst, bool vec) {
  const int tid = threadIdx.x;
  if (kVectorTile<T> && vec) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      reinterpret_cast<Vec<T>*>(dst)[k] = VecAt(items, k);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) dst[r * kThreads + tid] = items[StripeSlot<T>(tid, r)];
  }
}

}  // namespace gpuscan::kernels::detail::canonical
