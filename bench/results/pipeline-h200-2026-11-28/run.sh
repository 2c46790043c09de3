#!/usr/bin/env bash
# Issue 56, third step (the Pipeline RPC) on the cuda engine of one H200.
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server kernel_suite" --python  (carry .gpu-pack/gpu.tar.xz only)
#   device:  run(command="bash bench/results/pipeline-h200-2026-11-28/run.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200", timeout_s=590)
# Writes integration_cuda.txt (every integration suite on the cuda engine, the pipeline ones
# included), pipeline.json (pipeline_bench.py) and kernel_suite.txt (compact on 2^28 int32, scan
# and reduce on 2^27: about what the chain's later stages get, the same run).
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/pipeline-h200-2026-11-28
step integration suites on the cuda engine
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.txt" | tail -8
step the chain compact -> scan -> reduce on a resident 1 GiB int32 array, against CuPy in process
gpu_server pipeline 127.0.0.1:50893 --engine cuda --resident-bytes $((12 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 240 python3 $here/pipeline_bench.py 127.0.0.1:50893 $((1 << 28)) \
  "$out/pipeline.json"
gpu_stop pipeline
step the kernel suite: compact on int32 2^28, scan and reduce on 2^27
LD_LIBRARY_PATH=$R timeout 120 $B/kernel_suite --ops compact,scan,reduce --dtypes int32 \
  --sizes 2^28,2^27 2>&1 | tee "$out/kernel_suite.txt" | tail -14
exit 0
