# scripts/gpu run suite: the GPU test suites, compute-sanitizer on a subset, the kernel benchmark and
# an end-to-end CLI scan through the CUDA server with its peak RSS.
# Logs: device.txt, gpu_kernel.log, gpu_engine.log, gpu_fault.log, gpu_drain.log,
# integration_cuda.log, kernel_suite.{txt,json,svg}, e2e_cli.txt, e2e_1gib.json, e2e_1k.json,
# server_e2e.log.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
# The engine tests start gpuscan-server (DeviceIpcTest) and themselves as workers (DeviceDrainTest):
# from the pack, not from the build folder's path compiled into them.
export GPUSCAN_BIN_DIR=$B
step kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/gpu_kernel.log" | tail -4
step engine tests
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | tee "$out/gpu_engine.log" | tail -6
step sticky device fault "(own process: it corrupts the CUDA context)"
timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/gpu_fault.log" | tail -8
step "a sticky fault in a device's worker process (--isolate-devices; the 2-device test skips with one GPU)"
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='DeviceDrain*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/gpu_drain.log" | tail -8
step integration suites on the cuda engine
GPUSCAN_TEST_ENGINE=cuda timeout 120 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.log" | tail -6
step compute-sanitizer memcheck on the engine path
san=$(gpu_sanitizer)
if [ -x "$san" ]; then
  timeout 120 "$san" --tool memcheck --error-exitcode 9 $B/gpu_engine_tests --gtest_brief=1 \
    --gtest_filter='*StageTimes*:*DescribesItsDevice*' 2>&1 | tail -3
else
  echo "compute-sanitizer not found"
fi
step kernel suite "(bench/: every algorithm vs CUB and copy, 2^10..2^30)"
timeout 200 $B/kernel_suite --json "$out/kernel_suite.json" --svg "$out/kernel_suite.svg" >"$out/kernel_suite.txt" 2>&1
grep -E "(decoupled_lookback|deterministic|one_pass|single_pass) +(int32|float32) +2\^(16|28) " "$out/kernel_suite.txt"

step end to end through the cuda server
gpu_server e2e 127.0.0.1:50551 --engine auto
G="$B/gpuscan -s 127.0.0.1:50551"
echo "--- 1 GiB int32 scan from the CLI (file in, file out)"
head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
/usr/bin/time -f "wall %e s, client max RSS %M kB" $G scan --format raw --dtype int32 -i /tmp/in.bin -o /tmp/out.bin \
  --no-progress 2>&1 | tee "$out/e2e_cli.txt"
echo "last scanned element $(tail -c 4 /tmp/out.bin | od -An -t d4) vs reduce $($G reduce --format raw --dtype int32 -i /tmp/in.bin 2>/dev/null)"
echo "--- 1 GiB int32 scan vs the transport ceiling, same run"
timeout 120 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --concurrency 1 --requests 3 --json "$out/e2e_1gib.json" 2>&1 | tail -5
echo "--- 1K-element requests"
timeout 120 $G bench --e2e --op scan --dtype int32 --elements 1024 --concurrency 1,4,16,64 --duration 3 --json "$out/e2e_1k.json" 2>&1 | tail -8
echo "--- Benchmark RPC from the CLI"
timeout 60 $G bench --kernels --ops scan --dtypes int32 --sizes 2^16,2^28 2>&1 | tail -12
grep -E "VmHWM" "/proc/${gpu_pids[e2e]}/status"
gpu_stop e2e
tail -2 "$out/server_e2e.log"
