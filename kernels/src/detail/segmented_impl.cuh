// The fused segmented scan (segmented_scan.h): the single-pass look-back scan of (head, value)
// pairs with seg::SegOp, whose tiles read values and keys (or head bytes) and write values only.
// A segment head is formed as the pairs are read: an element whose key differs from the element
// before it. So a tile moves what CUB's by-key scan moves (keys and values in, values out) and
// the pairs never touch memory. The tiles run on the bulk look-back kernel
// (agent_single_pass_bulk.cuh, SegmentedTileIO below); TileKeys serves reduce by key's register
// tiles (reduce_by_key_impl.cuh). Included by the segmented_*.cu and reduce_by_key_*.cu files.
#pragma once

#include <algorithm>
#include <type_traits>

#include "gpuscan/kernels/segmented_scan.h"
#include "agent_single_pass.cuh"
#include "common.cuh"

namespace gpuscan::kernels::detail {

// A pair of 8-byte values fills the tile word's 8 value bytes: its head bit rides in the status
// (tile_state.cuh), above the flag.
template <class T>
struct TileCodec<seg::SegItem<T, true>> {
  using Item = seg::SegItem<T, true>;
  static constexpr int kShift = 3;
  __device__ __forceinline__ static unsigned long long Bits(Item v) { return ToBits(v.value); }
  __device__ __forceinline__ static unsigned long long Extra(Item v) { return v.head ? 4ull : 0ull; }
  __device__ __forceinline__ static Item Decode(unsigned long long bits, unsigned long long status) {
    return seg::MakeItem<T>(FromBits<T>(bits), uint32_t(status >> 2) & 1u);
  }
};

// kCount consecutive K at p, read with the widest aligned loads their bytes allow (a run of a
// striped row: kCount * sizeof(K) bytes at an offset that is a multiple of that).
template <class K, int kCount>
__device__ __forceinline__ void LoadRun(const K* p, K* dst) {
  constexpr int kBytes = kCount * int(sizeof(K));
  using Word = std::conditional_t<kBytes >= 16, uint4,
                                  std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, uint32_t, uint16_t>>>;
  constexpr int kWords = kBytes >= 16 ? kBytes / 16 : 1;
  static_assert(kWords * sizeof(Word) == kBytes, "a run fills whole words");
  union {
    Word w[kWords];
    K k[kCount];
  } u;
  const Word* q = reinterpret_cast<const Word*>(p);
#pragma unroll
  for (int i = 0; i < kWords; ++i) u.w[i] = q[i];
#pragma unroll
  for (int i = 0; i < kCount; ++i) dst[i] = u.k[i];
}

// A tile's keys in the striped layout of its values of T, and which elements open or close a
// segment. Element i = r * kVecElems + j of a thread sits at tile offset First() + r * kRowStride + j
// (striped.cuh). K: uint32_t / uint64_t (a key's bits) or uint8_t (head flags).
template <class T, class K, int kItems>
struct TileKeys {
  using Layout = StripedLayout<T, kItems>;
  static constexpr int kVecs = Layout::kVecs, kVecElems = Layout::kVecElems;
  static_assert(kItems <= 32, "segment bits fit one word per thread");
  K k[kItems];

  __device__ __forceinline__ static int Offset(int i) {
    return Layout::First() + (i / kVecElems) * Layout::kRowStride + i % kVecElems;
  }

  // tile_keys: the tile's first key. Padding past tile_valid reads as K{}.
  __device__ __forceinline__ void Load(const K* tile_keys, int tile_valid, bool vec) {
    const int first = Layout::First();
#pragma unroll
    for (int r = 0; r < kVecs; ++r) {
      if (vec) {
        LoadRun<K, kVecElems>(tile_keys + first + r * Layout::kRowStride, k + r * kVecElems);
      } else {
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) {
          const int idx = first + r * Layout::kRowStride + j;
          k[r * kVecElems + j] = idx < tile_valid ? tile_keys[idx] : K{};
        }
      }
    }
  }

  // Bit i: element i opens a segment (its key differs from the one before it, or its head byte is
  // nonzero). before(found): the key before this thread's first element, asked of lane 0 only
  // (the lane before's last key serves the others); found false: it has none, so it opens one.
  template <class Before>
  __device__ __forceinline__ uint32_t Heads(int tile_valid, Before before_first) const {
    const int lane = LaneId();
    const bool full = tile_valid == kWarpThreads * kItems * int(blockDim.x / kWarpThreads);
    uint32_t bits = 0;
#pragma unroll
    for (int r = 0; r < kVecs; ++r) {
      K before{};
      bool has_before = true;
      if constexpr (!std::is_same_v<K, uint8_t>) {
        before = ShflUp(k[r * kVecElems + kVecElems - 1], 1);
        if (r > 0) {
          const K wrap = ShflIdx(k[(r - 1) * kVecElems + kVecElems - 1], kWarpThreads - 1);
          if (lane == 0) before = wrap;
        } else if (lane == 0 && Layout::First() < tile_valid) {  // a warp past the tile's end has no heads
          has_before = before_first(before);
        }
      } else if (r == 0 && lane == 0) {
        has_before = before_first(before);
      }
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) {
        const int i = r * kVecElems + j;
        bool head;
        if constexpr (std::is_same_v<K, uint8_t>) {
          head = k[i] != 0;
        } else {
          head = k[i] != (j == 0 ? before : k[i - 1]);
        }
        if (j == 0 && !has_before) head = true;                    // the array's first element
        if (!full && Offset(i) >= tile_valid) head = false;        // padding: the identity, no restart
        bits |= uint32_t(head) << i;
      }
    }
    return bits;
  }

  // Bits at each row's first / last element.
  __host__ __device__ static constexpr uint32_t RowBits(int j) {
    uint32_t m = 0;
    for (int r = 0; r < kVecs; ++r) m |= 1u << (r * kVecElems + j);
    return m;
  }

  // Ends in a full tile that does not end the call (the common case): element i closes its
  // segment exactly when element i + 1 opens one, so the ends are the heads moved down by one,
  // within a row from this thread's own bits, at a row's end from the next lane's (lane 31: lane
  // 0's next row; for its last row, last_differs: the key after the warp differs from its last).
  __device__ __forceinline__ static uint32_t EndsOfFullTile(uint32_t heads, bool last_differs) {
    constexpr uint32_t kRowFirst = RowBits(0), kRowLast = RowBits(kVecElems - 1);
    const int lane = LaneId();
    const uint32_t next_lane = ShflDown(heads, 1), lane0 = ShflIdx(heads, 0);
    uint32_t row_ends = lane < kWarpThreads - 1 ? next_lane & kRowFirst : (lane0 >> kVecElems) & kRowFirst;
    if (lane == kWarpThreads - 1 && last_differs) row_ends |= 1u << ((kVecs - 1) * kVecElems);
    return ((heads >> 1) & ~kRowLast) | (row_ends << (kVecElems - 1));
  }

  // Bit i: element i closes its segment: the element after it has another key, or it is the
  // call's last and last_closes. call_end: this tile holds the call's last element (at
  // tile_valid - 1). after(key): the key after this thread's last element in the call, asked of
  // lane 31's last row (the next warp's or tile's first key); false: there is none.
  template <class After>
  __device__ __forceinline__ uint32_t Ends(int tile_valid, bool call_end, bool last_closes, After after_last) const {
    static_assert(!std::is_same_v<K, uint8_t>, "ends come from keys");
    const int lane = LaneId();
    uint32_t bits = 0;
#pragma unroll
    for (int r = 0; r < kVecs; ++r) {
      K after = ShflDown(k[r * kVecElems], 1);
      bool has_after = true;
      if (r + 1 < kVecs) {
        const K wrap = ShflIdx(k[(r + 1) * kVecElems], 0);
        if (lane == kWarpThreads - 1) after = wrap;
      } else if (lane == kWarpThreads - 1) {
        has_after = after_last(after);
      }
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) {
        const int i = r * kVecElems + j;
        const bool differs = j + 1 < kVecElems ? k[i] != k[i + 1] : (has_after && k[i] != after);
        const int off = Offset(i);
        const bool end = off + 1 < tile_valid || (off + 1 == tile_valid && !call_end) ? differs
                         : off + 1 == tile_valid                                     ? last_closes
                                                                                     : false;  // padding
        bits |= uint32_t(end) << i;
      }
    }
    return bits;
  }
};

// Tiles of a segmented scan (SinglePassScanBulkKernel's IO, agent_single_pass_bulk.cuh): values
// of T and keys of K (uint32_t / uint64_t: a key's bits; uint8_t: head flags) land in shared
// memory side by side, by bulk copies; values go out (out may alias values). An element opens a
// segment when its key differs from the one before it, read next to it in shared memory (a
// lane's first from the lane before, lane 0's from shared memory, the tile's first from Before).
template <class T, class Op, class K, int kItems, int kTile>
struct SegmentedTileIO {
  using Item = seg::SegItem<T>;
  using Layout = StripedLayout<T, kItems>;
  using Carry = SegmentCarry<T>;
  static constexpr bool kHeads = std::is_same_v<K, uint8_t>;
  static constexpr int kVecElems = Layout::kVecElems, kThreads = kTile / kItems;
  static constexpr uint32_t kValueBytes = uint32_t(kTile) * sizeof(T);
  static constexpr uint32_t kLoadBytes = kValueBytes + uint32_t(kTile) * sizeof(K);
  static_assert(kTile * sizeof(K) % 16 == 0, "a tile's keys are whole bulk-copy units");
  struct Shared {
    alignas(128) T values[kTile];
    alignas(128) K keys[kTile];
    K key_before;     // the key before the tile's first element (keys mode)
    bool has_before;  // false: nothing before the tile, its first element opens a segment
  };

  const T* values;
  const K* keys;
  T* out;
  bool key_before;        // keys[-1] belongs to the call (a later launch of a long call)
  const Carry* carry_in;  // what came before the call (null: nothing)

  __device__ __forceinline__ bool Bulk(uint64_t base) const {
    return Aligned16(values + base) && Aligned16(out + base) && Aligned16(keys + base);
  }
  __device__ __forceinline__ void PrefetchL2(uint64_t base, int count) const {
    detail::PrefetchL2(values + base, uint32_t(count) * sizeof(T));
    detail::PrefetchL2(keys + base, uint32_t(count) * sizeof(K));
  }
  __device__ __forceinline__ void LoadBulk(Shared& s, uint64_t base, uint64_t* bar) const {
#if __CUDA_ARCH__ >= 900
    cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, s.values, values + base, uint32_t{kValueBytes},
                             bar);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, s.keys, keys + base,
                             uint32_t(kTile) * uint32_t(sizeof(K)), bar);
#endif
  }
  // Whether element i (of the launch) has an element before it in the array, and its key.
  __device__ __forceinline__ void Before(Shared& s, uint64_t i) const {
    K key{};
    bool has = true;
    if (i > 0 || key_before) {
      if constexpr (!kHeads) key = keys[int64_t(i) - 1];
    } else if (carry_in != nullptr && carry_in->started) {
      key = K(carry_in->last_key);
    } else {
      has = false;
    }
    s.key_before = key;
    s.has_before = has;
  }
  __device__ __forceinline__ void LoadElements(Shared& s, uint64_t base, int valid) const {
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      s.values[i] = i < valid ? values[base + i] : Op::identity();
      s.keys[i] = i < valid ? keys[base + i] : K{};
    }
  }
  __device__ __forceinline__ void Read(const Shared& s, int v, int valid, Item (&x)[kVecElems]) const {
    const int o = Layout::First() + v * Layout::kRowStride;
    ItemVec<T, kVecElems> w;
    w.vec[0] = *reinterpret_cast<const uint4*>(s.values + o);
    K k[kVecElems];
    LoadRun<K, kVecElems>(s.keys + o, k);
    bool head[kVecElems];
    if constexpr (kHeads) {
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) head[j] = k[j] != 0;
    } else {
      K before = ShflUp(k[kVecElems - 1], 1);
      if (LaneId() == 0) before = o == 0 ? s.key_before : s.keys[o - 1];
      head[0] = k[0] != before;
#pragma unroll
      for (int j = 1; j < kVecElems; ++j) head[j] = k[j] != k[j - 1];
    }
    if (o == 0 && !s.has_before) head[0] = true;  // the array's first element
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) {
      if (valid < kTile && o + j >= valid) head[j] = false;  // padding: the identity, no restart
      x[j] = seg::MakeItem<T>(w.item[j], head[j]);
    }
  }
  __device__ __forceinline__ void Write(Shared& s, int v, const Item (&x)[kVecElems]) const {
    ItemVec<T, kVecElems> w;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) w.item[j] = x[j].value;
    *SharedVec<Layout>(s.values, v) = w.vec[0];
  }
  __device__ __forceinline__ void StoreBulk(Shared& s, uint64_t base) const { StoreTileBulk<kTile>(out + base, s.values); }
  __device__ __forceinline__ void StoreElements(Shared& s, uint64_t base, int valid) const {
    StoreTileElements<kThreads>(out + base, s.values, valid);
  }

  // Exclusive: the identity at a segment's first element, else the inclusive value before.
  __device__ __forceinline__ static Item ExclusiveOut(Item run, const Item& x) {
    return seg::MakeItem<T>(x.head ? Op::identity() : run.value, 0);
  }
  __device__ __forceinline__ static Item CarryItem(const Carry& c) { return c.item; }
  __device__ __forceinline__ void WriteCarry(Carry* c, Item value, uint64_t n) const {
    c->item = value;
    c->last_key = kHeads ? 0 : uint64_t(keys[n - 1]);
    c->started = 1;
  }
};

// n == 0: the carry passes through (or says nothing came yet).
template <class T, class Op>
__global__ void SegmentCarryPassKernel(const SegmentCarry<T>* in, SegmentCarry<T>* out) {
  if (in != nullptr) {
    *out = *in;
  } else {
    out->item = seg::SegOp<T, Op>::identity();
    out->last_key = 0;
    out->started = 0;
  }
}

template <class T, class Op, class K, class Policy>
cudaError_t SegmentedScanImpl(void* d_temp, std::size_t& temp_bytes, const T* values, const K* keys, T* out,
                              uint64_t n, bool exclusive, const SegmentCarry<T>* carry_in,
                              SegmentCarry<T>* carry_out, cudaStream_t stream) {
  using IO = SegmentedTileIO<T, Op, K, Policy::kItems, Policy::kTile>;
  const std::size_t body = SinglePassBody<Policy>(n);
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return cudaSuccess;
  }
  if (n > 0 && (values == nullptr || keys == nullptr || out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) {
    if (carry_out == nullptr || carry_out == carry_in) return cudaSuccess;
    SegmentCarryPassKernel<T, Op><<<1, 1, 0, stream>>>(carry_in, carry_out);
    GPUSCAN_CHECK_LAUNCH();
    return cudaSuccess;
  }
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, body, view));
  return LaunchSinglePass<seg::SegItem<T>, seg::SegOp<T, Op>, Policy, false, IO, true>(
      view, n, exclusive, carry_in, carry_out, stream, [&](uint64_t off, const SegmentCarry<T>* cin) {
        return IO{values + off, keys + off, out + off, off > 0, cin};
      });
}

}  // namespace gpuscan::kernels::detail

namespace gpuscan::kernels {

template <class T, class Op, class K>
cudaError_t SegmentedScan(void* d_temp, std::size_t& temp_bytes, const T* d_values, const K* d_keys, T* d_out,
                          uint64_t n, bool exclusive, const SegmentCarry<T>* d_carry_in,
                          SegmentCarry<T>* d_carry_out, cudaStream_t stream) {
  using Policy = detail::SegmentedTuning<detail::kTunedArch, sizeof(T), sizeof(K)>;
  return detail::SegmentedScanImpl<T, Op, K, Policy>(d_temp, temp_bytes, d_values, d_keys, d_out, n, exclusive,
                                                     d_carry_in, d_carry_out, stream);
}

}  // namespace gpuscan::kernels

// One (T, Op) with each kind of key.
#define GPUSCAN_INSTANTIATE_SEGMENTED_K(T, OP, K)                                                 \
  template cudaError_t gpuscan::kernels::SegmentedScan<T, gpuscan::ops::OP<T>, K>(                \
      void*, std::size_t&, const T*, const K*, T*, uint64_t, bool,                                \
      const gpuscan::kernels::SegmentCarry<T>*, gpuscan::kernels::SegmentCarry<T>*, cudaStream_t);
#define GPUSCAN_INSTANTIATE_SEGMENTED(T, OP)        \
  GPUSCAN_INSTANTIATE_SEGMENTED_K(T, OP, uint32_t)  \
  GPUSCAN_INSTANTIATE_SEGMENTED_K(T, OP, uint64_t)  \
  GPUSCAN_INSTANTIATE_SEGMENTED_K(T, OP, uint8_t)
