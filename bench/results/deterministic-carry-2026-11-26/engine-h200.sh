#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_engine_tests of the carry change, gpu_engine_tests_old
# of main before it): DeviceMemoryLimitTest failed on an H200 (an illegal address) in final.sh's
# engine step. Both binaries' DeviceMemoryLimit tests, then the new one whole with its log kept,
# and the failing test under memcheck.
rm -rf .gpu-bin .gpu-rt
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for b in gpu_engine_tests_old gpu_engine_tests; do
  step $b DeviceMemoryLimit
  timeout 120 $B/$b --gtest_filter='DeviceMemoryLimit*' >"$out/$b-dml.txt" 2>&1; echo "rc $?"; tail -5 "$out/$b-dml.txt"
done
step memcheck, RoomForOneLane, new
timeout 300 compute-sanitizer --tool memcheck --print-limit 5 $B/gpu_engine_tests \
  --gtest_filter='DeviceMemoryLimitTest.RoomForOneLane*' >"$out/memcheck-dml.txt" 2>&1; echo "rc $?"
grep -E "Invalid|Error|at 0x|FAILED|PASSED|by thread|Address" "$out/memcheck-dml.txt" | head -20
step gpu_engine_tests whole, new, without DeviceMemoryLimit
timeout 300 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-DeviceMemoryLimit*' >"$out/engine.txt" 2>&1; echo "rc $?"; tail -4 "$out/engine.txt"
