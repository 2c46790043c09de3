"""The timed run of `scripts/gpu run dask` (scripts/gpu.d/dask.sh): argv = target0 target1 json_path table_path."""
import json, os, statistics, subprocess, sys, time

import numpy as np
import dask.array as da
import distributed

import gpuscan.dask as gd


def env(name, default, kind=float):
    return kind(os.environ.get(name, default))


def per_block_sum(p):
    """gd.reduce(p) as gpuscan.dask built it before its one task (the "persisted" sum row since
    the row began): a task a block, each block reduced where it lies, and a tree of fan-in
    SPLIT_EVERY combining the values."""
    from dask.base import tokenize
    from gpuscan.dask import _blocks, _graphs, _resident_blocks
    src = p.blocks_array("sum")
    name = f"gpuscan-reduce-per-block-{tokenize(src)}"
    dsk = {(f"{name}-part", i): (_resident_blocks.reduce_block, k, "sum") for i, k in enumerate(src.__dask_keys__())}
    _graphs._tree(dsk, f"{name}-tree", list(dsk), _blocks.reduce_combine, (name,), _blocks.reduce_final, "sum",
                  src.dtype)
    return _graphs._array(name, dsk, [src], (), src.dtype)


def main():
    t0_target, t1_target, json_path, table_path = sys.argv[1:5]
    gib, chunk_mib = env("DASK_GIB", 8), env("DASK_CHUNK_MIB", 128)
    threads, reps, bins = env("DASK_THREADS", 8, int), env("DASK_REPS", 3, int), env("DASK_BINS", 256, int)
    n = int(gib * 2**30) // 8
    chunk = max(1, int(chunk_mib * 2**20) // 8)
    lo, hi = -1000, 1000
    rows, checks = [], {}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=threads, processes=True, memory_limit=0,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as dc:
        t = time.perf_counter()
        x = da.random.RandomState(46).randint(lo, hi, size=n, chunks=chunk, dtype=np.int64).persist()
        distributed.wait(x)
        blocks = {w: len(keys) for w, keys in dc.has_what().items()}
        print(f"array: {n} int64 ({n * 8 / 2**30:.2f} GiB) in {x.numblocks[0]} blocks of {chunk} elements, "
              f"made and persisted in {time.perf_counter() - t:.1f} s; blocks per worker {sorted(blocks.values())}")

        def forget(arr):
            """Wait until the scheduler has forgotten arr's keys, so the next run of the same graph
            computes again instead of finding them in memory."""
            name = arr.name.split("-")[-1]
            for _ in range(600):
                if not dc.run_on_scheduler(lambda dask_scheduler: any(name in str(k) for k in dask_scheduler.tasks)):
                    return
                time.sleep(0.05)
            raise RuntimeError(f"keys of {arr.name} still on the scheduler")

        def record(op, backend, times):
            best = min(times)
            rows.append({"op": op, "backend": backend, "seconds": times, "best_s": best,
                         "median_s": statistics.median(times), "gbps": n * 8 / best / 1e9})
            print(f"  {op:<10} {backend:<38} {n * 8 / best / 1e9:8.2f} GB/s  (best {best:.3f} s, "
                  f"median {statistics.median(times):.3f} s)", flush=True)

        def measure(op, backend, make, persist):
            """One warm-up run, then `reps` timed ones; returns the last result (persisted or computed)."""
            times, result = [], None
            for r in range(reps + 1):
                arr = make()
                t = time.perf_counter()
                if persist:
                    res = arr.persist()
                    distributed.wait(res)
                else:
                    res = arr.compute()
                dt = time.perf_counter() - t
                if r:
                    times.append(dt)
                if r < reps:
                    del res
                    forget(arr)
                else:
                    result = res
            record(op, backend, times)
            return result

        def measure_kept(op, backend, run, release=True):
            """As measure, for a call that runs at once and leaves its result on the servers (a
            PersistedArray: gd.cumsum(p, keep=True)): each run's result released after it (not
            timed) but the last one's, which is returned. release=False: a value (p.sum())."""
            times, result = [], None
            for r in range(reps + 1):
                t = time.perf_counter()
                res = run()
                dt = time.perf_counter() - t
                if r:
                    times.append(dt)
                if r < reps:
                    if release:
                        res.release()
                else:
                    result = res
            record(op, backend, times)
            return result

        print("dask's own (numpy in each block):")
        ref_cumsum = measure("cumsum", "dask numpy", lambda: x.cumsum(axis=0), True)
        ref_sum = measure("sum", "dask numpy", lambda: x.sum(), False)
        ref_hist = measure("histogram", "dask numpy", lambda: da.histogram(x, bins, range=(lo, hi))[0], False)
        for label, targets in (("gpuscan, 2 servers", [t0_target, t1_target]), ("gpuscan, 1 server", [t0_target])):
            print(f"{label}: {gd.register(dc, targets, timeout=600)}")
            y = measure("cumsum", label, lambda: gd.cumsum(x), True)
            s = measure("sum", label, lambda: gd.reduce(x), False)
            h = measure("histogram", label, lambda: gd.histogram(x, bins, range=(lo, hi))[0], False)
            checks[label] = {"cumsum": bool(da.all(y == ref_cumsum).compute()), "sum": bool(s == ref_sum),
                             "histogram": bool(np.array_equal(h, ref_hist))}
            del y
            # The same array with its blocks copied once into the workers' arenas (in_shared_memory):
            # calls then send each block to the server with no copy in.
            t = time.perf_counter()
            xs = gd.in_shared_memory(x).persist()
            distributed.wait(xs)
            print(f"  blocks copied into the workers' arenas in {time.perf_counter() - t:.2f} s", flush=True)
            ys = measure("cumsum", label + ", shm blocks", lambda: gd.cumsum(xs), True)
            ss = measure("sum", label + ", shm blocks", lambda: gd.reduce(xs), False)
            checks[label + ", shm blocks"] = {"cumsum": bool(da.all(ys == ref_cumsum).compute()),
                                              "sum": bool(ss == ref_sum)}
            del xs, ys
            # The blocks kept on the servers (gd.persist): a call sends its block's id, not its bytes.
            t = time.perf_counter()
            with gd.persist(x, dask_client=dc) as p:
                print(f"  blocks put on the servers in {time.perf_counter() - t:.2f} s", flush=True)
                yp = measure("cumsum", label + ", persisted", lambda: gd.cumsum(p), True)
                # "kept": keep=True, the result left on the servers (one task: the blocks' totals, then
                # each block scanned with its carry and kept), released after each run. "one task":
                # gd.reduce(p), every block reduced by one task; "persisted": the graph of a task a block.
                yk = measure_kept("cumsum", label + ", kept", lambda: gd.cumsum(p, keep=True))
                sp = measure("sum", label + ", persisted", lambda: per_block_sum(p), False)
                s1 = measure("sum", label + ", one task", lambda: gd.reduce(p), False)
                # "from the driver": p.sum(), the servers called from this process, no dask task.
                sd = measure_kept("sum", label + ", from the driver", lambda: p.sum(), release=False)
                hp = measure("histogram", label + ", persisted", lambda: gd.histogram(p, bins, range=(lo, hi))[0],
                             False)
                checks[label + ", persisted"] = {"cumsum": bool(da.all(yp == ref_cumsum).compute()),
                                                 "sum": bool(sp == ref_sum), "histogram": bool(np.array_equal(hp, ref_hist))}
                checks[label + ", kept"] = {"cumsum": bool(da.all(yk.to_dask() == ref_cumsum).compute())}
                checks[label + ", one task"] = {"sum": bool(s1 == ref_sum)}
                checks[label + ", from the driver"] = {"sum": bool(sd == ref_sum)}
                yk.release()
                del yp, yk
            info = gd.worker_info(dc)
            print(f"  checks against dask's: {checks[label]}; workers: "
                  + "; ".join(f"{i['target']} shared memory {i['shared_memory']} ({i['calls']} calls)"
                              for i in info.values()))
            checks[label]["workers"] = info
    best = {(r["op"], r["backend"]): r["gbps"] for r in rows}
    speed = {}
    for op in ("cumsum", "sum", "histogram"):
        speed[op] = {"two_over_one_server": best[(op, "gpuscan, 2 servers")] / best[(op, "gpuscan, 1 server")],
                     "two_servers_over_dask_numpy": best[(op, "gpuscan, 2 servers")] / best[(op, "dask numpy")]}
    try:
        device = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    except OSError:
        device = ""
    lines = [f"{'op':<10} {'backend':<38} {'GB/s':>8} {'best s':>8} {'median s':>9}"]
    for r in rows:
        lines.append(f"{r['op']:<10} {r['backend']:<38} {r['gbps']:8.2f} {r['best_s']:8.3f} {r['median_s']:9.3f}")
    for op in ("cumsum", "sum", "histogram"):
        per2, per1 = best[(op, "gpuscan, 2 servers, persisted")], best[(op, "gpuscan, 1 server, persisted")]
        speed[op].update({"persisted_two_over_one_server": per2 / per1,
                          "persisted_two_servers_over_dask_numpy": per2 / best[(op, "dask numpy")]})
    for op, kind in (("cumsum", "kept"), ("sum", "one task"), ("sum", "from the driver")):
        k2, k1 = best[(op, f"gpuscan, 2 servers, {kind}")], best[(op, f"gpuscan, 1 server, {kind}")]
        key = kind.replace(" ", "_")
        speed[op].update({f"persisted_{key}_two_over_one_server": k2 / k1,
                          f"persisted_{key}_two_servers_over_dask_numpy": k2 / best[(op, "dask numpy")]})
    for op in ("cumsum", "sum"):
        shm2, shm1 = best[(op, "gpuscan, 2 servers, shm blocks")], best[(op, "gpuscan, 1 server, shm blocks")]
        speed[op].update({"shm_two_over_one_server": shm2 / shm1,
                          "shm_two_servers_over_dask_numpy": shm2 / best[(op, "dask numpy")]})
    for op, s in speed.items():
        lines.append(f"{op}: 2 servers / 1 server {s['two_over_one_server']:.2f}x; "
                     f"2 servers / dask numpy {s['two_servers_over_dask_numpy']:.2f}x" +
                     (f"; blocks in shared memory: 2 servers / 1 server {s['shm_two_over_one_server']:.2f}x, "
                      f"2 servers / dask numpy {s['shm_two_servers_over_dask_numpy']:.2f}x"
                      if "shm_two_over_one_server" in s else "") +
                     f"; persisted: 2 servers / dask numpy {s['persisted_two_servers_over_dask_numpy']:.2f}x" +
                     "".join(f"; {kind}: 2 servers / dask numpy {s[key]:.2f}x" for kind, key in
                             (("kept", "persisted_kept_two_servers_over_dask_numpy"),
                              ("one task", "persisted_one_task_two_servers_over_dask_numpy"),
                              ("from the driver", "persisted_from_the_driver_two_servers_over_dask_numpy"))
                             if key in s))
    ok = all(v for c in checks.values() for k, v in c.items() if k != "workers")
    lines.append("every result equals dask's own" if ok else f"MISMATCH against dask's own: {checks}")
    table = "\n".join(lines)
    print("\n" + table)
    with open(table_path, "w") as f:
        f.write(table + "\n")
    with open(json_path, "w") as f:
        json.dump({"device": device or "cpu", "engine": os.environ.get("DASK_ENGINE", "cuda"), "gib": gib,
                   "elements": n, "chunk_elements": chunk, "workers": 2, "threads_per_worker": threads,
                   "reps": reps, "bins": bins, "python": sys.version.split()[0], "rows": rows, "speedups": speed,
                   "checks": checks}, f, indent=1, default=str)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
