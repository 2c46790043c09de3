// The fused reduce by key (reduce_by_key.h): segmented_impl.cuh's keys (TileKeys) on the register
// look-back kernel (agent_single_pass.cuh), whose pairs also count the runs that open, so a
// closing element knows its run's output index from the scan: within a call, element e closes
// its run exactly when element e + 1 opens one, so the runs closed before element i are the
// heads at 1..i. The call's prefix counts 1 where its first element continues
// the carried run (0 where it opens one), so the count at i is always 1 + the heads at 1..i.
// Included by the reduce_by_key_*.cu files only.
#pragma once

#include "gpuscan/kernels/reduce_by_key.h"
#include "segmented_impl.cuh"

namespace gpuscan::kernels::detail {

// A value with `bits`: how many runs open up to here (an element's own: 1 at a head). A
// combination restarts the value when its right side opened a run. 8 bytes for 4-byte values:
// one look-back word. (Counting heads instead of flagging them makes the count free: one add
// where a flag and a count of closed runs took five operations, and the kernel is ALU-bound.)
template <class T>
struct RunItem {
  T value;
  uint32_t bits;
};

template <class T, class Op>
struct RunOp {
  using Item = RunItem<T>;
  static_assert(sizeof(T) == 4, "a run item fills the 8 value bytes of a tile word");
  __host__ __device__ __forceinline__ static Item identity() { return {Op::identity(), 0u}; }
  __host__ __device__ __forceinline__ Item operator()(const Item& a, const Item& b) const {
    return {b.bits != 0 ? b.value : Op()(a.value, b.value), a.bits + b.bits};
  }
};

template <class T, class Op, class K, int kItems>
struct ReduceByKeyTileIO {
  using Item = RunItem<T>;
  using Layout = StripedLayout<T, kItems>;
  using Keys = TileKeys<T, K, kItems>;
  using Carry = RunCarry<T>;

  const T* values;
  const K* keys;
  K* keys_out;
  T* values_out;
  uint64_t n;             // the call's elements (one launch)
  bool close;             // the call's last element closes its run
  const Carry* carry_in;  // null: the array starts here
  uint32_t ends = 0;      // bit i: this thread's element i closes its run (set by Load)

  __device__ __forceinline__ bool Vector(int tile_valid, int tile) const {
    return tile_valid == tile && Aligned16(values) && Aligned16(keys);
  }

  __device__ __forceinline__ void PrefetchL2(uint64_t base, int count) const {
    detail::PrefetchL2(values + base, uint32_t(count) * sizeof(T));
    detail::PrefetchL2(keys + base, uint32_t(count) * sizeof(K));
  }

  __device__ __forceinline__ void Load(uint64_t base, int tile_valid, bool vec, Item (&items)[kItems]) {
    // The keys before lane 0's first element and after lane 31's last are read with the tile
    // (segmented_impl.cuh says why).
    const int lane = LaneId();
    const uint64_t first = base + Layout::First(), next = base + Keys::Offset(kItems - 1) + 1;
    K before{}, after{};
    bool has_before = true, has_after = false;
    if (lane == 0 && Layout::First() < tile_valid) {
      if (first > 0) {
        before = keys[first - 1];
      } else if (carry_in != nullptr && carry_in->started) {
        before = K(carry_in->last_key);
      } else {
        has_before = false;
      }
    }
    if (lane == kWarpThreads - 1 && next < n) {
      after = keys[next];
      has_after = true;
    }
    T v[kItems];
    Layout::Load(values + base, tile_valid, vec, Op::identity(), v);
    Keys tk;
    tk.Load(keys + base, tile_valid, vec);
    const uint32_t heads = tk.Heads(tile_valid, [&](K& b) {
      b = before;
      return has_before;
    });
    const bool call_end = base + tile_valid == n;
    if (!call_end && tile_valid == kItems * int(blockDim.x)) {
      ends = Keys::EndsOfFullTile(heads, has_after && tk.k[kItems - 1] != after);
    } else {
      ends = tk.Ends(tile_valid, call_end, close, [&](K& a) {
        a = after;
        return has_after;
      });
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) items[i] = {v[i], (heads >> i) & 1u};
  }

  // A closing element writes its run: the index is the runs closed before it, the heads at
  // 1..i (the count less one). Runs are sparse, so a row no lane of the warp closes a run in is
  // skipped whole (predicated writes for every element would cost more than the scan).
  __device__ __forceinline__ void Store(uint64_t base, int /*tile_valid*/, bool /*vec*/, const Item (&items)[kItems]) const {
    constexpr int kVecElems = Layout::kVecElems;
#pragma unroll
    for (int r = 0; r < Layout::kVecs; ++r) {
      const uint32_t row = (ends >> (r * kVecElems)) & ((1u << kVecElems) - 1);
      if (!__any_sync(kFullMask, row != 0)) continue;
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) {
        const int i = r * kVecElems + j;
        if ((row >> j) & 1u) {
          const uint32_t idx = items[i].bits - 1;
          values_out[idx] = items[i].value;
          keys_out[idx] = keys[base + Keys::Offset(i)];
        }
      }
    }
  }

  __device__ __forceinline__ static Item ExclusiveOut(Item run, const Item& /*x*/) { return run; }  // never: inclusive
  // The prefix of the call's first tile (read before any tile of the call publishes, so before
  // WriteCarry may overwrite an aliased carry): the carried run, counted 1 when the first
  // element continues it.
  __device__ __forceinline__ Item CarryItem(const Carry& c) const {
    return {c.value, c.started && K(c.last_key) == keys[0] ? 1u : 0u};
  }
  // Runs closed in the call: the heads at 1..n-1, and the last element's run if `close`.
  __device__ __forceinline__ void WriteCarry(Carry* c, Item value, uint64_t count) const {
    c->value = value.value;
    c->last_key = uint64_t(keys[count - 1]);
    c->started = 1;
    c->runs = value.bits - 1 + (close ? 1u : 0u);
  }
};

// n == 0: the carry passes through, no runs written.
template <class T, class Op>
__global__ void RunCarryPassKernel(const RunCarry<T>* in, RunCarry<T>* out) {
  if (in != nullptr) {
    *out = *in;
  } else {
    *out = RunCarry<T>{Op::identity(), 0, 0, 0};
  }
  out->runs = 0;
}

template <class T, class Op, class K, class Policy>
cudaError_t ReduceByKeyImpl(void* d_temp, std::size_t& temp_bytes, const T* values, const K* keys, K* keys_out,
                            T* values_out, uint64_t n, bool close, const RunCarry<T>* carry_in,
                            RunCarry<T>* carry_out, cudaStream_t stream) {
  using IO = ReduceByKeyTileIO<T, Op, K, Policy::kItems>;
  const std::size_t body = SinglePassBody<Policy>(n);
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return cudaSuccess;
  }
  // One launch (the run indices are the launch's), and counts that fit the item's 31 bits.
  if (carry_out == nullptr || n >= (uint64_t{1} << 31) || DivUp(n, Policy::kTile) > MaxTilesPerLaunch()) {
    return cudaErrorInvalidValue;
  }
  if (n > 0 && (values == nullptr || keys == nullptr || keys_out == nullptr || values_out == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) {
    RunCarryPassKernel<T, Op><<<1, 1, 0, stream>>>(carry_in, carry_out);
    GPUSCAN_CHECK_LAUNCH();
    return cudaSuccess;
  }
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, body, view));
  return LaunchSinglePass<RunItem<T>, RunOp<T, Op>, Policy, false, IO>(
      view, n, false, carry_in, carry_out, stream, [&](uint64_t, const RunCarry<T>*) {
        return IO{values, keys, keys_out, values_out, n, close, carry_in};
      });
}

}  // namespace gpuscan::kernels::detail

namespace gpuscan::kernels {

template <class T, class Op, class K>
cudaError_t ReduceByKey(void* d_temp, std::size_t& temp_bytes, const T* d_values, const K* d_keys, K* d_keys_out,
                        T* d_values_out, uint64_t n, bool close, const RunCarry<T>* d_carry_in,
                        RunCarry<T>* d_carry_out, cudaStream_t stream) {
  using Policy = detail::ReduceByKeyTuning<detail::kTunedArch, sizeof(T)>;
  return detail::ReduceByKeyImpl<T, Op, K, Policy>(d_temp, temp_bytes, d_values, d_keys, d_keys_out, d_values_out, n,
                                                   close, d_carry_in, d_carry_out, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_REDUCE_BY_KEY_K(T, OP, K)                                                      \
  template cudaError_t gpuscan::kernels::ReduceByKey<T, gpuscan::ops::OP<T>, K>(                           \
      void*, std::size_t&, const T*, const K*, K*, T*, uint64_t, bool, const gpuscan::kernels::RunCarry<T>*, \
      gpuscan::kernels::RunCarry<T>*, cudaStream_t);
#define GPUSCAN_INSTANTIATE_REDUCE_BY_KEY(T, OP)       \
  GPUSCAN_INSTANTIATE_REDUCE_BY_KEY_K(T, OP, uint32_t) \
  GPUSCAN_INSTANTIATE_REDUCE_BY_KEY_K(T, OP, uint64_t)
