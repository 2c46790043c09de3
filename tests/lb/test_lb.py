"""Replicas behind a real gRPC load balancer, each shipped one in turn (HAProxy,
deploy/haproxy/haproxy.cfg; nginx, deploy/nginx/nginx.conf): three CPU servers on loopback and
the balancer in front of them.

- An array's striped lanes reach one replica through the balancer (every client: Python's grpcio
  and native paths, the CLI), because each lane carries the `gpuscan-array-id` header the
  balancer hashes on; stripped of the header, the same lanes are split and fail (the control).
- Calls without lanes spread over the replicas (each replica's own metrics).
- A replica SIGKILLed under load, clients retrying: no wrong result, failed calls counted and
  bounded; HAProxy's gRPC health check (nginx: its failed connections) takes it out, and it is
  back in once restarted."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import balancer  # noqa: E402

import gpuscan  # noqa: E402
from gpuscan import _chunking  # noqa: E402
from gpuscan.testing import ServerProcess, default_server_binary  # noqa: E402

REPLICAS = 3
LANE_WAIT_MS = 1500  # lanes split over replicas fail after this: keeps the control short
CHUNK = 4096  # bytes: a 100k-element array crosses ~100 chunk and lane boundaries


def _cli():
    b = os.environ.get("GPUSCAN_CLI") or os.path.join(os.path.dirname(default_server_binary() or ""), "gpuscan")
    return b if os.access(b, os.X_OK) else None


class Replica:
    """One server with its metrics endpoint; restart() brings it back at the same addresses."""

    def __init__(self, binary: str):
        self.binary = binary
        # The server picks its gRPC port (one picked here could be taken, as another test's
        # ephemeral port, before the server binds it); the metrics port is picked here, so a start
        # that finds it taken tries another.
        self.port = 0
        self.proc = None
        for attempt in range(3):
            self.metrics = f"127.0.0.1:{balancer.free_port()}"
            try:
                self.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self.port = int(self.proc.target.rsplit(":", 1)[1])  # restart() comes back at the same one

    def start(self):
        self.proc = ServerProcess(self.binary, port=self.port,
                                  extra=["--metrics-address", self.metrics, "--lane-wait-ms", str(LANE_WAIT_MS)])

    def requests(self) -> float:
        return sum(balancer.requests_by_op(balancer.scrape(self.metrics)).values())


@pytest.fixture(scope="module", params=["haproxy", "nginx"])
def farm(request):
    kind = request.param
    binary = default_server_binary()
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("no gpuscan-server binary: set GPUSCAN_SERVER_BIN or build build/bin/gpuscan-server")
    if not balancer.find_binary(kind):
        pytest.skip(f"no {kind} (scripts/install-deps.sh installs it)")
    replicas = []
    lb = None
    try:
        for _ in range(REPLICAS):
            replicas.append(Replica(binary))
        lb = balancer.Balancer([f"127.0.0.1:{r.port}" for r in replicas], kind=kind)
        yield lb, replicas
    finally:
        if lb is not None:
            lb.stop()
        for r in replicas:
            r.proc.stop()


def _arrays(rng, count):
    for i in range(count):
        n = int(rng.integers(60_000, 140_000))
        if i % 2:
            yield rng.standard_normal(n)
        else:
            yield rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)


def test_lanes_through_the_balancer_reach_one_replica(farm):
    lb, replicas = farm
    rng = np.random.default_rng()
    before = [r.requests() for r in replicas]
    arrays = 0
    for native in (False, None):  # grpcio's path, then the native one (the C++ client) where it loads
        with gpuscan.Client(lb.target, chunk_bytes=CHUNK, lanes=4, timeout=30, native=native) as c:
            if native is None and c._native is None:
                continue  # the C API library is not built here: the grpcio path covered it
            for x in _arrays(rng, 6):
                # Each result against numpy and against one plain call through the balancer: the
                # striped call's bits must be the single call's.
                got = c.scan(x)
                one = c.scan(x, lanes=1)
                assert got.tobytes() == one.tobytes()
                if x.dtype == np.int32:
                    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int32))
                    assert c.reduce(x, op="max") == x.max()
                    kept = c.compact(x, where=x % 3 == 0)
                    np.testing.assert_array_equal(kept, x[x % 3 == 0])
                else:
                    np.testing.assert_allclose(got, np.cumsum(x), rtol=1e-9, atol=1e-9)
                arrays += 1
    after = [r.requests() for r in replicas]
    served = [a - b for a, b in zip(after, before)]
    assert sum(served) > 0 and arrays >= 6


def test_megabyte_chunks_through_the_balancer(farm):
    """Default 1 MiB chunks, results streaming back during the upload: the balancer's HTTP/2
    window and buffers must not stall a bidi stream (an 8 MiB window over 256 KiB buffers did)."""
    lb, _ = farm
    x = np.random.default_rng().integers(-2**31, 2**31 - 1, 6 << 20, dtype=np.int32)  # 24 MiB
    ref = np.cumsum(x, dtype=np.int32)
    with gpuscan.Client(lb.target, timeout=60, native=False) as c:
        for lanes in (1, 3):
            assert c.scan(x, lanes=lanes).tobytes() == ref.tobytes()


def test_cli_lanes_through_the_balancer(farm, tmp_path):
    lb, _ = farm
    cli = _cli()
    if cli is None:
        pytest.skip("no gpuscan CLI binary next to the server")
    rng = np.random.default_rng()
    for k in range(4):
        x = rng.integers(-1000, 1000, int(rng.integers(200_000, 300_000)), dtype=np.int64)
        src, dst = tmp_path / f"x{k}.npy", tmp_path / f"y{k}.npy"
        np.save(src, x)
        r = subprocess.run([cli, "--server", lb.target, "--chunk-bytes", str(CHUNK * 4), "scan", "-i", str(src),
                            "-o", str(dst), "--lanes", "4"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(np.load(dst), np.cumsum(x))


def test_lanes_without_the_header_are_split_and_fail(farm, monkeypatch):
    """The control: the same lanes with no array-id metadata are balanced one by one and cannot
    be joined, so the header is what keeps them together."""
    lb, _ = farm
    monkeypatch.setattr(_chunking, "array_id_metadata", lambda array_id: ())
    x = np.random.default_rng().integers(-2**31, 2**31 - 1, 100_000, dtype=np.int32)
    failed = 0
    with gpuscan.Client(lb.target, chunk_bytes=CHUNK, lanes=3, timeout=20, native=False) as c:
        for _ in range(2):
            try:
                got = c.scan(x)
            except gpuscan.Error:
                failed += 1
            else:  # all three lanes happened to land on one replica: the answer must still be right
                np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int32))
    assert failed >= 1


def test_plain_calls_spread_over_the_replicas(farm):
    lb, replicas = farm
    before = [r.requests() for r in replicas]
    x = np.random.default_rng().integers(-100, 100, 5000, dtype=np.int64)
    with gpuscan.Client(lb.target, timeout=30) as c:
        for _ in range(30):
            np.testing.assert_array_equal(c.scan(x, lanes=1), np.cumsum(x))
    served = [a - b for a, b in zip((r.requests() for r in replicas), before)]
    assert sum(served) >= 30
    assert all(s >= 3 for s in served), f"calls per replica {served}: not spread"


def test_replica_killed_under_load(farm):
    lb, replicas = farm
    victim = replicas[1]
    rng = np.random.default_rng()
    xs = [rng.integers(-2**31, 2**31 - 1, int(rng.integers(50_000, 120_000)), dtype=np.int32) for _ in range(8)]
    refs = [np.cumsum(x, dtype=np.int32) for x in xs]
    stop = threading.Event()
    stats = {"ok": 0, "failed": 0, "wrong": 0, "errors": []}
    lock = threading.Lock()

    def worker(seed: int):
        local = np.random.default_rng(seed)
        with gpuscan.Client(lb.target, chunk_bytes=CHUNK, timeout=20, retries=6, backoff=(0.05, 0.5),
                            native=False) as c:
            while not stop.is_set():
                i = int(local.integers(len(xs)))
                try:
                    got = c.scan(xs[i], lanes=int(local.choice([1, 3])))
                except gpuscan.Error as e:
                    with lock:
                        stats["failed"] += 1
                        stats["errors"].append(repr(e)[:200])
                    continue
                with lock:
                    if got.tobytes() == refs[i].tobytes():
                        stats["ok"] += 1
                    else:
                        stats["wrong"] += 1

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(4)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    mark = len(lb.log_text())
    victim.proc.kill()
    killed_at = time.monotonic()
    if lb.kind == "haproxy":
        # The health check (inter 1s, fall 2) takes the dead replica out.
        assert lb.wait_log(r"Server gpuscan/r1 is DOWN", 8, after=mark), lb.log_text()[mark:]
    else:
        # nginx's passive check: the first refused connection (max_fails=1) takes it out for
        # fail_timeout, and that call goes to the next replica (grpc_next_upstream error).
        assert lb.wait_log(r"upstream server temporarily disabled", 8, after=mark), lb.log_text()[mark:]
    down_after = time.monotonic() - killed_at
    time.sleep(1.0)
    victim.proc.stop()
    mark = len(lb.log_text())
    victim.start()
    if lb.kind == "haproxy":
        # ... and back in once restarted (rise 2).
        assert lb.wait_log(r"Server gpuscan/r1 is UP", 8, after=mark), lb.log_text()[mark:]
    else:
        time.sleep(2.5)  # nginx tries it again after fail_timeout (2 s)
    served_before = victim.requests()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join(60)
    served_after = victim.requests()
    print(f"\nkill under load: {stats['ok']} right, {stats['failed']} failed after retries, {stats['wrong']} wrong; "
          f"out of the balancer {down_after:.1f} s after the kill; restarted replica served "
          f"{served_after - served_before:.0f} calls in 2 s; errors: {stats['errors'][:3]}")
    assert stats["wrong"] == 0
    assert stats["ok"] > 20
    # Retries absorb the kill: at most a handful of calls (those that ran out of tries while the
    # replica was still in the pool) may fail, and each failure is a clean status.
    assert stats["failed"] <= 4, stats["errors"]
    assert served_after > served_before, "the restarted replica got no calls back"
