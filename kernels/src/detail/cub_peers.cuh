// The CUB peers: cub::DeviceScan / DeviceReduce / DeviceSelect behind the library's API, with
// carries handled on the device. Heavy to compile: only the *_cub.cu files include this.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>

#include <cuda/std/functional>

#include <algorithm>

#include "dispatch.cuh"

namespace gpuscan::kernels::detail {

// CUB reads the scan's initial value through this when the kernel runs: the carry, or the
// identity when there is none.
template <class T, class Op>
struct CarryRef {
  const T* p;
  __host__ __device__ T operator*() const { return p != nullptr ? *p : Op::identity(); }
};

// Saves in[0] to *slot (an exclusive scan in place overwrites the last input, which the carry
// out needs).
template <class T>
__global__ void SaveKernel(const T* in, T* slot) {
  *slot = *in;
}

// *carry_out = last_out (inclusive) or last_out op *last_in (exclusive).
template <class T, class Op>
__global__ void ScanCarryOutKernel(const T* last_out, const T* last_in, T* carry_out) {
  *carry_out = last_in != nullptr ? Op()(*last_out, *last_in) : *last_out;
}

// *out = carry op *partial, where carry = *carry_in or the identity.
template <class T, class Op>
__global__ void CombineCarryKernel(const T* carry_in, const T* partial, T* out) {
  *out = Op()(carry_in != nullptr ? *carry_in : Op::identity(), *partial);
}

// CUB's scans run with 32-bit offsets; longer calls go in chunks chained by their carries.
constexpr uint64_t kCubMaxItems = 1ull << 30;

// CUB tunes its sm_90 scans for the operators it knows (cuda::std::plus and friends) and falls
// back to a generic policy for any other functor: SUM goes to CUB as cuda::std::plus (same
// results: floats add alike, integers wrap alike on the GPU), so the peer is CUB at its best.
// The other operators keep ours (float MIN/MAX must treat NaN and -0 as the CPU engine does).
template <class T, class Op>
using CubScanOp = std::conditional_t<std::is_same_v<Op, ops::Sum<T>>, ::cuda::std::plus<T>, Op>;

template <class T, class Op>
cudaError_t CubScan(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t n,
                    bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  using CubOp = CubScanOp<T, Op>;
  using Init = cub::detail::InputValue<T, CarryRef<T, Op>>;
  using Future = cub::FutureValue<T, CarryRef<T, Op>>;
  using Inclusive = cub::DispatchScan<const T*, T*, CubOp, Init, uint32_t, T, cub::ForceInclusive::Yes>;
  using Exclusive = cub::DispatchScan<const T*, T*, CubOp, Init, uint32_t, T, cub::ForceInclusive::No>;
  const auto chunk = static_cast<uint32_t>(std::min(std::max<uint64_t>(n, 1), kCubMaxItems));
  // Size for both flavours, so a buffer sized once serves inclusive and exclusive calls.
  std::size_t incl_bytes = 0, excl_bytes = 0;
  const Init none{Future(CarryRef<T, Op>{nullptr})};
  GPUSCAN_TRY(Inclusive::Dispatch(nullptr, incl_bytes, in, out, CubOp{}, none, chunk, stream));
  GPUSCAN_TRY(Exclusive::Dispatch(nullptr, excl_bytes, in, out, CubOp{}, none, chunk, stream));
  const std::size_t cub_bytes = std::max(incl_bytes, excl_bytes);
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, cub_bytes, n == 0 || (in != nullptr && out != nullptr), n, carry_in,
                       carry_out, stream, view, rc)) {
    return rc;
  }
  const T* cin = carry_in;
  int k = 0;
  for (uint64_t off = 0; off < n; off += kCubMaxItems, ++k) {
    const auto m = static_cast<uint32_t>(std::min(kCubMaxItems, n - off));
    T* cout = off + m == n ? carry_out : Slot<T>(view.header, k & 1);
    T* saved = Slot<T>(view.header, 2);
    if (exclusive && cout != nullptr) {
      SaveKernel<T><<<1, 1, 0, stream>>>(in + off + m - 1, saved);
      GPUSCAN_CHECK_LAUNCH();
    }
    std::size_t bytes = cub_bytes;
    const Init init{Future(CarryRef<T, Op>{cin})};
    if (exclusive) {
      GPUSCAN_TRY(Exclusive::Dispatch(view.body, bytes, in + off, out + off, CubOp{}, init, m, stream));
    } else {
      GPUSCAN_TRY(Inclusive::Dispatch(view.body, bytes, in + off, out + off, CubOp{}, init, m, stream));
    }
    GPUSCAN_CHECK_LAUNCH();
    if (cout != nullptr) {
      ScanCarryOutKernel<T, Op><<<1, 1, 0, stream>>>(out + off + m - 1, exclusive ? saved : nullptr, cout);
      GPUSCAN_CHECK_LAUNCH();
    }
    cin = cout;
  }
  // Leave the bytes CUB used zero again (temp_storage.h).
  return cudaMemsetAsync(view.body, 0, cub_bytes, stream);
}

template <class T, class Op>
cudaError_t CubReduce(void* d_temp, std::size_t& temp_bytes, const T* in, uint64_t n,
                      const T* carry_in, T* out, cudaStream_t stream) {
  std::size_t cub_bytes = 0;
  T* null_out = nullptr;
  GPUSCAN_TRY(cub::DeviceReduce::Reduce(nullptr, cub_bytes, in, null_out, static_cast<int64_t>(std::max<uint64_t>(n, 1)),
                                        Op{}, Op::identity(), stream));
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, cub_bytes, out != nullptr && (n == 0 || in != nullptr), n, carry_in, out,
                       stream, view, rc)) {
    return rc;
  }
  T* partial = Slot<T>(view.header, 2);
  std::size_t bytes = cub_bytes;
  GPUSCAN_TRY(cub::DeviceReduce::Reduce(view.body, bytes, in, partial, static_cast<int64_t>(n), Op{},
                                        Op::identity(), stream));
  GPUSCAN_CHECK_LAUNCH();
  CombineCarryKernel<T, Op><<<1, 1, 0, stream>>>(carry_in, partial, out);
  GPUSCAN_CHECK_LAUNCH();
  return cudaMemsetAsync(view.body, 0, cub_bytes, stream);
}

template <class T>
struct KeepOp {
  Predicate<T> pred;
  __device__ bool operator()(const T& x) const { return Keep(pred, x); }
};

template <class T>
cudaError_t CubCompact(void* d_temp, std::size_t& temp_bytes, const T* in, const uint8_t* flags,
                       Predicate<T> pred, uint64_t n, int64_t index_base, T* out_values,
                       int64_t* out_indices, uint64_t* num_kept, cudaStream_t stream) {
  const thrust::counting_iterator<int64_t> index(index_base);
  const auto discard = thrust::make_discard_iterator();
  const KeepOp<T> keep{pred};
  const auto items = static_cast<int64_t>(n);
  // Runs the selections the call needs (or, with no outputs, one that only counts).
  auto run = [&](void* tmp, std::size_t& bytes) -> cudaError_t {
    std::size_t need = 0, b = bytes;
    const bool count_only = out_values == nullptr && out_indices == nullptr;
    if (out_values != nullptr || count_only) {
      if (flags != nullptr) {
        if (count_only) {
          GPUSCAN_TRY(cub::DeviceSelect::Flagged(tmp, b, index, flags, discard, num_kept, items, stream));
        } else {
          GPUSCAN_TRY(cub::DeviceSelect::Flagged(tmp, b, in, flags, out_values, num_kept, items, stream));
        }
      } else {
        if (count_only) {
          GPUSCAN_TRY(cub::DeviceSelect::If(tmp, b, in, discard, num_kept, items, keep, stream));
        } else {
          GPUSCAN_TRY(cub::DeviceSelect::If(tmp, b, in, out_values, num_kept, items, keep, stream));
        }
      }
      if (tmp != nullptr) GPUSCAN_CHECK_LAUNCH();
      need = std::max(need, b);
      b = bytes;
    }
    if (out_indices != nullptr) {
      if (flags != nullptr) {
        GPUSCAN_TRY(cub::DeviceSelect::Flagged(tmp, b, index, flags, out_indices, num_kept, items, stream));
      } else {
        GPUSCAN_TRY(cub::DeviceSelect::FlaggedIf(tmp, b, index, in, out_indices, num_kept, items, keep, stream));
      }
      if (tmp != nullptr) GPUSCAN_CHECK_LAUNCH();
      need = std::max(need, b);
    }
    bytes = need;
    return cudaSuccess;
  };
  std::size_t cub_bytes = 0;
  GPUSCAN_TRY(run(nullptr, cub_bytes));
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(cub_bytes);
    return cudaSuccess;
  }
  if (num_kept == nullptr) return cudaErrorInvalidValue;
  if (n > 0 && ((flags == nullptr || out_values != nullptr) && in == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaMemsetAsync(num_kept, 0, sizeof(uint64_t), stream);
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, cub_bytes, view));
  std::size_t bytes = cub_bytes;
  GPUSCAN_TRY(run(view.body, bytes));
  return cudaMemsetAsync(view.body, 0, cub_bytes, stream);
}

}  // namespace gpuscan::kernels::detail

#define GPUSCAN_INSTANTIATE_CUB_SCAN(T, OP)                                                      \
  template cudaError_t gpuscan::kernels::detail::CubScan<T, gpuscan::ops::OP<T>>(                \
      void*, std::size_t&, const T*, T*, uint64_t, bool, const T*, T*, cudaStream_t);

#define GPUSCAN_INSTANTIATE_CUB_REDUCE(T, OP)                                                    \
  template cudaError_t gpuscan::kernels::detail::CubReduce<T, gpuscan::ops::OP<T>>(              \
      void*, std::size_t&, const T*, uint64_t, const T*, T*, cudaStream_t);

#define GPUSCAN_INSTANTIATE_CUB_COMPACT(T)                                                       \
  template cudaError_t gpuscan::kernels::detail::CubCompact<T>(                                  \
      void*, std::size_t&, const T*, const uint8_t*, gpuscan::kernels::Predicate<T>, uint64_t,   \
      int64_t, T*, int64_t*, uint64_t*, cudaStream_t);
