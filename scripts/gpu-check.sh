#!/usr/bin/env bash
# Builds the CUDA kernel library, its tests and its benchmark here (no GPU needed), bundles the
# shared libraries they need, and prints the command to run on the GPU machine (device `run`).
#   scripts/gpu-check.sh [BUILD_DIR]      (default build-gpu; Release: the binaries must fit the
#                                          64 MiB a device run may carry)
# Then, with the device tool: run(command=<printed>, carry=["<BUILD_DIR>/bin", ".gpu-rt"]).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target gpu_kernel_tests kernel_bench
../shared/device/bundle-libs.sh .gpu-rt "$build/bin/gpu_kernel_tests" "$build/bin/kernel_bench"
du -ch "$build/bin/gpu_kernel_tests" "$build/bin/kernel_bench" .gpu-rt | tail -1 | awk '{print "carrying " $1 " (limit 64M)"}'
cat <<CMD

Device command (carry ["$build/bin", ".gpu-rt"]):
export LD_LIBRARY_PATH=\$PWD/.gpu-rt; nvidia-smi -L; set -o pipefail; timeout 400 ./$build/bin/gpu_kernel_tests --gtest_brief=1 2>&1 | tee \$OUT/gpu.log | tail -40; S=\$(which compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer); timeout 150 \$S --tool memcheck --error-exitcode 9 ./$build/bin/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ScanTest.Int32/decoupled_lookback:*ScanTest.Float/chained:*CompactTest.Int32/own:*ReduceTest.Float/own' 2>&1 | tail -8; timeout 150 \$S --tool racecheck --error-exitcode 9 ./$build/bin/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ScanTest.Uint32/*' 2>&1 | tail -8; timeout 200 ./$build/bin/kernel_bench 2>&1 | tee \$OUT/bench.txt
CMD
