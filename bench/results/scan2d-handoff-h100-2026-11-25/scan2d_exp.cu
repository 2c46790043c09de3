// Scan2D variants timed side by side on one matrix, each checked against a reference.
#include <cstdio>
#include <vector>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <type_traits>
#include "gpuscan/kernels/operators.h"
#include "detail/tile_state.cuh"
#include "kernels.cuh"
using namespace gpuscan;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
template <class T> __global__ void RowFolds(const T* in, T* out, uint64_t rows, uint64_t cols) {
  uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; if (i >= rows) return;
  T acc = in[i * cols]; out[i * cols] = acc;
  for (uint64_t j = 1; j < cols; ++j) out[i * cols + j] = acc = acc + in[i * cols + j];
}
template <class T> __global__ void ColumnFolds(T* out, uint64_t rows, uint64_t cols) {
  uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; if (j >= cols) return;
  for (uint64_t i = 1; i < rows; ++i) out[i * cols + j] = out[(i - 1) * cols + j] + out[i * cols + j];
}
__global__ void Fill(float* x, uint64_t n) { for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) { uint32_t h = uint32_t(i * 2654435761u) ^ uint32_t(i >> 13); x[i] = float(h % 2001) / 1000.0f - 1.0f; } }
__global__ void Fill(double* x, uint64_t n) { for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) { uint32_t h = uint32_t(i * 2654435761u) ^ uint32_t(i >> 13); x[i] = double(h % 2001) / 1000.0 - 1.0; } }
template <class T> __global__ void Diff(const T* a, const T* b, uint64_t n, unsigned long long* bad) {
  unsigned long long m = 0; for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) { using U = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>; U x, y; memcpy(&x, &a[i], sizeof(T)); memcpy(&y, &b[i], sizeof(T)); m += x != y; } atomicAdd(bad, m); }

template <class T, class F>
void Bench(const char* name, F f, T* in, T* out, T* ref, uint64_t rows, uint64_t cols, float copy_us) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  CK(cudaMemset(out, 0, rows * cols * sizeof(T)));
  CK(f()); CK(cudaDeviceSynchronize());
  unsigned long long* bad; cudaMalloc(&bad, 8); cudaMemset(bad, 0, 8);
  Diff<<<1024, 256>>>(out, ref, rows * cols, bad); unsigned long long h = 0; cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost);
  std::vector<float> ts;
  for (int r = 0; r < 15; ++r) { cudaEventRecord(a); CK(f()); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000); }
  std::sort(ts.begin(), ts.end());
  printf("%-28s %5s %6lux%-6lu %9.1f us  %5.1f%% of copy  %s\n", name, sizeof(T) == 4 ? "f32" : "f64", (unsigned long)rows, (unsigned long)cols, ts[7], 100.0 * copy_us / ts[7], h ? "WRONG" : "ok");
  cudaFree(bad);
}

template <class T>
void Run(uint64_t rows, uint64_t cols) {
  using Op = ops::Sum<T>;
  const uint64_t n = rows * cols;
  T *in, *out, *ref; void* temp;
  CK(cudaMalloc(&in, n * sizeof(T))); CK(cudaMalloc(&out, n * sizeof(T))); CK(cudaMalloc(&ref, n * sizeof(T)));
  CK(cudaMalloc(&temp, 64 << 20));
  Fill<<<1024, 256>>>(in, n);
  RowFolds<T><<<(rows + 255) / 256, 256>>>(in, ref, rows, cols); ColumnFolds<T><<<(cols + 255) / 256, 256>>>(ref, rows, cols);
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < 15; ++r) { cudaEventRecord(a); cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDeviceToDevice); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000); }
  std::sort(ts.begin(), ts.end()); const float copy = ts[7];
  printf("copy %lux%lu %s: %.1f us\n", (unsigned long)rows, (unsigned long)cols, sizeof(T) == 4 ? "f32" : "f64", copy);
  std::size_t tb = 64 << 20;
  Bench<T>("old (flag+fence, 4B)", [&] { std::size_t b = tb; return old2d::Launch<T, Op>(temp, b, in, out, rows, cols, nullptr, 0); }, in, out, ref, rows, cols, copy);
  Bench<T>("old + words ring2", [&] { std::size_t b = tb; return old2d::Launch<T, Op, true>(temp, b, in, out, rows, cols, nullptr, 0); }, in, out, ref, rows, cols, copy);
  cudaFree(in); cudaFree(out); cudaFree(ref); cudaFree(temp);
}

int main(int argc, char** argv) {
  if (argc > 1) {  // profile: the old kernel and the new one, once each, f32 16384^2
    const uint64_t rows = 16384, cols = 16384, n = rows * cols;
    float *in, *out; void* temp;
    CK(cudaMalloc(&in, n * 4)); CK(cudaMalloc(&out, n * 4)); CK(cudaMalloc(&temp, 64 << 20));
    Fill<<<1024, 256>>>(in, n);
    std::size_t b = 64 << 20;
    CK((old2d::Launch<float, ops::Sum<float>, false>(temp, b, in, out, rows, cols, nullptr, 0)));
    CK((new2d::Launch<float, ops::Sum<float>>(temp, b, in, out, rows, cols, nullptr, 0)));
    CK(cudaDeviceSynchronize());
    return 0;
  }
  Run<float>(16384, 16384);
  Run<double>(16384, 16384);
  Run<float>(4096, 4096);
  Run<float>(16384 + 77, 16384 - 4);
  return 0;
}
