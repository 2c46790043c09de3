# Where a 1 GiB device-memory scan's time goes, client side (driver for the device run only).
import sys, time, statistics
import cupy as cp
import gpuscan
from gpuscan import _native, _device

target = sys.argv[1]
c = gpuscan.Client(target)
spans = {}
def timed(name, fn):
    def wrap(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spans.setdefault(name, []).append(time.perf_counter() - t)
    return wrap
_native.NativeClient.header_call = timed("header_call", _native.NativeClient.header_call)
_device.Call.export = timed("export", _device.Call.export)
for n in (1 << 28, 1 << 10):
    spans.clear()
    x = cp.random.randint(-100, 100, n, dtype=cp.int32)
    out = cp.empty_like(x)
    cp.cuda.Device().synchronize()
    totals, server = [], []
    for i in range(25):
        t = time.perf_counter()
        c.scan(x, out=out)
        totals.append(time.perf_counter() - t)
        tm = c.last_timing if hasattr(c, "last_timing") else None
        server.append(tm)
    med = lambda v: statistics.median(v[5:]) * 1e6
    print(f"n={n}: call {med(totals):.0f} us; " + "; ".join(f"{k} {med(v):.0f} us" for k, v in spans.items()))
    print("  server medians:", {k: statistics.median([getattr(t, k) for t in server[5:]]) for k in ("receive_us", "queue_us", "kernel_us", "total_us")})
    # The same kernel timed here on the caller's device, for the reference
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
