# ScanHeader.carry on the cuda engine (one H200): the Python carry tests and the resident suites
# against CUDA servers, then a resident 1 GiB scan kept with and without a carry (the fold is one
# more pass over the results) beside the plain kept scan. Pack:
#   scripts/gpu pack --build build-gpu --targets "gpuscan-server gpuscan" --dask --no-build
# Run (with `bash scripts/gpu run exit` and `DASK_REPS=2 bash scripts/gpu run dask` in the same call):
#   bash bench/results/carry-h200-2026-11-29/run.sh
# Logs: py-carry.log, carry-bench.txt, server_bench.log.
source scripts/lib/gpu-common.sh
gpu_setup
step "python: carry and resident tests on the cuda engine"
gpu_pytest 240 python/tests/test_carry.py python/tests/test_resident.py python/tests/test_resident_ops.py \
  2>&1 | tee "$out/py-carry.log" | tail -6
step "1 GiB int32 and float32 resident, kept scans with and without a carry (Python over loopback TCP)"
gpu_server bench 127.0.0.1:50591 --engine cuda --resident-bytes $((16 << 30))
PYTHONPATH=$P LD_LIBRARY_PATH=$R python3 - 127.0.0.1:50591 <<'PY' 2>&1 | tee "$out/carry-bench.txt"
import statistics, sys, time
import numpy as np
import gpuscan
c = gpuscan.Client(sys.argv[1], timeout=120)
print("data path", c.data_path)
for dtype in (np.int32, np.float32):
    x = np.random.default_rng(1).integers(1, 100, 1 << 28).astype(dtype)
    r = c.put(x)
    want = np.cumsum(x, dtype=dtype)
    k = c.scan(r, keep=True, carry=7)
    got = k.get()
    ok = np.array_equal(got[:1000], want[:1000] + dtype(7)) and got[-1] == c.scan(r, keep=True).get()[-1] + dtype(7)
    k.drop()
    for name, kw in (("kept", {}), ("kept, carry", {"carry": 7})):
        ms = []
        for _ in range(20):
            t = time.perf_counter()
            k = c.scan(r, keep=True, **kw)
            ms.append((time.perf_counter() - t) * 1e3)
            k.drop()
        print(f"{np.dtype(dtype).name:8s} {name:12s} median {statistics.median(ms):7.3f} ms  best {min(ms):7.3f} ms"
              f"  (server kernel_us {c.last_timing.kernel_us if c.last_timing else '?'})  checked={ok}")
    r.drop()
PY
