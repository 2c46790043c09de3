"""End-to-end throughput of the Python client: scan, reduce and compact of one array over one
stream (or K striped lanes with --lanes K), beside the Transport ceiling (the same gRPC path with no
compute) measured in the same run; and, when the server serves shared memory and its --shm-dir is
visible here, scan (into a shared out) and reduce of the same array in shared memory (rows
scan_shm, reduce_shm: no data on the connection; scan_shm_first: a new client's first call on
fresh arrays of its arena, scan_shm_fresh: its later calls, each on fresh arrays); and, right
after our scan, the same scan by the "do-it-yourself peer" (row peer_scan, issue 12): what a Python user builds without gpuscan, a plain
grpcio service of their own that takes the array in chunks of raw bytes and returns its running sum
(CuPy when it has a GPU, else numpy; the row's peer_backend says which), run by the bench as a
subprocess on this machine with the same chunk_bytes (gpuscan._peer); and, when CuPy sees a GPU and
the server serves device memory (--allow-device-ipc), the same array already on the GPU (rows
scan_device_ipc: a CuPy array scanned where it lies, into a preallocated CuPy out, median of the
calls end to end; cupy_cumsum: cupy.cumsum of it into a preallocated out, synchronized, beside it;
scan_device_ipc_1k and scan_rpc_1k: the latency, median microseconds, of a 1024-element scan through
the device path and through the streamed call of a numpy array).

    python -m gpuscan.bench --target HOST:PORT [--size 1GiB] [--dtype int32] [--repeat 3] [--json out.json]
    python -m gpuscan.bench --server build/bin/gpuscan-server --engine cpu --size 64MiB
    python -m gpuscan.bench --target HOST:PORT --lanes 4   # scan/reduce/compact over 4 connections
    python -m gpuscan.bench --target HOST:PORT --lanes 8 --native off   # scan/reduce on grpcio's path
    python -m gpuscan.bench --target HOST:PORT --shared on --shm-dir /mnt/gpuscan-shm   # a sidecar's view
    python -m gpuscan.bench --target HOST:PORT --dtype float32 --peer on   # the peer's float scan too
    python -m gpuscan.bench --target unix:/run/gpuscan.sock --device on   # GPU arrays (server: --allow-device-ipc)

GB/s = input bytes / wall seconds of the call as this client sees it (10^9 B/s), best of --repeat.
A server the bench starts itself serves shared memory from a temporary directory of /dev/shm, and
device memory (--allow-device-ipc) when its binary has the flag.
--peer auto (the default) runs the peer for integer dtypes only (its float cumsum is sequential, so
its bits differ from our deterministic tree's); --peer on also for floats (unverified), off never.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

import grpc
import numpy as np

import gpuscan
from gpuscan import _peer
from gpuscan.testing import ServerProcess, default_server_binary

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
          "kb": 1000, "mb": 10**6, "gb": 10**9}


def parse_size(s: str) -> int:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", s)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (e.g. 1GiB, 64MiB, 1000000)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def channel_options(pairs):
    out = []
    for kv in pairs:
        k, _, v = kv.partition("=")
        out.append((k, int(v) if v.lstrip("-").isdigit() else v))
    return out


def best_of(repeat, fn):
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), sorted(times)[len(times) // 2], result


def label(row) -> str:
    """A row's name in the printed tables: the peer's names its backend."""
    backend = row.get("peer_backend")
    return f"{row['operation']} (grpcio + {backend})" if backend else row["operation"]


def timed_row(name: str, times, unit_bytes: int, timing=None, verified=None, **extra) -> dict:
    """A row of separately timed calls (seconds each): best and median, GB/s of unit_bytes, and the
    server's Timing of the last call (timing: None for a call that is not ours)."""
    best, median = min(times), sorted(times)[len(times) // 2]
    row = {"operation": name, **extra, "bytes": unit_bytes, "best_s": best, "median_s": median,
           "gbps": unit_bytes / best / 1e9, "median_gbps": unit_bytes / median / 1e9, "calls": len(times),
           "server_total_us": timing.total_us if timing else None,
           "server_kernel_us": timing.kernel_us if timing else None}
    if verified is not None:
        row["verified"] = bool(verified)
    return row


def device_backend(info, mode: str):
    """(cupy, "") when the device rows run: mode not off, CuPy imports and runs on a GPU, and the
    server serves device memory; else (None, why not)."""
    if mode == "off":
        return None, "--device off"
    name, cp, why = _peer.pick_backend()
    if cp is None:
        return None, why
    if not info["limits"].get("device_ipc"):
        return None, (f"the server does not serve device memory (engine {info['engine']}; start it with "
                      "--allow-device-ipc)")
    return cp, ""


def device_rows(client: gpuscan.Client, cp, x: np.ndarray, scanned: np.ndarray, repeat: int, verify: bool,
                log=print) -> list:
    """The rows of x already on the GPU (a CuPy copy; see the module's doc). scanned: the streamed
    scan of x, which the device path's result equals bit for bit (the server's float sums too)."""
    calls, latency_calls, warm = max(repeat, 10), 200, 3
    xd = cp.asarray(x)
    out, mine = cp.empty_like(xd), cp.empty_like(xd)
    stream = cp.cuda.get_current_stream()

    def timed(fn, count):
        times = []
        for _ in range(count):
            stream.synchronize()  # the input written: only the call is timed
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return times

    def device_scan():
        client.scan(xd, out=out)

    def cumsum():
        cp.cumsum(xd, dtype=xd.dtype, out=mine)
        stream.synchronize()

    rows = []
    for name, fn, ours in (("scan_device_ipc", device_scan, True), ("cupy_cumsum", cumsum, False)):
        timed(fn, warm)
        times = timed(fn, calls)
        if not verify:
            verified = None
        elif ours:
            verified = cp.asnumpy(out).tobytes() == scanned.tobytes()
        else:  # cupy's float sums associate otherwise: integers only
            verified = bool(cp.array_equal(mine, out)) if x.dtype.kind in "iu" else None
        row = timed_row(name, times, x.nbytes, client.last_timing if ours else None, verified)
        row["median_ms"] = row["median_s"] * 1e3
        rows.append(row)
        log(f"  {name:<20} {row['median_gbps']:7.3f} GB/s median of {calls} ({row['median_ms']:.3f} ms)" +
            (f"  verified={row['verified']}" if "verified" in row else ""))
    # Latency: 1024 elements through the device path and through the streamed call.
    k = min(1024, len(x))
    xd_k, out_k, x_k, host_out = cp.ascontiguousarray(xd[:k]), cp.empty(k, xd.dtype), x[:k].copy(), np.empty(k, x.dtype)
    for name, fn, result in (("scan_device_ipc_1k", lambda: client.scan(xd_k, out=out_k), lambda: cp.asnumpy(out_k)),
                             ("scan_rpc_1k", lambda: client.scan(x_k, out=host_out), lambda: host_out)):
        timed(fn, 20)
        times = timed(fn, latency_calls)
        row = timed_row(name, times, x_k.nbytes, client.last_timing,
                        result().tobytes() == scanned[:k].tobytes() if verify else None)
        row["median_us"] = row["median_s"] * 1e6
        rows.append(row)
        log(f"  {name:<20} {row['median_us']:9.1f} us median of {latency_calls}" +
            (f"  verified={row['verified']}" if "verified" in row else ""))
    return rows


def run(client: gpuscan.Client, nbytes: int, dtype: np.dtype, repeat: int, verify: bool, log=print,
        transport_lanes: int = 1, shm_dir: Optional[str] = None, peer: Optional[_peer.PeerProcess] = None,
        cp=None):
    """The rows; shm_dir (this client's path of the server's --shm-dir): also the shared-memory rows;
    peer (a running gpuscan._peer): also the peer's scan of the same array (row peer_scan); cp (the
    cupy module, see device_backend): also the rows of the array on the GPU (device_rows)."""
    n = nbytes // dtype.itemsize
    nbytes = n * dtype.itemsize
    rng = np.random.default_rng(12345)
    log(f"generating {n} random {dtype} ({nbytes / 2**20:.1f} MiB)...")
    if dtype.kind == "f":
        x = rng.standard_normal(n, dtype=np.float64).astype(dtype) if dtype == np.float32 else rng.standard_normal(n)
    else:
        x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
    out = np.empty_like(x)
    client.scan(x[:4096])  # warm the channel up
    rows = []

    def add(name, fn, unit_bytes, check=None, ours=True, **extra):
        """One row: fn timed by best_of; ours=False (the peer's) has no server Timing."""
        best, median, result = best_of(repeat, fn)
        timing = client.last_timing if ours else None
        row = {"operation": name, **extra, "bytes": unit_bytes, "best_s": best, "median_s": median,
               "gbps": unit_bytes / best / 1e9, "median_gbps": unit_bytes / median / 1e9,
               "server_total_us": timing.total_us if timing else None,
               "server_kernel_us": timing.kernel_us if timing else None}
        if check is not None:
            row["verified"] = bool(check(result))
        rows.append(row)
        log(f"  {label(row):<20} {row['gbps']:7.3f} GB/s (median {row['median_gbps']:.3f})" +
            (f"  verified={row['verified']}" if "verified" in row else ""))
        return result

    log(f"target {client.target}, chunk_bytes {client.chunk_bytes}, lanes {client.lanes}, best of {repeat}")
    echo = add("transport_echo", lambda: client.transport(nbytes, echo=True), nbytes)
    add("transport_sink", lambda: client.transport(nbytes, echo=False), nbytes)
    if transport_lanes > 1:
        add(f"transport_echo_x{transport_lanes}", lambda: client.transport(nbytes, lanes=transport_lanes), nbytes)
    same_as_numpy = (lambda y: np.array_equal(y, np.cumsum(x, dtype=dtype))) if verify and dtype.kind != "f" else None
    scanned = add("scan", lambda: client.scan(x, out=out), nbytes, same_as_numpy)
    if peer is not None:
        with grpc.insecure_channel(peer.target, options=_peer.CHANNEL_OPTIONS) as ch:
            peer_out = np.empty_like(x)
            # warm up: the connection and, with cupy, its cumsum and carry kernels of this dtype (4 chunks)
            _peer.peer_scan(ch, x[:4096], peer_out[:4096], 1024 * dtype.itemsize)
            add("peer_scan", lambda: _peer.peer_scan(ch, x, peer_out, client.chunk_bytes), nbytes, same_as_numpy,
                ours=False, peer_backend=peer.backend)
            del peer_out
    total = add("reduce", lambda: client.reduce(x), nbytes,
                (lambda v: v == scanned[-1]) if verify and dtype.kind != "f" and n else None)
    add("compact_gt0", lambda: client.compact(x, predicate=("gt", 0)), nbytes,
        (lambda v: np.array_equal(v, x[x > 0])) if verify else None)
    if shm_dir is not None:
        # The same array in a region: the calls carry the header alone. Floats too are checked bit
        # for bit against the streamed results (the server's float sums do not depend on the path).
        with client.shared_array(n, dtype, dir=shm_dir) as a, client.shared_array(n, dtype, dir=shm_dir) as b:
            a[:] = x
            add("scan_shm", lambda: client.scan(a, out=b), nbytes,
                (lambda y: np.asarray(y).tobytes() == scanned.tobytes()) if verify else None)
            add("reduce_shm", lambda: client.reduce(a), nbytes,
                (lambda v: v.tobytes() == total.tobytes()) if verify else None)
        # Fresh arrays each call, as most callers have: carved out of the client's arena (whose
        # regions the server registered on their first call) and filled before the clock starts.
        # scan_shm_first: a new client's first call (its arena's region made, mapped and
        # registered); scan_shm_fresh: later calls of a warm client, each on new arrays.
        def fresh_calls(c, count):
            times, ok = [], True
            for _ in range(count):
                a2 = c.shared_array(n, dtype, dir=shm_dir, zero=False)
                b2 = c.shared_array(n, dtype, dir=shm_dir, zero=False)
                np.copyto(a2, x)
                t0 = time.perf_counter()
                c.scan(a2, out=b2)
                times.append(time.perf_counter() - t0)
                ok = ok and (not verify or np.asarray(b2).tobytes() == scanned.tobytes())
                del a2, b2
            return times, ok

        def fresh_row(name, times, ok, c):
            row = timed_row(name, times, nbytes, c.last_timing, ok if verify else None)
            rows.append(row)
            log(f"  {name:<20} {row['gbps']:7.3f} GB/s (median {row['median_gbps']:.3f})" +
                (f"  verified={row['verified']}" if verify else ""))

        with gpuscan.Client(client.target, chunk_bytes=client.chunk_bytes, shm_arena_bytes=4 * nbytes) as cold:
            fresh_row("scan_shm_first", *fresh_calls(cold, 1), cold)
            fresh_row("scan_shm_fresh", *fresh_calls(cold, max(repeat, 3)), cold)
    if cp is not None:
        rows += device_rows(client, cp, x, scanned, repeat, verify, log)
    del echo
    ceiling = rows[0]["gbps"]
    for r in rows:
        r["pct_of_transport_echo"] = 100.0 * r["gbps"] / ceiling if ceiling else 0.0
    return rows


def _help_text(binary: str) -> str:
    """The server binary's --help (to see which flags it has), or "" when it does not run."""
    try:
        return subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def shared_dir(info, mode: str, local: Optional[str]) -> Optional[str]:
    """This client's path of the server's --shm-dir, or None: no shared-memory rows."""
    limits = info["limits"]
    if mode == "off" or not limits.get("shared_memory"):
        return None
    d = local or limits.get("shm_dir", "")
    return d if d and os.path.isdir(d) else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", help="server address (default: start --server on a free port)")
    p.add_argument("--server", help="gpuscan-server binary to start when no --target (default: $GPUSCAN_SERVER_BIN or build/bin/gpuscan-server)")
    p.add_argument("--engine", default="auto", help="engine of the started server (auto, cuda, cpu)")
    p.add_argument("--size", type=parse_size, default=1 << 30, help="input bytes (default 1GiB)")
    p.add_argument("--dtype", default="int32")
    p.add_argument("--chunk-bytes", type=parse_size, default=1 << 20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--lanes", type=int, default=1,
                   help="scan/reduce/compact stripe each array over this many calls on as many connections "
                        "(capped by the server's max_lanes; default 1: one call)")
    p.add_argument("--transport-lanes", type=int, default=0,
                   help="also measure the echo ceiling over this many concurrent connections (default: --lanes)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="grpc channel argument, e.g. grpc.http2.max_frame_size=4194304 (repeatable)")
    p.add_argument("--shared", choices=("auto", "on", "off"), default="auto",
                   help="shared-memory rows: auto (when the server serves shared memory and its --shm-dir "
                        "is visible here), on (fail otherwise), off")
    p.add_argument("--shm-dir", help="where the server's --shm-dir is mounted here (default: its own path)")
    p.add_argument("--peer", choices=("auto", "on", "off"), default="auto",
                   help="the do-it-yourself peer's scan (row peer_scan: a grpcio + numpy/cupy service the bench "
                        "starts here): auto (integer dtypes), on (floats too, unverified), off")
    p.add_argument("--device", nargs="?", const="on", choices=("auto", "on", "off"), default="auto",
                   help="rows of the array already on the GPU (CuPy; scan_device_ipc, cupy_cumsum, scan_device_ipc_1k, "
                        "scan_rpc_1k): auto (when CuPy sees a GPU and the server serves device memory: "
                        "--allow-device-ipc), on (the same as --device alone: fail otherwise), off")
    p.add_argument("--no-verify", action="store_true", help="skip checking results against numpy")
    p.add_argument("--native", choices=("auto", "on", "off"), default="auto",
                   help="scan, reduce and compact through the C++ client (Client's native): auto (where its "
                        "library loads), on (fail otherwise), off (grpcio)")
    p.add_argument("--json", help="write the rows and the setup as JSON here")
    a = p.parse_args(argv)
    dtype = np.dtype(a.dtype)
    server = None
    own_shm = None
    peer = None
    target = a.target
    if not target:
        binary = a.server or default_server_binary()
        if not binary:
            p.error("give --target, or --server (no gpuscan-server found)")
        if a.shared != "off" and os.path.isdir("/dev/shm"):
            own_shm = tempfile.mkdtemp(prefix="gpuscan-bench-", dir="/dev/shm")
        ipc = a.device != "off" and "--allow-device-ipc" in _help_text(binary)
        server = ServerProcess(binary, engine=a.engine, shm_dir=own_shm, extra=["--allow-device-ipc"] if ipc else [])
        target = server.target
    try:
        if a.peer == "on" or (a.peer == "auto" and dtype.kind in "iu"):
            peer = _peer.PeerProcess()
        try:
            c = gpuscan.Client(target, chunk_bytes=a.chunk_bytes, lanes=a.lanes, options=channel_options(a.option),
                               native={"auto": None, "on": True, "off": False}[a.native])
        except ValueError as e:
            p.error(str(e))
        with c:
            info = c.info()
            print(f"server {info['version']} engine {info['engine']} "
                  f"{', '.join(d['name'] for d in info['devices']) or ''}".rstrip())
            shm_dir = shared_dir(info, a.shared, a.shm_dir)
            if shm_dir is None and a.shared == "on":
                lim = info["limits"]
                p.error(f"no shared memory: the server's limits say shared_memory={lim.get('shared_memory')} "
                        f"shm_dir={lim.get('shm_dir')!r} (start it with --shm-dir; pass --shm-dir here when "
                        "it is mounted elsewhere)")
            cp, why_not_device = device_backend(info, a.device)
            if cp is None and a.device == "on":
                p.error(f"no device rows: {why_not_device}")
            rows = run(c, a.size, dtype, a.repeat, not a.no_verify, transport_lanes=a.transport_lanes or a.lanes,
                       shm_dir=shm_dir, peer=peer, cp=cp)
    finally:
        if peer:
            peer.stop()
        if server:
            server.stop()
        if own_shm:
            shutil.rmtree(own_shm, ignore_errors=True)
    width = max(20, *(len(label(r)) for r in rows))
    print(f"\n{'operation':<{width}} {'GB/s':>8} {'% of echo':>10}")
    for r in rows:
        print(f"{label(r):<{width}} {r['gbps']:8.3f} {r['pct_of_transport_echo']:9.1f}%")
    by_name = {r["operation"]: r for r in rows}
    if "peer_scan" in by_name:
        print(f"scan / peer_scan: {by_name['scan']['gbps'] / by_name['peer_scan']['gbps']:.2f}x")
    if "scan_device_ipc" in by_name:
        d, mine = by_name["scan_device_ipc"], by_name["cupy_cumsum"]
        print(f"\non the GPU (medians): scan_device_ipc {d['median_gbps']:.2f} GB/s ({d['median_ms']:.3f} ms), "
              f"cupy_cumsum {mine['median_gbps']:.2f} GB/s ({mine['median_ms']:.3f} ms): "
              f"{mine['median_s'] / d['median_s']:.2f}x of cupy's speed; 1024 elements: device path "
              f"{by_name['scan_device_ipc_1k']['median_us']:.1f} us, "
              f"streamed {by_name['scan_rpc_1k']['median_us']:.1f} us")
    if a.json:
        import google.protobuf
        setup = {"target": target, "size_bytes": a.size, "dtype": str(dtype), "chunk_bytes": a.chunk_bytes,
                 "repeat": a.repeat, "lanes": a.lanes, "native": c._native is not None, "shm_dir": shm_dir,
                 "device_rows": cp is not None, "device_rows_why_not": why_not_device,
                 "channel_options": a.option, "peer": a.peer, "peer_backend": peer.backend if peer else None,
                 "peer_backend_detail": peer.backend_detail if peer else None, "server": info,
                 "python": platform.python_version(),
                 "grpcio": grpc.__version__, "protobuf": google.protobuf.__version__, "numpy": np.__version__,
                 "host": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with open(a.json, "w") as f:
            json.dump({"setup": setup, "rows": rows}, f, indent=2)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
