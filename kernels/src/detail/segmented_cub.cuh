// SegmentedPairScan: cub::DeviceScan over (head, value) pairs, the carry read on the device
// when the kernel runs. Heavy to compile: only the segmented_*.cu files include this.
#pragma once

#include "gpuscan/kernels/segmented_scan.h"
#include "cub_peers.cuh"

namespace gpuscan::kernels {

template <class T, class Op>
cudaError_t SegmentedPairScan(void* d_temp, std::size_t& temp_bytes, const seg::SegItem<T>* in,
                              seg::SegItem<T>* out, uint64_t n, const seg::SegItem<T>* carry_in,
                              seg::SegItem<T>* carry_out, cudaStream_t stream) {
  using namespace detail;
  using Item = seg::SegItem<T>;
  using Pairs = seg::SegOp<T, Op>;
  using Init = cub::detail::InputValue<Item, CarryRef<Item, Pairs>>;
  using Future = cub::FutureValue<Item, CarryRef<Item, Pairs>>;
  using Inclusive = cub::DispatchScan<const Item*, Item*, Pairs, Init, uint32_t, Item, cub::ForceInclusive::Yes>;
  if (n > kCubMaxItems) return cudaErrorInvalidValue;  // callers pass sub-chunks
  std::size_t cub_bytes = 0;
  const Init none{Future(CarryRef<Item, Pairs>{nullptr})};
  GPUSCAN_TRY(Inclusive::Dispatch(nullptr, cub_bytes, in, out, Pairs{}, none,
                                  static_cast<uint32_t>(std::max<uint64_t>(n, 1)), stream));
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(cub_bytes);
    return cudaSuccess;
  }
  if (n > 0 && (in == nullptr || out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return PassCarry<Item, Pairs>(carry_in, carry_out, stream);
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, cub_bytes, view));
  std::size_t bytes = cub_bytes;
  const Init init{Future(CarryRef<Item, Pairs>{carry_in})};
  GPUSCAN_TRY(Inclusive::Dispatch(view.body, bytes, in, out, Pairs{}, init, static_cast<uint32_t>(n), stream));
  GPUSCAN_CHECK_LAUNCH();
  if (carry_out != nullptr) {
    ScanCarryOutKernel<Item, Pairs><<<1, 1, 0, stream>>>(out + n - 1, nullptr, carry_out);
    GPUSCAN_CHECK_LAUNCH();
  }
  // Leave the bytes CUB used zero again (temp_storage.h).
  return cudaMemsetAsync(view.body, 0, cub_bytes, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_SEGMENTED(T, OP)                                                       \
  template cudaError_t gpuscan::kernels::SegmentedPairScan<T, gpuscan::ops::OP<T>>(                \
      void*, std::size_t&, const gpuscan::seg::SegItem<T>*, gpuscan::seg::SegItem<T>*, uint64_t,   \
      const gpuscan::seg::SegItem<T>*, gpuscan::seg::SegItem<T>*, cudaStream_t);
