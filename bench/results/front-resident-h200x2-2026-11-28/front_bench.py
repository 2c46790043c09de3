"""Resident arrays behind a front of worker processes (one per GPU) against one process serving
both GPUs, in the same run: usage front_bench.py FRONT INPROC N OUT.json.
For each server: four N-element int32 arrays put (where each lands), then on each array a resident
scan (values back), a resident reduce, and the Pipeline compact(GT 0) -> scan -> reduce(MAX)
answering one value; medians of REPS wall-clock times (TCP loopback), each result checked against
numpy first; ListArrays; and a call on two arrays of different devices (the refusal's message)."""
import json
import statistics
import sys
import time

import numpy as np

import gpuscan

REPS = 15


def median_ms(f):
    times = []
    for _ in range(REPS):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def measure(target, n, rng):
    out = {"target": target}
    with gpuscan.Client(target, timeout=120, tenant="bench") as c:
        info = c.info()
        out["devices"] = str(info.get("devices") if isinstance(info, dict) else info)[:400]
        xs = [rng.integers(-1000, 1000, n, dtype=np.int32) for _ in range(4)]
        arrays = [c.put(x) for x in xs]
        out["placed"] = [a.device for a in arrays]
        rows = []
        for x, r in zip(xs, arrays):
            want_scan = np.cumsum(x, dtype=np.int32)
            assert np.array_equal(c.scan(r), want_scan)
            assert c.reduce(r, op="max") == x.max()
            kept = x[x > 0]
            want_chain = np.cumsum(kept, dtype=np.int32).max()

            def chain():
                p = c.pipeline()
                s = p.scan(p.compact(r, predicate=("gt", 0)))
                top = p.reduce(s, op="max")
                return p.run()[top]

            assert chain() == want_chain
            rows.append({"device": r.device,
                         "scan_ms": median_ms(lambda: c.scan(r)),
                         "reduce_ms": median_ms(lambda: c.reduce(r, op="max")),
                         "chain_ms": median_ms(chain)})
        out["rows"] = rows
        listed = c.arrays()
        out["listed"] = len(listed.arrays)
        devs = {a.device for a in arrays}
        if len(devs) > 1:
            a = arrays[0]
            b = next(r for r in arrays if r.device != a.device)
            try:
                p = c.pipeline()
                p.reduce(a, op="sum")
                p.reduce(b, op="sum")
                p.run()
                out["two_devices"] = "ran"
            except gpuscan.Error as e:
                out["two_devices"] = f"{type(e).__name__}: {e}"
        for a in arrays:
            a.drop()
    return out


def main():
    front, inproc, n, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rng = np.random.default_rng(56)
    result = {"n": n, "front": measure(front, n, rng), "inproc": measure(inproc, n, rng)}
    for key in ("scan_ms", "reduce_ms", "chain_ms"):
        f = statistics.median(r[key] for r in result["front"]["rows"])
        i = statistics.median(r[key] for r in result["inproc"]["rows"])
        result[key] = {"front": f, "inproc": i, "front_over_inproc": f / i}
    json.dump(result, open(path, "w"), indent=1)
    print(json.dumps({k: result[k] for k in ("scan_ms", "reduce_ms", "chain_ms")}, indent=1))
    for side in ("front", "inproc"):
        print(side, result[side]["placed"], "listed", result[side]["listed"], result[side].get("two_devices"))


if __name__ == "__main__":
    main()
