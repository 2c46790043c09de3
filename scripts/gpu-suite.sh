#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`), from the repo root, after scripts/gpu-check.sh packed
# the binaries: the GPU test suites, compute-sanitizer on a subset, the kernel benchmark and an
# end-to-end CLI scan through the CUDA server with its peak RSS. Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
[ -f .gpu-pack/gpu.tar.xz ] && tar -xJf .gpu-pack/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.gpu-rt
B=.gpu-bin
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } | tee "$out/device.txt"

step() { echo; echo "=== $* ==="; }
step kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/gpu_kernel.log" | tail -4
step engine tests
timeout 200 $B/gpu_engine_tests --gtest_brief=1 2>&1 | tee "$out/gpu_engine.log" | tail -6
step integration suites on the cuda engine
GPUSCAN_TEST_ENGINE=cuda timeout 120 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.log" | tail -6
step compute-sanitizer memcheck on the engine path
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$san" ]; then
  timeout 120 "$san" --tool memcheck --error-exitcode 9 $B/gpu_engine_tests --gtest_brief=1 \
    --gtest_filter='*StageTimes*:*DescribesItsDevice*' 2>&1 | tail -3
else
  echo "compute-sanitizer not found"
fi
step kernel benchmark
timeout 150 $B/kernel_bench 2>&1 | tee "$out/bench.txt" | tail -30
step end to end: 1 GiB int32 scan from the CLI through the cuda server
$B/gpuscan-server --address 127.0.0.1:50551 --engine auto >"$out/server.log" 2>&1 &
pid=$!
for _ in $(seq 50); do $B/gpuscan health -s 127.0.0.1:50551 >/dev/null 2>&1 && break; sleep 0.2; done
head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
/usr/bin/time -v $B/gpuscan scan -s 127.0.0.1:50551 --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out.bin \
  --no-progress 2>&1 | grep -E "us|MB|Elapsed|engine|device|algorithm" | tee "$out/e2e.txt"
$B/gpuscan reduce -s 127.0.0.1:50551 --format raw --dtype int32 -i /tmp/in.bin 2>/dev/null | tee -a "$out/e2e.txt"
echo "last scanned element: $(tail -c 4 /tmp/out.bin | od -An -t d4)" | tee -a "$out/e2e.txt"
grep -E "VmHWM|VmRSS" /proc/$pid/status | tee -a "$out/e2e.txt"
kill -TERM $pid; wait $pid
tail -3 "$out/server.log"
