// Shared plumbing of the kernel library: error checks, bit casts, shuffles, the temp-storage
// layout and the tile loads every agent uses. Private to kernels/src.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpuscan/kernels/operators.h"

// Returns the error of a failed CUDA call from the enclosing function.
#define GPUSCAN_TRY(expr)                    \
  do {                                       \
    const cudaError_t gpuscan_e_ = (expr);   \
    if (gpuscan_e_ != cudaSuccess) return gpuscan_e_; \
  } while (0)

// After every launch: a bad configuration shows here, not at some later synchronization.
#define GPUSCAN_CHECK_LAUNCH() GPUSCAN_TRY(cudaGetLastError())

namespace gpuscan::kernels::detail {

constexpr int kWarpThreads = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ constexpr uint64_t DivUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

template <class To, class From>
__host__ __device__ __forceinline__ To BitCast(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  To r;
  memcpy(&r, &v, sizeof(To));
  return r;
}

// Shuffles for any T of 4 bytes or a multiple of 8 (int64_t is `long`, which __shfl_*_sync has
// no overload for; a 16-byte pair such as seg::SegItem<int64_t> moves as two 8-byte words).
template <class T>
using ShflWord = std::conditional_t<sizeof(T) == 4, int, long long>;

template <class T>
struct ShflWords {
  static_assert(sizeof(T) == 4 || sizeof(T) % 8 == 0, "shuffles move 4-byte or 8-byte words");
  static constexpr int kCount = sizeof(T) == 4 ? 1 : int(sizeof(T) / 8);
  ShflWord<T> w[kCount];
};

// f(word) shuffles one word; applied to each word of v.
template <class T, class F>
__device__ __forceinline__ T ShflEach(T v, F f) {
  if constexpr (sizeof(T) <= 8) {
    return BitCast<T>(f(BitCast<ShflWord<T>>(v)));
  } else {
    auto words = BitCast<ShflWords<T>>(v);
#pragma unroll
    for (int i = 0; i < ShflWords<T>::kCount; ++i) words.w[i] = f(words.w[i]);
    return BitCast<T>(words);
  }
}

template <class T>
__device__ __forceinline__ T ShflUp(T v, unsigned delta) {
  return ShflEach(v, [delta](auto w) { return __shfl_up_sync(kFullMask, w, delta); });
}
template <class T>
__device__ __forceinline__ T ShflDown(T v, unsigned delta) {
  return ShflEach(v, [delta](auto w) { return __shfl_down_sync(kFullMask, w, delta); });
}
template <class T>
__device__ __forceinline__ T ShflIdx(T v, int src) {
  return ShflEach(v, [src](auto w) { return __shfl_sync(kFullMask, w, src); });
}

// ---------------------------------------------------------------------------------------------
// Temp storage layout (see temp_storage.h for the contract):
//   [slack up to 256-byte alignment][TempHeader, 256 bytes][body: tile states / partials / CUB]

struct TempHeader {
  // Single-pass kernels: bits 63..22 the epoch of the next launch, bits 21..0 the next tile
  // ticket. The block that draws the last ticket of a launch writes (epoch + 1, ticket 0).
  unsigned long long epoch_ticket;
  // Reduce: blocks finished so far (last-block-done); the last block puts it back to 0.
  unsigned int done;
  unsigned int pad0;
  // Carries between the segments of a call too long for one launch, and CUB's helpers.
  unsigned long long slot[8];
};
constexpr std::size_t kTempAlign = 256;
constexpr std::size_t kHeaderBytes = 256;
static_assert(sizeof(TempHeader) <= kHeaderBytes, "header grew");

constexpr int kTicketBits = 22;
constexpr unsigned long long kTicketMask = (1ull << kTicketBits) - 1;
constexpr unsigned long long kEpochMask = (1ull << (64 - kTicketBits)) - 1;
// Tiles one single-pass launch may have (tickets are 22 bits); longer calls are split into
// segments chained by their carry. At 4096 int32 per tile that is 2^34 elements per launch.
constexpr uint32_t kMaxTilesPerLaunch = 1u << kTicketBits;

// Bytes a call must ask for when its body needs body_bytes.
constexpr std::size_t TempBytesFor(std::size_t body_bytes) {
  return kTempAlign + kHeaderBytes + body_bytes;
}

struct TempView {
  TempHeader* header;
  unsigned char* body;
};

// Carves d_temp up; cudaErrorInvalidValue when it is smaller than body_bytes needs.
inline cudaError_t ViewTemp(void* d_temp, std::size_t temp_bytes, std::size_t body_bytes,
                            TempView& view) {
  const auto addr = reinterpret_cast<std::uintptr_t>(d_temp);
  const std::uintptr_t aligned = (addr + kTempAlign - 1) & ~(std::uintptr_t(kTempAlign) - 1);
  if (d_temp == nullptr || temp_bytes < (aligned - addr) + kHeaderBytes + body_bytes) {
    return cudaErrorInvalidValue;
  }
  view.header = reinterpret_cast<TempHeader*>(aligned);
  view.body = reinterpret_cast<unsigned char*>(aligned + kHeaderBytes);
  return cudaSuccess;
}

// Testing hook: lowers the tiles per single-pass launch so tests can exercise segmenting.
uint32_t MaxTilesPerLaunch();
// Testing hook: caps a persistent launch's blocks (0: no cap).
uint32_t MaxPersistentBlocks();
// Testing hook: the deterministic scan folds every carry by the walk back.
bool CanonicalCarryWalk();

// ---------------------------------------------------------------------------------------------
// Tile loads and stores. A thread owns kItems consecutive elements (blocked arrangement);
// full tiles at 16-byte aligned addresses move as 16-byte vectors.

template <class T, int kItems>
union ItemVec {
  static constexpr int kVecs = kItems * int(sizeof(T)) / 16;
  static_assert(kItems * sizeof(T) % 16 == 0, "items per thread must fill 16-byte vectors");
  uint4 vec[kVecs];
  T item[kItems];
};

__host__ __device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// Loads this thread's items of a tile: `src` points at the thread's first element, `valid` is
// how many of its kItems exist (the rest are `fill`). vec: full and aligned, use 16-byte loads.
template <class T, int kItems>
__device__ __forceinline__ void LoadItems(const T* src, int valid, bool vec, T fill, T (&items)[kItems]) {
  if (vec) {
    ItemVec<T, kItems> u;
    const uint4* p = reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (int v = 0; v < ItemVec<T, kItems>::kVecs; ++v) u.vec[v] = p[v];
#pragma unroll
    for (int i = 0; i < kItems; ++i) items[i] = u.item[i];
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) items[i] = i < valid ? src[i] : fill;
  }
}

template <class T, int kItems>
__device__ __forceinline__ void StoreItems(T* dst, int valid, bool vec, const T (&items)[kItems]) {
  if (vec) {
    ItemVec<T, kItems> u;
#pragma unroll
    for (int i = 0; i < kItems; ++i) u.item[i] = items[i];
    uint4* p = reinterpret_cast<uint4*>(dst);
#pragma unroll
    for (int v = 0; v < ItemVec<T, kItems>::kVecs; ++v) p[v] = u.vec[v];
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < valid) dst[i] = items[i];
    }
  }
}

// How many of a thread's kItems exist when the tile holds tile_valid elements.
__device__ __forceinline__ int ThreadValid(int tile_valid, int kItems) {
  const int first = int(threadIdx.x) * kItems;
  const int v = tile_valid - first;
  return v < 0 ? 0 : (v > kItems ? kItems : v);
}

// ---------------------------------------------------------------------------------------------
// Tiny kernels for the edges: n == 0, carries.

// *out = carry_in ? *carry_in : identity.
template <class T, class Op>
__global__ void CarryPassKernel(const T* carry_in, T* out) {
  *out = carry_in != nullptr ? *carry_in : Op::identity();
}

}  // namespace gpuscan::kernels::detail

// Every operator a dtype has: arithmetic for all, bitwise for integers.
#define GPUSCAN_FOR_ARITH_OPS(M, T) M(T, Sum) M(T, Product) M(T, Min) M(T, Max)
#define GPUSCAN_FOR_INT_OPS(M, T) GPUSCAN_FOR_ARITH_OPS(M, T) M(T, BitAnd) M(T, BitOr) M(T, BitXor)
