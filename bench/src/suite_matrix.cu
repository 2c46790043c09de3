// The kernel suite's matrix family: the 2-D scan ("scan2d") and the axis scans ("scan_axis"),
// beside the copy and, for axis=1, CUB's scan by row keys.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_scan.cuh>

#include <cmath>
#include <string>
#include <type_traits>

#include "gpuscan/kernels/scan2d.h"
#include "gpuscan/kernels/scan_axis.h"

#include "suite_harness.cuh"

namespace gpuscan::bench::detail {

namespace {

// The 2-D scan's reference: each row folded left to right by one thread, then each column top
// to bottom by one thread. Slow, but the association gpuscan.v1.Scan2DHeader fixes: bit for bit.
template <class T>
__global__ void RowFolds(const T* in, T* out, uint64_t rows, uint64_t cols) {
  const uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  const ops::Sum<T> sum;
  T acc = in[i * cols];
  out[i * cols] = acc;
  for (uint64_t j = 1; j < cols; ++j) out[i * cols + j] = acc = sum(acc, in[i * cols + j]);
}
template <class T>
__global__ void ColumnFolds(T* out, uint64_t rows, uint64_t cols) {
  const uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (j >= cols) return;
  const ops::Sum<T> sum;
  for (uint64_t i = 1; i < rows; ++i) out[i * cols + j] = sum(out[(i - 1) * cols + j], out[i * cols + j]);
}

// The row index of element i of a matrix of `cols` columns: the keys of CUB's scan by key as an
// axis=1 scan (a transform of a counting iterator: no key bytes move).
struct RowOf {
  uint32_t cols;
  __host__ __device__ uint32_t operator()(uint32_t i) const { return i / cols; }
};

}  // namespace

// 2-D inclusive sum (summed-area table) of a square matrix of about n elements: cols =
// floor(sqrt(n)), rows = n / cols (the issue's cell: 2^28 = 16384 x 16384 float32). No CUB
// peer exists; the bar is the device copy of the same bytes (the matrix read and written
// once). Checked against RowFolds + ColumnFolds.
template <class T>
bool Suite::Scan2D(DType dtype, uint64_t n) {
  using Op = ops::Sum<T>;
  const uint64_t cols = std::max<uint64_t>(1, uint64_t(std::sqrt(double(n)))), rows = n / cols, m = rows * cols;
  std::size_t temp = 0;
  BENCH_CHECK((kernels::Scan2D<T, Op>(nullptr, temp, nullptr, nullptr, rows, cols, nullptr, s())));
  if (!Prepare(What("scan2d", dtype, m), m * sizeof(T), 0, m * sizeof(T), temp)) return true;
  FillPools<T>(0x5A7, false);
  auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
  auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
  auto mine = [&](int r) {
    std::size_t b = temp_.bytes();
    return kernels::Scan2D<T, Op>(temp_.get(), b, in(r), out(r), rows, cols, nullptr, s());
  };
  const uint64_t bytes = 2 * m * sizeof(T);
  const Times copy = TimeCopy(bytes);
  if (!Emit(MakeRow("copy", "scan2d", dtype, m, bytes, copy, copy.median_us, 0, true))) return false;
  if (Wants("tile_wavefront")) {
    const Times t = Time(mine);
    BENCH_CHECK(mine(0));
    T* ref = reinterpret_cast<T*>(ref_.get());
    RowFolds<T><<<unsigned((rows + 255) / 256), 256, 0, s()>>>(in(0), ref, rows, cols);
    CheckLaunch();
    ColumnFolds<T><<<unsigned((cols + 255) / 256), 256, 0, s()>>>(ref, rows, cols);
    CheckLaunch();
    const bool ok = AllSame<T>(out(0), ref, m);
    if (!Emit(MakeRow("scan2d", "tile_wavefront", dtype, m, bytes, t, copy.median_us, 0, ok))) return false;
  }
  return true;
}

// Axis scans (issue 47), inclusive sums of n elements as two shapes: tall (n / 256 rows x 256
// columns, the issue's 2^20 x 256 at n = 2^28) and square (floor(sqrt(n)) columns: 2^14 x
// 2^14). Each shape gets its own copy row (the matrix read and written once), then "axis1"
// (ScanRows: numpy's cumsum(m, axis=1)) beside CUB's best formulation of it, "cub_by_key"
// (cub::DeviceScan::InclusiveScanByKey with row-index keys made by a transform of a counting
// iterator: no key bytes move; its ratio_to_cub is 1, axis1's is against it), and "axis0"
// (ScanColumns, no carry; no CUB peer). The algorithm column names the shape:
// "axis1[1048576x256]". Checked against RowFolds (axis1, cub_by_key) and ColumnFolds of a copy
// of the input (axis0), bit for bit up to the rows' 1e-6 float tolerance (our data's sums are
// exact integers).
template <class T>
bool Suite::ScanAxis(DType dtype, uint64_t n) {
  using Op = ops::Sum<T>;
  const uint64_t square = std::max<uint64_t>(1, uint64_t(std::sqrt(double(n))));
  for (const uint64_t cols : {std::min<uint64_t>(256, n), square}) {
    const uint64_t rows = n / cols, m = rows * cols;
    const std::string shape = "[" + std::to_string(rows) + "x" + std::to_string(cols) + "]";
    auto keys = thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0), RowOf{uint32_t(cols)});
    std::size_t temp = 0, b = 0;
    BENCH_CHECK((kernels::ScanRows<T, Op>(nullptr, b, nullptr, nullptr, rows, cols, false, s())));
    temp = std::max(temp, b);
    BENCH_CHECK((kernels::ScanColumns<T, Op>(nullptr, b, nullptr, nullptr, rows, cols, false, nullptr, nullptr, s())));
    temp = std::max(temp, b);
    const std::size_t axis0_temp = b;
    BENCH_CHECK(cub::DeviceScan::InclusiveScanByKey(nullptr, b, keys, static_cast<const T*>(nullptr),
                                                    static_cast<T*>(nullptr), ::cuda::std::plus<>{}, uint32_t(m),
                                                    ::cuda::std::equal_to<>{}, s()));
    temp = std::max(temp, b);
    if (!Prepare(What("scan_axis", dtype, m) + " " + shape, m * sizeof(T), 0, m * sizeof(T), temp)) continue;
    Note("scan_axis " + std::string(types::Name(dtype)) + " " + shape + ": axis0 temp " +
         std::to_string(axis0_temp) + " bytes");
    FillPools<T>(0xA715, false);
    auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
    auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
    T* ref = reinterpret_cast<T*>(ref_.get());
    const uint64_t bytes = 2 * m * sizeof(T);
    const Times copy = TimeCopy(bytes);
    auto cub_call = [&](int r) {
      std::size_t tb = temp_.bytes();
      return cub::DeviceScan::InclusiveScanByKey(temp_.get(), tb, keys, in(r), out(r), ::cuda::std::plus<>{}, uint32_t(m),
                                                 ::cuda::std::equal_to<>{}, s());
    };
    const Times cub_t = Time(cub_call);
    RowFolds<T><<<unsigned((rows + 255) / 256), 256, 0, s()>>>(in(0), ref, rows, cols);
    CheckLaunch();
    BENCH_CHECK(cub_call(0));
    const bool cub_ok = AllSame<T>(out(0), ref, m);
    if (!Emit(MakeRow("copy", "scan_axis" + shape, dtype, m, bytes, copy, copy.median_us, cub_t.median_us, true))) {
      return false;
    }
    if (!Emit(MakeRow("scan_axis", "cub_by_key" + shape, dtype, m, bytes, cub_t, copy.median_us, cub_t.median_us,
                      cub_ok))) {
      return false;
    }
    if (Wants("axis1")) {
      auto mine = [&](int r) {
        std::size_t tb = temp_.bytes();
        return kernels::ScanRows<T, Op>(temp_.get(), tb, in(r), out(r), rows, cols, false, s());
      };
      const Times t = Time(mine);
      BENCH_CHECK(mine(0));
      const bool ok = AllSame<T>(out(0), ref, m);
      if (!Emit(MakeRow("scan_axis", "axis1" + shape, dtype, m, bytes, t, copy.median_us, cub_t.median_us, ok))) {
        return false;
      }
    }
    if (Wants("axis0")) {
      auto mine = [&](int r) {
        std::size_t tb = temp_.bytes();
        return kernels::ScanColumns<T, Op>(temp_.get(), tb, in(r), out(r), rows, cols, false, nullptr, nullptr, s());
      };
      const Times t = Time(mine);
      BENCH_CHECK(mine(0));
      BENCH_CHECK(cudaMemcpyAsync(ref, in(0), m * sizeof(T), cudaMemcpyDeviceToDevice, s()));
      ColumnFolds<T><<<unsigned((cols + 255) / 256), 256, 0, s()>>>(ref, rows, cols);
      CheckLaunch();
      const bool ok = AllSame<T>(out(0), ref, m);
      if (!Emit(MakeRow("scan_axis", "axis0" + shape, dtype, m, bytes, t, copy.median_us, 0, ok))) return false;
    }
  }
  return true;
}

bool Suite::MatrixFamily(const std::string& op, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    return op == "scan2d" ? Scan2D<T>(dtype, n) : ScanAxis<T>(dtype, n);
  });
}

}  // namespace gpuscan::bench::detail
