#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`), from the repo root, after scripts/gpu-check.sh packed
# the binaries (.gpu-pack/gpu.tar.xz with gpuscan-server, integration_tests, gpuscan_soak and
# libgpuscan_soak_heap_probe.so): the bad input matrix on the CUDA engine, then the soak test
# against a CUDA server, 60 s as in CI and a longer run. Logs and JSON go to $OUT.
#   SOAK_SECONDS   the longer run (default 300; 0 skips it)
# Device call: run(command="bash scripts/gpu-soak.sh", carry=[".gpu-pack"], timeout_s=590)
set -uo pipefail
out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
[ -f .gpu-pack/gpu.tar.xz ] && tar -xJf .gpu-pack/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.gpu-rt
B=$PWD/.gpu-bin
long=${SOAK_SECONDS:-300}
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; nproc; } | tee "$out/device.txt"

step() { echo; echo "=== $* ==="; }
step "bad input matrix on the cuda engine"
GPUSCAN_TEST_ENGINE=cuda timeout 120 "$B/integration_tests" --gtest_filter='*BadInputMatrix*' 2>&1 \
  | grep -v '\[info\]' >"$out/matrix_cuda.log"
grep -E '^\[  (PASSED|FAILED) ' "$out/matrix_cuda.log"; grep -cE '^\[       OK \]' "$out/matrix_cuda.log" | sed 's/^/rows and tests OK: /'

soak() {  # soak NAME SECONDS
  step "soak $2 s, 64 clients, cuda engine"
  timeout $(($2 + 120)) "$B/gpuscan_soak" --engine cuda --server-binary "$B/gpuscan-server" \
    --heap-probe "$B/libgpuscan_soak_heap_probe.so" --clients 64 --duration "$2" \
    --json "$out/$1.json" --server-log "/tmp/$1_server.log" 2>&1 | tee "$out/$1.txt" | grep -vE '^\[ *[0-9.]+ s\] [0-9]+ calls'
  tail -c 20000 "/tmp/$1_server.log" >"$out/$1_server.log"
}
soak soak_cuda_60s 60
[ "$long" -gt 0 ] && soak soak_cuda_long "$long"
exit 0
