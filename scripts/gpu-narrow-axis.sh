#!/usr/bin/env bash
# Issue 47 on the GPU machine, through the server: scans along an axis and narrow dtypes on the
# cuda engine (the C++ RPC tests and bad-input rows against a CUDA server, the Python tests
# against numpy), and the end-to-end figure: a 1 GiB uint8 flags array scanned into int64
# offsets (1 GiB in, 8 GiB out) beside today's path, the same flags widened to int64 first (8 GiB
# in, 8 GiB out). The kernels' own tests and suite rows: scripts/gpu-axis.sh.
#   here:    scripts/gpu-narrow-axis.sh pack     builds and packs into .gpu-narrow/gpu.tar.xz
#   device:  run(command="bash scripts/gpu-narrow-axis.sh", carry=[".gpu-narrow"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, integration_cuda.log, pytest_cuda.log, e2e_narrow.txt, server.log
# (NARROW_E2E=0 skips the end-to-end figure).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = pack ]; then
  set -e
  build=${BUILD_DIR:-build}
  cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON >/dev/null  # a tree `make` configured without a GPU has none
  cmake --build "$build" -j"$(nproc)" --target gpuscan-server integration_tests gpuscan_python
  stage=.gpu-narrow/stage
  rm -rf "$stage" && mkdir -p "$stage/.gpu-bin" "$stage/.gpu-py" "$stage/.gpu-rt"
  for b in gpuscan-server integration_tests; do strip -o "$stage/.gpu-bin/$b" "$build/bin/$b"; done
  tar -C "$build/python/pkg" --exclude=__pycache__ -cf - gpuscan | tar -C "$stage/.gpu-py" -xf -
  ../shared/device/bundle-libs.sh "$stage/.gpu-rt" "$stage/.gpu-bin/gpuscan-server" "$stage/.gpu-bin/integration_tests" \
    "$stage/.gpu-py/gpuscan/libgpuscan_capi.so"
  tar -C "$stage" -cf - .gpu-bin .gpu-py .gpu-rt | xz -T2 --lzma2=preset=6,dict=256MiB >.gpu-narrow/gpu.tar.xz
  rm -rf "$stage"
  du -h .gpu-narrow/gpu.tar.xz
  exit 0
fi

out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
work=/tmp/gpuscan-narrow
mkdir -p "$work" && tar -C "$work" -xJf .gpu-narrow/gpu.tar.xz
export LD_LIBRARY_PATH=$work/.gpu-rt PYTHONPATH=$work/.gpu-py PYTHONDONTWRITEBYTECODE=1
B=$work/.gpu-bin
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } 2>&1 | tee "$out/device.txt"

step() { echo; echo "=== $* ==="; }
step "RPC tests and bad-input rows against the cuda engine"
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*ScanAlong*:*Scan2D*:*Narrow*:*OutputD*:*Float16*:*Typed*Scan*:BadInputMatrix.AllRowsAtOnce' 2>&1 \
  | grep -v '\[info\]' | tee "$out/integration_cuda.log" | tail -6
step "Python: axis scans, narrow dtypes, 2-D scans against numpy on the cuda engine"
GPUSCAN_SERVER=$B/gpuscan-server GPUSCAN_TEST_ENGINE=cuda timeout 200 python3 -m pytest -q -p no:cacheprovider \
  python/tests/test_scan_axis.py python/tests/test_narrow.py python/tests/test_narrow_ops.py python/tests/test_scan2d.py \
  2>&1 | tee "$out/pytest_cuda.log" | tail -6

[ "${NARROW_E2E:-1}" = 0 ] && exit 0

step "end to end: 1 GiB uint8 flags -> int64 offsets (exclusive), narrow vs widened first"
sock=/tmp/gpuscan-narrow.sock
rm -f "$sock"
$B/gpuscan-server --address "unix:$sock" --engine cuda >"$out/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
sleep 1
timeout 300 python3 - "$sock" <<'PY' 2>&1 | tee "$out/e2e_narrow.txt"
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
kill $pid 2>/dev/null
wait 2>/dev/null
true
