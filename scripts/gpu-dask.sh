#!/usr/bin/env bash
# Issue 46's figures on a machine with two GPUs: gpuscan.dask against dask's own numpy on one
# dask cluster, in one run. Two gpuscan servers (one per GPU, CUDA engine, shared memory from a
# directory of /dev/shm), a distributed LocalCluster of two worker processes, an int64 dask array
# of DASK_GIB GiB persisted on the workers; cumsum, sum and histogram through gpuscan.dask with
# both servers (worker i -> GPU i) and with one (both workers -> GPU 0), and dask's own
# cumsum(axis=0), sum and histogram on the same array and cluster; every result checked against
# dask's. Prints a table of GB/s (input bytes / best time) and the speedups.
#   here:    scripts/gpu-dask.sh pack   builds gpuscan-server and the Python package (BUILD_DIR,
#            default build; DASK_NO_BUILD=1 packs what is built), packs them with the libraries
#            they load into .gpu-dask/gpu.tar.xz, and the carried Python 3.11 with dask
#            (scripts/pack-dask-python.sh; the GPU machine's Python has no dask) into
#            .gpu-dask/python.tar.xz (kept when DASK_KEEP_PYTHON=1 and it exists)
#   device:  run(command="bash scripts/gpu-dask.sh", carry=[".gpu-dask"], kind="nvidia-h100-x2", timeout_s=590)
#   here:    DASK_ENGINE=cpu DASK_GIB=0.25 DASK_THREADS=1 bash scripts/gpu-dask.sh   (CPU servers, same steps)
# DASK_GIB (8), DASK_CHUNK_MIB (128), DASK_THREADS (threads per worker, 8), DASK_REPS (timed runs
# after one warm-up, 3), DASK_BINS (256), DASK_ENGINE (cuda; cpu), DASK_PYTHON (an interpreter
# with dask to use instead of the carried one), DASK_PORT (50801: it and the next).
# Under $OUT: dask.txt (the table), dask.json, device.txt, dask-logs.tgz (servers' and the run's logs).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = pack ]; then
  set -e
  build=${BUILD_DIR:-build}
  cmake -S . -B "$build" -DGPUSCAN_ENABLE_CUDA=ON >/dev/null  # a tree `make` configured without a GPU has none
  [ -n "${DASK_NO_BUILD:-}" ] || cmake --build "$build" -j"$(nproc)" --target gpuscan-server gpuscan_python
  stage=.gpu-dask/stage
  rm -rf "$stage" && mkdir -p "$stage/.gpu-bin" "$stage/.gpu-py" "$stage/.gpu-rt"
  strip -o "$stage/.gpu-bin/gpuscan-server" "$build/bin/gpuscan-server"
  tar -C "$build/python/pkg" --exclude=__pycache__ -cf - gpuscan | tar -C "$stage/.gpu-py" -xf -
  cp python/gpuscan/dask.py "$stage/.gpu-py/gpuscan/"  # as it is here (DASK_NO_BUILD: a build from before it)
  bins=("$stage/.gpu-bin/gpuscan-server" "$stage/.gpu-py/gpuscan/libgpuscan_capi.so")
  if [ -x ../shared/device/bundle-libs.sh ]; then
    ../shared/device/bundle-libs.sh "$stage/.gpu-rt" "${bins[@]}"
  else  # the same: every library but the C/C++ runtime
    for b in "${bins[@]}"; do ldd "$b" | awk '/=> \//{print $3}'; done | sort -u \
      | grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux-x86-64|libpthread|libdl|librt|libcuda)\.so' \
      | while read -r lib; do cp -Lu "$lib" "$stage/.gpu-rt/"; done
  fi
  # One xz stream with a dictionary larger than the server: its device code compresses well so.
  tar -C "$stage" -cf - .gpu-bin .gpu-rt .gpu-py | xz -T1 --lzma2=preset=6,dict=256MiB >.gpu-dask/gpu.tar.xz
  rm -rf "$stage"
  if [ -z "${DASK_KEEP_PYTHON:-}" ] || [ ! -f .gpu-dask/python.tar.xz ]; then
    bash scripts/pack-dask-python.sh .gpu-dask/python.tar.xz
  fi
  du -ch .gpu-dask/*.tar.xz | awk '{print "packed " $1 " " $2}'
  echo 'Device call: run(command="bash scripts/gpu-dask.sh", carry=[".gpu-dask"], kind="nvidia-h100-x2", timeout_s=590)'
  exit 0
fi

GPU_PACK=${GPU_PACK:-.gpu-dask/gpu.tar.xz} GPU_LOGS_TGZ=dask-logs.tgz source "$(dirname "$0")/gpu-common.sh"
pids=() shm=""
# Stop the servers before gpu-common's EXIT trap packs the logs.
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; [ -n "$shm" ] && rm -rf "$shm"; tar -czf "$final/dask-logs.tgz" -C "$out" .' EXIT

# The Python: DASK_PYTHON, else the carried one (unpacked again whenever the pack changed).
if [ -n "${DASK_PYTHON:-}" ]; then
  py=$DASK_PYTHON
else
  pack=.gpu-dask/python.tar.xz
  if [ -f "$pack" ]; then
    sum=$(cksum <"$pack")
    if [ "$(cat .gpu-pyb/.pack-sum 2>/dev/null)" != "$sum" ]; then
      rm -rf .gpu-pyb && mkdir -p .gpu-pyb && xz -dc "$pack" | tar -C .gpu-pyb -xf - && echo "$sum" >.gpu-pyb/.pack-sum
    fi
  fi
  py=$PWD/.gpu-pyb/pyb/bin/python3
  [ -x "$py" ] || py=/usr/bin/python3
fi
export LD_LIBRARY_PATH=$R PYTHONPATH=$PWD/.gpu-py PYTHONUNBUFFERED=1
"$py" -c 'import sys, dask, distributed, numpy, grpc, gpuscan.dask; print("python", sys.version.split()[0], sys.executable,
"dask", dask.__version__, "distributed", distributed.__version__, "numpy", numpy.__version__)' || {
  echo "no Python with dask and gpuscan: run scripts/gpu-dask.sh pack here and carry .gpu-dask"; exit 1; }

engine=${DASK_ENGINE:-cuda}
port=${DASK_PORT:-50801}
shm=$(mktemp -d /dev/shm/gpuscan-dask-XXXXXX 2>/dev/null || mktemp -d)
df -h "$shm" | tail -1 | awk '{print "shared memory in '"$shm"': " $4 " free of " $2}'
step "two gpuscan servers ($engine engine), one per GPU"
# start NAME PORT DEVICE: a server on 127.0.0.1:PORT (the CUDA engine on that device alone), waited for.
start() {
  local name=$1 p=$2 dev=$3 flags=()
  [ "$engine" = cuda ] && flags=(--device "$dev")
  $B/gpuscan-server --address 127.0.0.1:$p --engine "$engine" "${flags[@]}" --shm-dir "$shm" \
    >"$out/server_$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q "listening on" "$out/server_$name.log" && { grep -m1 "listening on" "$out/server_$name.log"; return; }
    sleep 0.2
  done
  echo "server $name did not start"; cat "$out/server_$name.log"; exit 1
}
start gpu0 "$port" 0
start gpu1 "$((port + 1))" 1

step "dask: ${DASK_GIB:-8} GiB int64, LocalCluster of 2 workers x ${DASK_THREADS:-8} threads"
cat >"$out/dask_bench.py" <<'PY'
"""The timed run of scripts/gpu-dask.sh: argv = target0 target1 json_path table_path."""
import json, os, statistics, subprocess, sys, time

import numpy as np
import dask.array as da
import distributed

import gpuscan.dask as gd


def env(name, default, kind=float):
    return kind(os.environ.get(name, default))


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
            best = min(times)
            rows.append({"op": op, "backend": backend, "seconds": times, "best_s": best,
                         "median_s": statistics.median(times), "gbps": n * 8 / best / 1e9})
            print(f"  {op:<10} {backend:<32} {n * 8 / best / 1e9:8.2f} GB/s  (best {best:.3f} s, "
                  f"median {statistics.median(times):.3f} s)", flush=True)
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
    lines = [f"{'op':<10} {'backend':<32} {'GB/s':>8} {'best s':>8} {'median s':>9}"]
    for r in rows:
        lines.append(f"{r['op']:<10} {r['backend']:<32} {r['gbps']:8.2f} {r['best_s']:8.3f} {r['median_s']:9.3f}")
    for op in ("cumsum", "sum"):
        shm2, shm1 = best[(op, "gpuscan, 2 servers, shm blocks")], best[(op, "gpuscan, 1 server, shm blocks")]
        speed[op].update({"shm_two_over_one_server": shm2 / shm1,
                          "shm_two_servers_over_dask_numpy": shm2 / best[(op, "dask numpy")]})
    for op, s in speed.items():
        lines.append(f"{op}: 2 servers / 1 server {s['two_over_one_server']:.2f}x; "
                     f"2 servers / dask numpy {s['two_servers_over_dask_numpy']:.2f}x" +
                     (f"; blocks in shared memory: 2 servers / 1 server {s['shm_two_over_one_server']:.2f}x, "
                      f"2 servers / dask numpy {s['shm_two_servers_over_dask_numpy']:.2f}x"
                      if "shm_two_over_one_server" in s else ""))
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
PY
timeout "${DASK_TIMEOUT:-540}" "$py" "$out/dask_bench.py" "127.0.0.1:$port" "127.0.0.1:$((port + 1))" \
  "$final/dask.json" "$final/dask.txt" 2>&1 | grep -v -E "DeprecationWarning|make_current|^  self\.|^$" | tee "$out/dask_run.log"
rc=${PIPESTATUS[0]}
echo "exit $rc"
exit "$rc"
