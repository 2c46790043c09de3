// Sort on the pool: (code, position) pairs sorted as pairs. The position breaks ties, so the
// parallel sort is stable and its result does not depend on the thread count.
#include <oneapi/tbb/parallel_sort.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/sort_keys.h"

namespace gpuscan::engine::cpu {

std::string Sort(Pool& pool, const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                 void* values_out, int64_t* indices_out, StageTimes& times) {
  KernelTimer timer(times);
  if (n == 0) return "parallel_sort";
  CheckBuffer(keys, n, "keys");
  if (spec.has_values) CheckBuffer(values, n, "values");
  VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    using U = sortkey::Code<T>;
    const auto* in = static_cast<const unsigned char*>(keys);
    std::vector<std::pair<U, uint64_t>> v(n);
    const bool parallel = RunParallel(pool, n);
    const Blocks blocks(n);
    ForBlocks(pool, blocks.count, parallel, [&](uint64_t b) {
      for (uint64_t i = blocks.begin(b); i < blocks.end(b); ++i) v[i] = {sortkey::Encode(Load<T>(in, i), spec.descending), i};
    });
    pool.arena.execute([&] { tbb::parallel_sort(v.begin(), v.end()); });
    const size_t vsize = spec.has_values ? SizeOf(spec.values_dtype) : 0;
    const auto* vin = static_cast<const unsigned char*>(values);
    auto* kout = static_cast<unsigned char*>(keys_out);
    auto* vout = static_cast<unsigned char*>(values_out);
    ForBlocks(pool, blocks.count, parallel, [&](uint64_t b) {
      for (uint64_t i = blocks.begin(b); i < blocks.end(b); ++i) {
        if (kout) Store(kout, i, sortkey::Decode<T>(v[i].first, spec.descending));
        if (vout) std::memcpy(vout + i * vsize, vin + v[i].second * vsize, vsize);
        if (indices_out) indices_out[i] = static_cast<int64_t>(v[i].second);
      }
    });
  });
  return "parallel_sort";
}

}  // namespace gpuscan::engine::cpu
