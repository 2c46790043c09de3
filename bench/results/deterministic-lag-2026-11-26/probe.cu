// Ceiling probe for a lagged two-read scan (issue 11): persistent blocks take steps s in order;
// step s loads tile s (the "aggregate" read, from DRAM) and tile s - L (the "scan" read, which
// should hit L2, the tile having been read L steps earlier), folds the first (a sink value a
// tile) and copies the second to out. Reported as % of a cudaMemcpy of the same bytes.
// Build: nvcc -std=c++17 -O3 -arch=sm_90 -o lag_probe probe.cu
#include <cuda_pipeline.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstdint>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); std::exit(1); } } while (0)

constexpr int kThreads = 256;
constexpr int kTileVec = 1024;  // 16-byte vectors a tile: 16 KiB (4096 float32)

__device__ __forceinline__ uint64_t Policy(int kind) {
  uint64_t p;
  if (kind == 1) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else if (kind == 2) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void CpAsync(void* smem, const void* g, uint64_t pol) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(pol) : "memory");
}

struct Smem { float4 t[2][2][kTileVec]; };

// hints: 0 none; 1 first read evict_last, second evict_first, stores .cs; 2 first read evict_last only;
// 3 stores .cs only. agg: 0 = no first read (a pipelined copy), 1 = the lagged pattern.
__global__ void __launch_bounds__(kThreads) LagKernel(const float4* in, float4* out, float* sink, uint32_t tiles,
                                                      int lag, int hints, int agg, unsigned* ticket) {
  extern __shared__ __align__(16) unsigned char raw[];
  Smem& sm = *reinterpret_cast<Smem*>(raw);
  __shared__ uint32_t s_step;
  const int tid = threadIdx.x;
  const uint32_t steps = tiles + (agg ? lag : 0);
  const uint64_t pol_first = Policy(hints == 1 || hints == 2 ? 1 : 0);
  const uint64_t pol_second = Policy(hints == 1 ? 2 : 0);
  auto draw = [&]() {
    __syncthreads();
    if (tid == 0) s_step = atomicAdd(ticket, 1u);
    __syncthreads();
    return s_step;
  };
  auto issue = [&](uint32_t s, int st) {
    if (s >= steps) return;
    if (agg && s < tiles) {
      for (int r = 0; r < kTileVec / kThreads; ++r)
        CpAsync(&sm.t[st][0][r * kThreads + tid], in + uint64_t(s) * kTileVec + r * kThreads + tid, pol_first);
    }
    const int64_t c = agg ? int64_t(s) - lag : int64_t(s);
    if (c >= 0 && c < tiles) {
      for (int r = 0; r < kTileVec / kThreads; ++r)
        CpAsync(&sm.t[st][1][r * kThreads + tid], in + uint64_t(c) * kTileVec + r * kThreads + tid, pol_second);
    }
  };
  uint32_t s = draw();
  int st = 0;
  issue(s, st);
  __pipeline_commit();
  while (s < steps) {
    const uint32_t nx = draw();
    issue(nx, st ^ 1);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    if (agg && s < tiles) {  // this thread's segment: 4 vectors
      float a = 0;
      for (int v = 0; v < 4; ++v) {
        const float4 q = sm.t[st][0][tid * 4 + v];
        a += q.x; a += q.y; a += q.z; a += q.w;
      }
      if (a == 12345.678f) sink[s] = a;  // keeps the fold
    }
    const int64_t c = agg ? int64_t(s) - lag : int64_t(s);
    if (c >= 0 && c < tiles) {
      for (int r = 0; r < kTileVec / kThreads; ++r) {
        float4* d = out + uint64_t(c) * kTileVec + r * kThreads + tid;
        const float4 v = sm.t[st][1][r * kThreads + tid];
        if (hints == 1 || hints == 3) __stcs(d, v); else *d = v;
      }
    }
    st ^= 1;
    s = nx;
  }
}

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {1ull << 28, 1ull << 30};  // float32 elements
  int dev = 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("# %s, L2 %d MiB, %d SMs\n", prop.name, prop.l2CacheSize >> 20, prop.multiProcessorCount);
  const size_t smem = sizeof(Smem);
  CK(cudaFuncSetAttribute(LagKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, LagKernel, kThreads, smem));
  const int grid = per_sm * prop.multiProcessorCount;
  std::printf("# %d blocks a SM, grid %d, smem %zu\n", per_sm, grid, smem);
  for (uint64_t n : sizes) {
    const size_t bytes = n * 4;
    float4 *in, *out;
    float* sink;
    unsigned* ticket;
    CK(cudaMalloc(&in, bytes));
    CK(cudaMalloc(&out, bytes));
    CK(cudaMalloc(&sink, n / 4096 * 4 + 4));
    CK(cudaMalloc(&ticket, 4));
    CK(cudaMemset(in, 0x3c, bytes));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    auto time = [&](auto&& f) {
      std::vector<float> ms;
      for (int i = 0; i < 13; ++i) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        if (i >= 3) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      return 0.5 * (ms[4] + ms[5]);
    };
    const uint32_t tiles = uint32_t(n / 4096);
    const double copy = time([&] { CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice)); });
    std::printf("n 2^%d copy %.1f us %.0f GB/s\n", __builtin_ctzll(n), copy * 1e3, 2.0 * bytes / copy / 1e6);
    auto run = [&](int lag, int hints, int agg) {
      return time([&] {
        CK(cudaMemsetAsync(ticket, 0, 4));
        LagKernel<<<grid, kThreads, smem>>>(in, out, sink, tiles, lag, hints, agg, ticket);
        CK(cudaGetLastError());
      });
    };
    for (int hints : {0, 3}) {
      const double t = run(0, hints, 0);
      std::printf("  pipelined copy hints %d: %.1f%% of copy\n", hints, 100 * copy / t);
    }
    for (int lag : {256, 512, 768, 1024, 2048}) {
      std::printf("  lag %4d:", lag);
      for (int hints : {0, 1, 2, 3}) {
        const double t = run(lag, hints, 1);
        std::printf("  hints %d %.1f%%", hints, 100 * copy / t);
      }
      std::printf("\n");
    }
    // The copy again, last: the clock may have moved.
    const double copy2 = time([&] { CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice)); });
    std::printf("  copy again %.1f us\n", copy2 * 1e3);
    CK(cudaFree(in)); CK(cudaFree(out)); CK(cudaFree(sink)); CK(cudaFree(ticket));
  }
  return 0;
}
