#!/usr/bin/env bash
# Builds everything GPU-related here (no GPU needed), strips and packs the binaries with the
# shared libraries they need into .gpu-pack/gpu.tar.xz (a device run may carry 64 MiB; the
# binaries hold ~40 MB of device code each, so they travel compressed), and prints the device
# call that runs scripts/gpu-suite.sh on the GPU machine.
#   scripts/gpu-check.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bins=(gpu_kernel_tests gpu_engine_tests integration_tests isolation_tests shm_region_test gpuscan-server gpuscan kernel_suite gpuscan_soak)
cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${bins[@]}"
rm -rf .gpu-bin .gpu-rt .gpu-pack
mkdir -p .gpu-bin .gpu-pack
for b in "${bins[@]}"; do strip -o ".gpu-bin/$b" "$build/bin/$b"; done
cp "$build/tests/soak/libgpuscan_soak_heap_probe.so" .gpu-bin/  # preloaded into the soak's server
# Only the gRPC-linked binaries need libraries carried (the kernel binaries are static but libc).
../shared/device/bundle-libs.sh .gpu-rt .gpu-bin/gpu_engine_tests .gpu-bin/integration_tests .gpu-bin/isolation_tests .gpu-bin/gpuscan .gpu-bin/gpuscan-server \
  .gpu-bin/gpuscan_soak
# One xz stream with a dictionary larger than a binary: the binaries share their device code,
# which a window of 256 MiB finds (66 MB at -6's 8 MiB window, 22 MB so; ~3 min on 2 cores).
tar -cf - .gpu-bin .gpu-rt | xz -T1 --lzma2=preset=6,dict=256MiB >.gpu-pack/gpu.tar.xz
du -h .gpu-pack/gpu.tar.xz | awk '{print "packed " $1 " (a device run carries at most 64M)"}'
cat <<'CMD'

Device call: run(command="bash scripts/gpu-suite.sh", carry=[".gpu-pack"], timeout_s=590)
Logs come back under $OUT: device.txt, gpu_kernel.log, gpu_engine.log, integration_cuda.log,
kernel_suite.{txt,json,svg}, e2e_cli.txt, e2e_1gib.json, e2e_1k.json, server.log.
The bad input matrix and the soak test on the CUDA engine (docs/RELIABILITY.md), same pack:
run(command="SOAK_SECONDS=270 bash scripts/gpu-soak.sh", carry=[".gpu-pack"], timeout_s=590)
CMD
