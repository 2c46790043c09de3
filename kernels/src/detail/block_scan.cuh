// Block-wide exclusive scans of one value per thread, in five interchangeable algorithms (the
// block level of the reduce-then-scan family; the single-pass agents use the warp-shuffle one).
// Interface: BlockScan<T, Op, kThreads, kAlgo>::Storage (shared memory) and
//   ExclusiveScan(x, excl, total, storage): excl = x[0] op ... op x[tid-1] (identity for
//   thread 0), total = the whole block's combination, in every thread.
// Callers must __syncthreads() before reusing `storage`.
#pragma once

#include "warp.cuh"

namespace gpuscan::kernels::detail {

enum class BlockScanAlgo { kWarpShuffle, kKoggeStone, kBrentKung, kBlelloch, kHillisSteele };

template <class T, class Op, int kThreads, BlockScanAlgo kAlgo>
struct BlockScan;

// Warp-shuffle scans inside each warp, then every thread combines the warp totals before it
// (a few shared-memory reads; 8 warps at 256 threads). One barrier.
template <class T, class Op, int kThreads>
struct BlockScan<T, Op, kThreads, BlockScanAlgo::kWarpShuffle> {
  static constexpr int kWarps = kThreads / kWarpThreads;
  struct Storage {
    T warp_total[kWarps];
  };
  __device__ __forceinline__ static void ExclusiveScan(T x, T& excl, T& total, Storage& s) {
    const Op op;
    const int lane = LaneId(), warp = WarpId();
    const T incl = WarpInclusiveScan(x, op);
    if (lane == kWarpThreads - 1) s.warp_total[warp] = incl;
    __syncthreads();
    T before = Op::identity();  // combination of the warps before this one
    T all = s.warp_total[0];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const T t = s.warp_total[w];
      if (w < warp) before = w == 0 ? t : op(before, t);
      if (w > 0) all = op(all, t);
    }
    T lane_excl = ShflUp(incl, 1);
    if (lane == 0) {
      excl = before;
    } else {
      excl = warp == 0 ? lane_excl : op(before, lane_excl);
    }
    total = all;
  }
};

// Kogge-Stone in one shared array, in place: each step reads, barrier, writes, barrier.
// log2(kThreads) steps, O(n log n) work.
template <class T, class Op, int kThreads>
struct BlockScan<T, Op, kThreads, BlockScanAlgo::kKoggeStone> {
  struct Storage {
    T a[kThreads];
  };
  __device__ __forceinline__ static void ExclusiveScan(T x, T& excl, T& total, Storage& s) {
    const Op op;
    const int tid = int(threadIdx.x);
    s.a[tid] = x;
    __syncthreads();
#pragma unroll
    for (int d = 1; d < kThreads; d <<= 1) {
      T y{};
      if (tid >= d) y = s.a[tid - d];
      __syncthreads();
      if (tid >= d) s.a[tid] = op(y, s.a[tid]);
      __syncthreads();
    }
    excl = tid == 0 ? Op::identity() : s.a[tid - 1];
    total = s.a[kThreads - 1];
  }
};

// Hillis-Steele, double-buffered: each step reads one buffer and writes the other, so one
// barrier per step.
template <class T, class Op, int kThreads>
struct BlockScan<T, Op, kThreads, BlockScanAlgo::kHillisSteele> {
  struct Storage {
    T buf[2][kThreads];
  };
  __device__ __forceinline__ static void ExclusiveScan(T x, T& excl, T& total, Storage& s) {
    const Op op;
    const int tid = int(threadIdx.x);
    int in = 0;
    s.buf[0][tid] = x;
    __syncthreads();
#pragma unroll
    for (int d = 1; d < kThreads; d <<= 1) {
      const T mine = s.buf[in][tid];
      s.buf[in ^ 1][tid] = tid >= d ? op(s.buf[in][tid - d], mine) : mine;
      in ^= 1;
      __syncthreads();
    }
    excl = tid == 0 ? Op::identity() : s.buf[in][tid - 1];
    total = s.buf[in][kThreads - 1];
  }
};

// Shared-memory index with one pad word per 32 entries, so the tree strides of Brent-Kung and
// Blelloch do not pile onto one bank.
__device__ __forceinline__ int Padded(int i) { return i + (i >> 5); }

// The up-sweep of Brent-Kung and Blelloch: x at position tid, then the reduction tree in place
// (position (m + 1) * 2^k - 1 ends up with the combination of the 2^k positions up to it).
template <class T, class Op, int kN>
__device__ __forceinline__ void UpSweep(T x, T* a) {
  const Op op;
  const int tid = int(threadIdx.x);
  a[Padded(tid)] = x;
#pragma unroll
  for (int stride = 1; stride < kN; stride <<= 1) {
    __syncthreads();
    const int i = (tid + 1) * stride * 2 - 1;
    if (i < kN) a[Padded(i)] = op(a[Padded(i - stride)], a[Padded(i)]);
  }
}

// Brent-Kung: up-sweep reduction tree, then a down-sweep that fills in the inclusive prefixes
// of the remaining positions. 2 log2(n) steps, O(n) work; kThreads/2 threads active at most.
template <class T, class Op, int kThreads>
struct BlockScan<T, Op, kThreads, BlockScanAlgo::kBrentKung> {
  static constexpr int kN = kThreads;
  struct Storage {
    T a[kN + kN / 32 + 1];
  };
  __device__ __forceinline__ static void ExclusiveScan(T x, T& excl, T& total, Storage& s) {
    const Op op;
    const int tid = int(threadIdx.x);
    UpSweep<T, Op, kN>(x, s.a);
#pragma unroll
    for (int stride = kN / 4; stride >= 1; stride >>= 1) {
      __syncthreads();
      const int i = (tid + 1) * stride * 2 - 1;
      if (i + stride < kN) s.a[Padded(i + stride)] = op(s.a[Padded(i)], s.a[Padded(i + stride)]);
    }
    __syncthreads();
    excl = tid == 0 ? Op::identity() : s.a[Padded(tid - 1)];
    total = s.a[Padded(kN - 1)];
  }
};

// Blelloch: the same up-sweep, then the root is replaced by the identity and a down-sweep swaps
// and combines its way to the exclusive prefixes (work-efficient, O(n)).
template <class T, class Op, int kThreads>
struct BlockScan<T, Op, kThreads, BlockScanAlgo::kBlelloch> {
  static constexpr int kN = kThreads;
  struct Storage {
    T a[kN + kN / 32 + 1];
    T total;
  };
  __device__ __forceinline__ static void ExclusiveScan(T x, T& excl, T& total, Storage& s) {
    const Op op;
    const int tid = int(threadIdx.x);
    UpSweep<T, Op, kN>(x, s.a);
    __syncthreads();
    if (tid == 0) {
      s.total = s.a[Padded(kN - 1)];
      s.a[Padded(kN - 1)] = Op::identity();
    }
#pragma unroll
    for (int stride = kN / 2; stride >= 1; stride >>= 1) {
      __syncthreads();
      const int i = (tid + 1) * stride * 2 - 1;
      if (i < kN) {
        const T left = s.a[Padded(i - stride)];
        const T prefix = s.a[Padded(i)];
        s.a[Padded(i - stride)] = prefix;
        s.a[Padded(i)] = op(prefix, left);
      }
    }
    __syncthreads();
    excl = s.a[Padded(tid)];
    total = s.total;
  }
};

// Block reduction, valid in every thread (warp shuffles, then the warp totals in order).
template <class T, class Op, int kThreads>
struct BlockReduce {
  static constexpr int kWarps = kThreads / kWarpThreads;
  struct Storage {
    T warp_total[kWarps];
  };
  __device__ __forceinline__ static T Reduce(T x, Storage& s) {
    const Op op;
    const T w = WarpReduceToLane0(x, op);
    if (LaneId() == 0) s.warp_total[WarpId()] = w;
    __syncthreads();
    T all = s.warp_total[0];
#pragma unroll
    for (int i = 1; i < kWarps; ++i) all = op(all, s.warp_total[i]);
    return all;
  }
};

}  // namespace gpuscan::kernels::detail
