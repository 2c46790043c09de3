"""The same resident calls as resident_bench.py, through the gpuscan package (Client and
AsyncClient) rather than the generated stubs: usage client_bench.py TARGET N OUT.json."""
import asyncio
import json
import statistics
import sys
import time

import numpy as np

import gpuscan


def median_ms(f, reps=30):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    target, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    x = np.random.default_rng(2).integers(-1000, 1000, n, dtype=np.int32)
    res = {"n": n}
    with gpuscan.Client(target, timeout=120) as c:
        t = time.perf_counter()
        r = c.put(x)
        res["put_s"] = time.perf_counter() - t
        k = c.scan(r, keep=True)
        res["scan_keep_correct"] = bool(np.array_equal(k.get(), np.cumsum(x, dtype=np.int32)))
        k.drop()
        res["reduce_correct"] = int(c.reduce(r, op="max")) == int(x.max())
        res["scan_keep_ms"] = median_ms(lambda: c.scan(r, keep=True).drop())
        res["reduce_max_ms"] = median_ms(lambda: c.reduce(r, op="max"))
        small = c.put(x[:1024].copy())
        res["scan_1k_ms"] = median_ms(lambda: c.scan(small), reps=200)
        res["reduce_1k_ms"] = median_ms(lambda: c.reduce(small), reps=200)
        small.drop()
        r.drop()

    async def run_async():
        async with gpuscan.AsyncClient(target, timeout=120) as c:
            r = await c.put(x[:1024].copy())
            times = []
            for _ in range(200):
                t = time.perf_counter()
                await c.scan(r)
                times.append((time.perf_counter() - t) * 1e3)
            await r.drop()
            return statistics.median(times)
    res["async_scan_1k_ms"] = asyncio.run(run_async())
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
