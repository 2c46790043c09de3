"""scan_iter, deadlines, cancellation and KeyboardInterrupt: the client stays usable and the
server keeps serving."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import gpuscan
import reference as ref


def test_scan_iter_matches_one_scan(client, rng):
    lengths = [0, 1, 15, 16, 17, 0, 100, 3, 48]
    parts = [ref.random_array(rng, np.dtype(np.int64), n) for n in lengths]
    outs = list(client.scan_iter(iter(parts), op="sum", exclusive=True))
    assert [len(o) for o in outs] == [n for n in lengths if n]
    whole = np.concatenate(parts)
    np.testing.assert_array_equal(np.concatenate(outs), ref.scan(whole, "sum", True))
    assert client.last_timing.chunks >= 10


def test_scan_iter_generator_and_empty(client):
    def gen():
        for k in range(5):
            yield np.full(37, k + 1, np.float64)
    outs = list(client.scan_iter(gen(), op="max"))
    np.testing.assert_array_equal(np.concatenate(outs), np.repeat(np.arange(1, 6, dtype=np.float64), 37))
    assert list(client.scan_iter([])) == []


def test_scan_iter_yields_before_the_upload_ends(client):
    """Results stream back while the source is still producing."""
    produced = []

    def gen():
        for k in range(6):
            produced.append(k)
            yield np.arange(1, 33, dtype=np.int32)
    it = client.scan_iter(gen())
    first = next(it)
    np.testing.assert_array_equal(first, np.cumsum(np.arange(1, 33)))
    rest = list(it)
    assert len(rest) == 5 and len(produced) == 6


def test_scan_iter_source_error_is_reraised(client):
    class Boom(Exception):
        pass

    def gen():
        yield np.arange(1, 100, dtype=np.int32)
        raise Boom("source failed")
    with pytest.raises(Boom):
        list(client.scan_iter(gen()))
    with pytest.raises(ValueError, match="one dtype"):
        list(client.scan_iter([np.ones(4, np.int32), np.ones(4, np.int64)]))
    np.testing.assert_array_equal(client.scan(np.arange(1, 50, dtype=np.int32)), np.cumsum(np.arange(1, 50)))


def test_scan_iter_stopped_early_cancels(client):
    def gen():
        while True:
            yield np.arange(1, 65, dtype=np.int32)
    it = client.scan_iter(gen())
    for _ in range(3):
        next(it)
    it.close()  # cancels the call
    assert client.health() == "SERVING"
    assert client.reduce(np.arange(1, 11, dtype=np.int32)) == 55


def test_deadline_exceeded(target):
    def slow():
        yield np.arange(1, 10, dtype=np.int32)
        time.sleep(1.0)
        yield np.arange(1, 10, dtype=np.int32)
    with gpuscan.Client(target, timeout=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(gpuscan.DeadlineExceeded):
            list(c.scan_iter(slow()))
        assert time.monotonic() - t0 < 5
        assert c.reduce(np.arange(1, 11, dtype=np.int32)) == 55


# Ctrl-C runs in a child Python: a real SIGINT that lands a moment late (a loaded CI machine)
# then hits the child, never pytest's own process, which would take it as the user stopping the run.
_CTRL_C_CHILD = """
import os, signal, sys, threading, time
import numpy as np
import gpuscan

def ctrl_c(after_s):
    threading.Timer(after_s, os.kill, (os.getpid(), signal.SIGINT)).start()

with gpuscan.Client(sys.argv[1], chunk_bytes=256, timeout=60) as client:
    def slow():
        for _ in range(200):
            yield np.arange(1, 65, dtype=np.int32)
            time.sleep(0.01)
    got = 0
    try:
        for _ in client.scan_iter(slow()):
            got += 1
            if got == 1:
                ctrl_c(0.05)  # mid-scan for sure: results are flowing, 2 s of input remain
        print("scan_iter finished before the interrupt")
    except KeyboardInterrupt:
        print("scan_iter interrupted after", got)
    assert 0 < got < 200, got
    x = np.arange(1, 1000, dtype=np.int64)
    np.testing.assert_array_equal(client.scan(x), np.cumsum(x))
    assert client.health() == "SERVING"
    with gpuscan.Client(sys.argv[1]) as other:
        assert other.health() == "SERVING"
with gpuscan.Client(sys.argv[1], timeout=60) as big:
    x = np.ones(8 << 20, np.int32)  # 32 MiB: long enough to be interrupted, mostly
    # Interrupts at varied moments of scans and reductions: one that landed inside grpc's own
    # waits once left a channel lock held and the next call hung (see gpuscan/_pump.py).
    for k in range(12):
        try:
            ctrl_c(0.01 + 0.01 * k)
            try:
                big.scan(x) if k % 3 else big.reduce(x)
                print("plain call finished before the interrupt")
            except KeyboardInterrupt:
                print("plain call interrupted")
            time.sleep(0.3)  # an interrupt already on its way lands here
        except KeyboardInterrupt:
            print("the interrupt came after the call")
        assert big.reduce(np.arange(1, 11, dtype=np.int32)) == 55
        np.testing.assert_array_equal(big.scan(x[:1000]), np.arange(1, 1001))
print("ok")
"""


def test_keyboard_interrupt(target):
    """Ctrl-C while a scan streams (scan_iter) and during a plain scan: KeyboardInterrupt reaches
    the caller, the call is cancelled, the client and the server carry on."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _CTRL_C_CHILD, target], env=env, capture_output=True, text=True,
                       timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout + r.stderr
    assert "scan_iter interrupted after" in r.stdout, r.stdout


def test_concurrent_threads_and_thread_local_timing(client, rng):
    xs = [ref.random_array(rng, np.dtype(np.int32), 500) for _ in range(4)]
    results, timings = [None] * 4, [None] * 4

    def work(k):
        results[k] = client.scan(xs[k])
        timings[k] = client.last_timing
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        np.testing.assert_array_equal(results[k], ref.scan(xs[k], "sum", False))
        assert timings[k].bytes_in == 2000
