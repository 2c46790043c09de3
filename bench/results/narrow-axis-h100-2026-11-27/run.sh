#!/usr/bin/env bash
# Issue 47 on the GPU machine, through the server: scans along an axis and narrow dtypes on the
# cuda engine (the C++ RPC tests and bad-input rows against a CUDA server, the Python tests
# against numpy), and the end-to-end figure: a 1 GiB uint8 flags array scanned into int64
# offsets (1 GiB in, 8 GiB out) beside today's path, the same flags widened to int64 first (8 GiB
# in, 8 GiB out). The kernels' own tests and suite rows: ../scan-axis-h100-2026-11-27/run.sh.
#   here:    scripts/gpu pack --targets "gpuscan-server gpuscan integration_tests" --python
#   device:  run(command="bash bench/results/narrow-axis-h100-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, integration_cuda.log, pytest_cuda.log, e2e_narrow.txt, server_e2e.log
# (NARROW_E2E=0 skips the end-to-end figure).
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R

step "RPC tests and bad-input rows against the cuda engine"
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*ScanAlong*:*Scan2D*:*Narrow*:*OutputD*:*Float16*:*Typed*Scan*:BadInputMatrix.AllRowsAtOnce' 2>&1 \
  | grep -v '\[info\]' | tee "$out/integration_cuda.log" | tail -6
step "Python: axis scans, narrow dtypes, 2-D scans against numpy on the cuda engine"
gpu_pytest 200 python/tests/test_scan_axis.py python/tests/test_narrow.py python/tests/test_narrow_ops.py \
  python/tests/test_scan2d.py 2>&1 | tee "$out/pytest_cuda.log" | tail -6

[ "${NARROW_E2E:-1}" = 0 ] && exit 0

step "end to end: 1 GiB uint8 flags -> int64 offsets (exclusive), narrow vs widened first"
sock=/tmp/gpuscan-narrow.sock
rm -f "$sock"
gpu_server e2e "unix:$sock" --engine cuda
PYTHONPATH=$P timeout 300 python3 - "$sock" <<'PY' 2>&1 | tee "$out/e2e_narrow.txt"
import sys, time
import numpy as np
import gpuscan
c = gpuscan.Client("unix:" + sys.argv[1], timeout=120)
n = 1 << 30
flags = (np.random.default_rng(47).random(n, dtype=np.float32) < 0.3).view(np.uint8)
want = None
for label, run in (("narrow: uint8 in, int64 out", lambda: c.scan(flags, exclusive=True, dtype=np.int64)),
                   ("today: widened to int64 first", lambda: c.scan(flags.astype(np.int64), exclusive=True))):
    times = []
    for _ in range(3):
        t = time.perf_counter()
        got = run()
        times.append(time.perf_counter() - t)
    if want is None:
        want = got
        ok = int(got[-1]) + int(flags[-1]) == int(flags.sum(dtype=np.int64)) and got[0] == 0
    else:
        ok = np.array_equal(got, want)
    best = min(times)
    print(f"{label}: {' '.join(f'{x:.2f}' for x in times)} s; best {best:.2f} s = {n / best / 1e9:.2f} GB/s of input "
          f"({'right' if ok else 'WRONG'})", flush=True)
    del got
print("server timing of the last call:", c.last_timing)
PY
