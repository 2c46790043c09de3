"""The native path (the default where the library loads): scan, reduce and compact through the C++
client's C API (gpuscan._native), outside the GIL:
the same results as the grpcio path bit for bit (floats too), Timing and errors, on random data,
every dtype and operator, lengths around chunk boundaries, with lanes; what stays on grpcio
(in place, a call's own retries or an on_retry). Skipped where the library is not
built (an installed package without CMake's copy)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan import _native

CHUNK = 64  # bytes: 16 int32 / 8 int64 per message, so small arrays cross many chunks
LENGTHS = [0, 1, 9, 17, 1000]

pytestmark = pytest.mark.skipif(_native.library()[0] is None, reason=f"no C API here: {_native.library()[1]}")


@pytest.fixture(scope="module")
def both(target):
    with gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60, native=True) as n, \
            gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60, native=False) as g:
        yield n, g


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan_and_reduce_match_grpcio(both, rng, dtype):
    native, grpcio = both
    for n in LENGTHS:
        for op in ref.ops_for(dtype):
            x = ref.random_array(rng, dtype, n, op)
            for exclusive in (False, True):
                for lanes in ((1, 3) if n == 1000 else (1,)):
                    y = native.scan(x, op=op, exclusive=exclusive, lanes=lanes)
                    where = (str(dtype), n, op, exclusive, lanes)
                    assert type(y) is np.ndarray and same_bits(y, grpcio.scan(x, op=op, exclusive=exclusive)), where
                    ref.assert_scan_close(y, ref.scan(x, op, exclusive), x, op)
                    t = native.last_timing
                    assert t.bytes_in == n * dtype.itemsize and t.chunks >= (1 if n else 0), (where, t)
            v = native.reduce(x, op=op, lanes=2)
            assert type(v) is dtype.type and v.tobytes() == grpcio.reduce(x, op=op).tobytes(), (str(dtype), n, op)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_compact_matches_grpcio(both, rng, dtype, monkeypatch):
    native, grpcio = both
    calls = []
    real = native._native.compact
    monkeypatch.setattr(native._native, "compact", lambda *a: calls.append(1) or real(*a))
    for n in LENGTHS:
        x = ref.random_array(rng, dtype, n)
        mask = rng.random(n) < 0.4
        for lanes in ((1, 3) if n == 1000 else (1,)):
            where = (str(dtype), n, lanes)
            for kw in ({"predicate": ("gt", 0)}, {"where": mask}, {"predicate": "nonzero"}):
                v, i = native.compact(x, indices=True, lanes=lanes, **kw)
                gv, gi = grpcio.compact(x, indices=True, **kw)
                assert same_bits(v, gv) and same_bits(i, gi), (where, kw)
                assert v.flags.owndata and len(v) == native.last_timing.bytes_out // (dtype.itemsize + 8), where
            assert same_bits(native.compact(x, where=mask, lanes=lanes), x[mask]), where
            assert same_bits(native.compact(x, where=mask, values=False, indices=True, lanes=lanes),
                             np.flatnonzero(mask)), where
    assert len(calls) == 5 * (len(LENGTHS) + 1)  # every call above (n = 1000 twice) took the native path


def test_out_slices_and_fallbacks(both, rng):
    native, _ = both
    x = ref.random_array(rng, np.dtype(np.int64), 5000)
    out = np.full(5000, 7, np.int64)
    assert native.scan(x, out=out) is out and same_bits(out, ref.scan(x, "sum", False))
    assert native.last_timing.engine and native.last_timing.total_us > 0
    big = np.zeros(6000, np.int64)
    native.scan(x[100:4100], op="max", out=big[1000:5000])
    assert same_bits(big[1000:5000], ref.scan(x[100:4100], "max", False)) and not big[:1000].any()
    y = x.copy()  # in place: the grpcio path (the C++ client takes no overlapping out)
    assert native.scan(y, out=y) is y and same_bits(y, ref.scan(x, "sum", False))
    assert native.scan(x, retries=2) is not None  # a call's own retries: the grpcio path
    v, i = native.compact(x, predicate=("gt", 0), indices=True)  # compaction: native too
    assert same_bits(v, x[x > 0]) and same_bits(i, np.flatnonzero(x > 0))


def test_errors(target, both):
    native, _ = both
    other = "kogge_stone" if native.info()["engine"] == "cpu" else "cpu_blocked"  # not on this engine
    with pytest.raises(gpuscan.Unimplemented, match=f"header.algorithm={other}"):
        native.scan(np.arange(10, dtype=np.float32), algorithm=other)
    with pytest.raises(ValueError, match="plaintext"):
        gpuscan.Client(target, tls=True, native=True)
    with gpuscan.Client("127.0.0.1:1", timeout=5, native=True) as dead:
        with pytest.raises(gpuscan.Unavailable):
            dead.reduce(np.arange(10, dtype=np.int32))


def test_native_is_the_default_where_it_can_serve(target, monkeypatch):
    monkeypatch.delenv("GPUSCAN_NATIVE", raising=False)
    with gpuscan.Client(target) as c:
        assert c._native is not None
        x = np.random.default_rng(3).integers(-9, 9, 5000, dtype=np.int64)
        assert same_bits(c.scan(x), ref.scan(x, "sum", False)) and c.reduce(x, op="max") == x.max()
    with gpuscan.Client(target, options=[("grpc.max_receive_message_length", -1)]) as c:
        assert c._native is None  # grpc options apply to grpcio's channel only
    with gpuscan.Client(target, native=False) as c:
        assert c._native is None
    monkeypatch.setenv("GPUSCAN_NATIVE", "0")
    with gpuscan.Client(target) as c:
        assert c._native is None
    with gpuscan.Client(target, native=True) as c:  # the argument wins over the environment
        assert c._native is not None


_CTRL_C_NATIVE = """
import os, signal, sys, threading, time
import numpy as np
import gpuscan

with gpuscan.Client(sys.argv[1], chunk_bytes=1024, timeout=120, native=True) as c:
    x = np.ones(16 << 20, np.int32)  # 64 MiB in 1 KiB messages: seconds (~3 s idle), not 0.2
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        c.scan(x)
        print("finished", time.monotonic() - start)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic() - start)
    small = np.arange(1, 100, dtype=np.int32)
    np.testing.assert_array_equal(c.scan(small), np.cumsum(small))
    assert c.health() == "SERVING"
print("ok")
"""


def test_ctrl_c_cancels_a_native_call_at_once(target):
    """Ctrl-C during a native scan: KeyboardInterrupt reaches the caller as soon as the signal
    does (the call is cancelled, not waited for), and the client and server carry on."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _CTRL_C_NATIVE, target], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout + r.stderr
    how, seconds = r.stdout.split()[:2]
    assert how == "interrupted", r.stdout  # 64 MiB in 1 KiB messages outlasts 0.2 s by far
    assert float(seconds) < 2.0, r.stdout


def test_a_missing_library_warns_once_and_names_why(tmp_path):
    """pip hides setup.py's output unless -v: the first client that cannot load the C API says
    why (NativeUnavailableWarning, once), and GPUSCAN_NATIVE=0 turns the path off silently."""
    code = ("import warnings, gpuscan\n"
            "warnings.simplefilter('always')\n"
            "a = gpuscan.Client('127.0.0.1:1'); b = gpuscan.Client('127.0.0.1:1')\n"
            "print('PATH', a.data_path.name, '|', a.data_path.reason)\n")
    env = dict(os.environ, GPUSCAN_NATIVE_LIB=str(tmp_path / "libgpuscan_capi.so"))
    env.pop("GPUSCAN_NATIVE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("NativeUnavailableWarning") == 1, done.stderr
    assert "the native data path is off, clients take grpcio" in done.stderr and "libgpuscan_capi.so" in done.stderr
    assert "PATH grpcio | no C API:" in done.stdout, done.stdout
    env["GPUSCAN_NATIVE"] = "0"
    quiet = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0 and "Warning" not in quiet.stderr, quiet.stderr
