#!/usr/bin/env bash
# Issue 47 (axis scans) on the GPU machine: the kernel tests of ScanRows / ScanColumns
# (gpu_kernel_tests ScanAxis*), the kernel suite's scan_axis rows (axis=1 and axis=0 at 2^20 x 256
# and 2^14 x 2^14, int32 and float32, each beside the device copy of the same bytes and axis=1
# beside CUB's scan by row keys), and CuPy's cumsum(m, axis=1 / 0) on the same shapes for
# reference, all in one run.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite"
#   device:  run(command="bash bench/results/scan-axis-h100-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, tests.log, suite.txt, suite.json, cupy.txt.
# AXIS_TEST_FILTER / AXIS_SUITE_ARGS override what runs.
source scripts/lib/gpu-common.sh
gpu_setup
python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tee -a "$out/device.txt"

step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter="${AXIS_TEST_FILTER:-ScanAxis*}" 2>&1 | tee "$out/tests.log" | tail -15

step "kernel suite: scan_axis"
timeout 200 $B/kernel_suite ${AXIS_SUITE_ARGS:---ops scan_axis --dtypes int32,float32 --sizes 2^28 --reps 25} \
  --json "$out/suite.json" 2>&1 | tee "$out/suite.txt"

step "CuPy cumsum on the same shapes"
PYTHONUNBUFFERED=1 timeout 120 python3 - <<'PY' 2>&1 | tee "$out/cupy.txt"
import cupy as cp
def bench(f, reps=15):
    f(); cp.cuda.runtime.deviceSynchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record(); f(); e.record(); e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    ts.sort()
    return ts[len(ts) // 2]
for dt in (cp.int32, cp.float32):
    for rows, cols in ((1 << 20, 256), (1 << 14, 1 << 14)):
        m = (cp.arange(rows * cols, dtype=cp.int64) % 15 - 7).astype(dt).reshape(rows, cols)
        o = cp.empty_like(m)
        ms_copy = bench(lambda: o.__setitem__(Ellipsis, m))
        for axis in (1, 0):
            ms = bench(lambda: cp.cumsum(m, axis=axis, dtype=dt, out=o))
            gbs = 2 * m.nbytes / ms / 1e6
            print(f"cupy.cumsum {cp.dtype(dt).name} {rows}x{cols} axis={axis}: {ms*1e3:9.1f} us  {gbs:7.1f} GB/s  "
                  f"({100*ms_copy/ms:5.1f}% of cupy's copy, {ms_copy*1e3:.1f} us)")
        del m, o
        cp.get_default_memory_pool().free_all_blocks()
PY
