#include "bench_suite.h"

#if defined(GPUSCAN_HAVE_BENCH)
#include "gpuscan/bench/suite.h"
#include "service/validate.h"
#endif

namespace gpuscan::server {

#if defined(GPUSCAN_HAVE_BENCH)
namespace {

bench::SuiteSpec ToSuiteSpec(const v1::BenchmarkRequest& r, int device) {
  bench::SuiteSpec spec;
  spec.operations.assign(r.operations().begin(), r.operations().end());
  spec.algorithms.assign(r.algorithms().begin(), r.algorithms().end());
  for (int t : r.dtypes()) {
    engine::DType d;
    if (ToEngineDType(t, &d).ok()) spec.dtypes.push_back(d);
  }
  spec.sizes.assign(r.sizes().begin(), r.sizes().end());
  if (r.repetitions() > 0) spec.repetitions = static_cast<int>(r.repetitions());
  if (r.warmup() > 0) spec.warmup = static_cast<int>(r.warmup());
  spec.device = device;
  return spec;
}

v1::BenchmarkRow RowToWire(const bench::Row& row) {
  v1::BenchmarkRow out;
  out.set_operation(row.operation);
  out.set_algorithm(row.algorithm);
  out.set_dtype(ToWire(row.dtype));
  out.set_elements(row.elements);
  out.set_median_us(row.median_us);
  out.set_min_us(row.min_us);
  out.set_max_us(row.max_us);
  out.set_bytes_moved(row.bytes_moved);
  out.set_gbps(row.gbps);
  out.set_pct_of_copy(row.pct_of_copy);
  out.set_ratio_to_cub(row.ratio_to_cub);
  out.set_verified(row.verified);
  out.set_device(row.device);
  return out;
}

class BenchKernelSuite final : public KernelSuite {
 public:
  void Run(const v1::BenchmarkRequest& request, int device,
           const std::function<bool(v1::BenchmarkRow)>& on_row) override {
    bench::RunKernelSuite(ToSuiteSpec(request, device), [&](const bench::Row& row) { return on_row(RowToWire(row)); });
  }
};

}  // namespace

std::shared_ptr<KernelSuite> MakeBenchKernelSuite() { return std::make_shared<BenchKernelSuite>(); }
#else
std::shared_ptr<KernelSuite> MakeBenchKernelSuite() { return nullptr; }
#endif

}  // namespace gpuscan::server
