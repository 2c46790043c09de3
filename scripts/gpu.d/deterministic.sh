# scripts/gpu run deterministic: the one-pass deterministic float scan (issue 11). The canonical
# kernel tests (bit for bit against the tree's reference, calls split anywhere, run twice) plain and
# under compute-sanitizer memcheck and racecheck; the CUDA engine's deterministic and segmented
# tests (CPU and CUDA bits equal); the deterministic RPC tests on the cuda engine; the kernel suite
# (deterministic beside the look-back, CUB and the copy, float32 and float64).
# Logs: device.txt, kernel.log, memcheck.log, racecheck.log, engine.log, integration.log,
# ks_det.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup
san=$(gpu_sanitizer)
step kernel tests: canonical scan
timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='CanonicalKernel*' 2>&1 | tee "$out/kernel.log" | tail -6
step compute-sanitizer memcheck: canonical kernel tests
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Product:CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' \
  >"$out/memcheck.log" 2>&1
echo "memcheck exit $?"; tail -4 "$out/memcheck.log"
step compute-sanitizer racecheck: canonical kernel tests, aligned and not
timeout 150 "$san" --tool racecheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' >"$out/racecheck.log" 2>&1
echo "racecheck exit $?"; tail -4 "$out/racecheck.log"
step CUDA engine tests: deterministic and segmented
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 \
  --gtest_filter='CudaDeterministic*:*Segmented*:*ReduceEveryDType*' 2>&1 | tee "$out/engine.log" | tail -6
step deterministic and segmented RPCs on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Deterministic*:*Segmented*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' \
  | tee "$out/integration.log" | tail -6
step kernel suite: deterministic against the look-back, CUB and the copy
timeout 200 $B/kernel_suite --ops scan --algorithms deterministic,decoupled_lookback,cub --dtypes float32,float64 \
  --sizes 2^12,2^16,2^20,2^24,2^28,2^30 --json "$out/ks_det.json" >"$out/ks_det.txt" 2>&1
grep -v '^copy' "$out/ks_det.txt" | head -40
