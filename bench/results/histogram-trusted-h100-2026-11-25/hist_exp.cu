// Histogram variants (vectors in flight, prefetch, grid) against the production launch, same data.
#include <cstdio>
#include <vector>
#include <algorithm>
#include "gpuscan/kernels/histogram.h"
#include "gpuscan/kernels/histogram_bins.h"
#include "detail/agent_histogram.cuh"
using namespace gpuscan;
namespace H = gpuscan::kernels::detail::histogram;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
__global__ void Fill(float* x, uint64_t n) { for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) { uint32_t h = uint32_t(i * 2654435761u) ^ uint32_t(i >> 11); x[i] = float(h & 0xFFFFFF) * 0x1p-24f; } }
int main() {
  for (uint64_t n : {uint64_t(1) << 24, uint64_t(1) << 26, uint64_t(1) << 28}) {
    float* in; unsigned long long* c; double* de;
    CK(cudaMalloc(&in, n * 4)); CK(cudaMalloc(&c, 4096 * 8)); CK(cudaMalloc(&de, 4096 * 8));
    Fill<<<1024, 256>>>(in, n);
    std::vector<double> edges = hist::EvenEdges(0.0, 1.0, 256, true);
    CK(cudaMemcpy(de, edges.data(), edges.size() * 8, cudaMemcpyHostToDevice));
    hist::Bins b = hist::MakeBins(edges.data(), 256, true);
    b.edges = de;
    const size_t smem = (b.bins + 1) * sizeof(float) + (b.bins + hist::kExtraSlots) * sizeof(unsigned);
    std::vector<unsigned long long> want(259), got(259);
    CK(cudaMemset(c, 0, 4096 * 8)); CK(kernels::Histogram<float>(in, n, b, c, 0)); CK(cudaMemcpy(want.data(), c, 259 * 8, cudaMemcpyDeviceToHost));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto time = [&](const char* name, auto launch) {
      CK(cudaMemset(c, 0, 4096 * 8)); launch(); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), c, 259 * 8, cudaMemcpyDeviceToHost));
      std::vector<float> ts;
      for (int r = 0; r < 21; ++r) { cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms * 1000); }
      std::sort(ts.begin(), ts.end());
      printf("2^%d %-34s %8.1f us %s\n", __builtin_ctzll(n), name, ts[10], got == want ? "ok" : "WRONG");
    };
    time("production", [&] { CK(kernels::Histogram<float>(in, n, b, c, 0)); });
    for (unsigned grid : {1056u, 2112u, 4224u, 16384u}) {
      char nm[64];
#define V(U, P) snprintf(nm, sizeof nm, "grid %u unroll %d prefetch %d", grid, U, int(P)); time(nm, [&] { H::SharedKernel<float, float, true, U, P><<<grid, H::kThreads, smem>>>(in, n, b, c); });
      V(2, false) V(2, true) V(4, false) V(4, true) V(8, false)
    }
    cudaFree(in); cudaFree(c); cudaFree(de);
  }
  return 0;
}
