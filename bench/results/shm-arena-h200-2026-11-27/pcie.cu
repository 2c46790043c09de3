// Scratch probe (not in the tree): where a registered-pageable H2D+D2H pipeline loses the link.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/mman.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
using Clk = std::chrono::steady_clock;
static double secs(Clk::time_point a) { return std::chrono::duration<double>(Clk::now() - a).count(); }

__global__ void touch(int* d, size_t n) {  // a light kernel standing for the scan
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] += 1;
}

int main(int argc, char** argv) {
  const size_t N = size_t{1} << 30;
  char *reg_in, *reg_out, *pin_in, *pin_out;
  reg_in = (char*)mmap(nullptr, N, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  reg_out = (char*)mmap(nullptr, N, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memset(reg_in, 1, N); memset(reg_out, 2, N);
  auto t = Clk::now();
  CK(cudaHostRegister(reg_in, N, cudaHostRegisterDefault));
  CK(cudaHostRegister(reg_out, N, cudaHostRegisterDefault));
  printf("register 2 GiB: %.3f s\n", secs(t));
  CK(cudaMallocHost(&pin_in, N)); CK(cudaMallocHost(&pin_out, N));
  memset(pin_in, 1, N); memset(pin_out, 2, N);
  char* d; CK(cudaMalloc(&d, N));
  char* dout; CK(cudaMalloc(&dout, N));
  cudaStream_t s1, s2; CK(cudaStreamCreate(&s1)); CK(cudaStreamCreate(&s2));
  auto whole = [&](const char* what, char* in, char* out) {
    for (int r = 0; r < 3; r++) {
      CK(cudaDeviceSynchronize());
      auto t0 = Clk::now(); CK(cudaMemcpyAsync(d, in, N, cudaMemcpyHostToDevice, s1)); CK(cudaStreamSynchronize(s1)); double h = secs(t0);
      t0 = Clk::now(); CK(cudaMemcpyAsync(out, dout, N, cudaMemcpyDeviceToHost, s1)); CK(cudaStreamSynchronize(s1)); double dd = secs(t0);
      t0 = Clk::now(); CK(cudaMemcpyAsync(d, in, N, cudaMemcpyHostToDevice, s1)); CK(cudaMemcpyAsync(out, dout, N, cudaMemcpyDeviceToHost, s2));
      CK(cudaDeviceSynchronize()); double b = secs(t0);
      printf("%-10s whole 1 GiB: H2D %.1f GB/s  D2H %.1f GB/s  both at once %.1f GB/s each (%.1f ms)\n", what, N / h / 1e9, N / dd / 1e9, N / b / 1e9, b * 1e3);
    }
  };
  whole("registered", reg_in, reg_out);
  whole("pinned", pin_in, pin_out);
  // The engine's shape: a ring of `slots` slots, each its own stream: wait for the slot's previous
  // D2H, H2D piece, kernel (after the previous kernel), D2H piece.
  for (char* base : {reg_in, pin_in}) {
    char* obase = base == reg_in ? reg_out : pin_out;
    for (size_t piece : {size_t{2} << 20, size_t{4} << 20, size_t{8} << 20, size_t{16} << 20}) {
      for (int slots : {2, 3, 4, 8}) {
        std::vector<cudaStream_t> st(slots); std::vector<cudaEvent_t> done(slots), kdone(slots);
        for (int i = 0; i < slots; i++) { CK(cudaStreamCreate(&st[i])); CK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming)); CK(cudaEventCreateWithFlags(&kdone[i], cudaEventDisableTiming)); }
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
          CK(cudaDeviceSynchronize());
          auto t0 = Clk::now();
          std::vector<bool> busy(slots, false);
          cudaEvent_t last = nullptr;
          for (size_t off = 0, k = 0; off < N; off += piece, ++k) {
            int i = k % slots;
            if (busy[i]) CK(cudaEventSynchronize(done[i]));
            char* dd = d + (i * piece) % (N - piece);
            CK(cudaMemcpyAsync(dd, base + off, piece, cudaMemcpyHostToDevice, st[i]));
            if (last) CK(cudaStreamWaitEvent(st[i], last, 0));
            touch<<<264, 256, 0, st[i]>>>((int*)dd, piece / 4);
            CK(cudaEventRecord(kdone[i], st[i])); last = kdone[i];
            CK(cudaMemcpyAsync(obase + off, dd, piece, cudaMemcpyDeviceToHost, st[i]));
            CK(cudaEventRecord(done[i], st[i])); busy[i] = true;
          }
          CK(cudaDeviceSynchronize());
          best = std::min(best, secs(t0));
        }
        printf("%-10s ring: piece %2zu MiB x %d slots: %.1f GB/s (%.1f ms)\n", base == reg_in ? "registered" : "pinned", piece >> 20, slots, N / best / 1e9, best * 1e3);
        for (int i = 0; i < slots; i++) { cudaStreamDestroy(st[i]); cudaEventDestroy(done[i]); cudaEventDestroy(kdone[i]); }
      }
    }
  }
  return 0;
}
