"""Retries (Client/AsyncClient retries=, backoff=, on_retry=): calls that fail with UNAVAILABLE
are tried again and return exactly one correct result. Against a flaky stand-in server made here
with grpcio (int32 sum scans and reduces, "gt 0" and mask compactions) whose failing calls stream
wrong partial results, a stray Timing and kept count before failing: the results, out=, the
calls the server saw, what is not retried (other codes, scan_iter, in-place scans, retries=0),
"gave up after N tries", the deadline over all tries, the async client. Then a real server
killed and restarted at its address under a client calling in a loop."""
import asyncio
import socket
import threading
import time

import grpc
import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan import _retry
from gpuscan.testing import ServerProcess
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

CHUNK_BYTES = 64  # 16 int32 per chunk
N = 1000          # 63 chunks
FAST = (0.01, 0.05)  # backoff for tests
# A server that always fails, under a deadline: the client stops when the next wait would pass
# it (UNAVAILABLE), or the last try it started runs out of time (DEADLINE_EXCEEDED).
GAVE_UP = (gpuscan.Unavailable, gpuscan.DeadlineExceeded)


class FlakyServicer(pb_grpc.GpuScanServicer):
    """Fails its first `fail` data calls (Scan, Reduce, Compact) with `code`, after answering
    half of the chunks wrongly (and, for Scan and Compact, a Timing and kept count that must not
    survive); answers the rest correctly. hang_s: correct calls first wait that long (while the
    call lives)."""

    def __init__(self, fail=0, code=grpc.StatusCode.UNAVAILABLE, hang_s=0.0):
        self.fail, self.code, self.hang_s = fail, code, hang_s
        self.calls = 0
        self.lock = threading.Lock()

    def _start(self, context) -> bool:
        """Counts the call; True when it is to fail."""
        with self.lock:
            self.calls += 1
            failing = self.calls <= self.fail
        if not failing:
            end = time.monotonic() + self.hang_s
            while context.is_active() and time.monotonic() < end:
                time.sleep(0.01)
        return failing

    def _abort(self, context):
        context.abort(self.code, f"flaky: call {self.calls} fails")

    @staticmethod
    def _chunks(request_iterator, field):
        """(header, elements of each request) as int32 arrays."""
        header = None
        for r in request_iterator:
            if r.HasField("header"):
                header = r.header
            yield header, r, np.frombuffer(getattr(r, field), np.int32)

    def Scan(self, request_iterator, context):
        failing = self._start(context)
        carry, offset, sent = np.int32(0), 0, 0
        for header, _, x in self._chunks(request_iterator, "data"):
            assert header.dtype == pb.DTYPE_INT32 and header.op == pb.OPERATOR_SUM
            if failing and sent * 2 >= header.element_count:
                yield pb.ScanResponse(timing=pb.Timing(algorithm="failed try", bytes_in=1))
                self._abort(context)
            with np.errstate(all="ignore"):
                y = np.add.accumulate(x, dtype=np.int32) + carry
            if len(y):
                carry = y[-1]
            yield pb.ScanResponse(data=(y ^ 0x5A5A if failing else y).tobytes(), offset=offset)
            offset += len(x)
            sent += len(x)
        yield pb.ScanResponse(timing=pb.Timing(algorithm="flaky", bytes_in=4 * offset), element_count=offset)

    def Reduce(self, request_iterator, context):
        failing = self._start(context)
        total, n = np.int32(0), 0
        for header, _, x in self._chunks(request_iterator, "data"):
            if failing and n * 2 >= header.element_count:
                self._abort(context)
            with np.errstate(all="ignore"):
                total = np.int32(total + np.add.reduce(x, dtype=np.int32))
            n += len(x)
        return pb.ReduceResponse(value=pb.Scalar(int_value=int(total)), raw_value=total.tobytes(), element_count=n,
                                 timing=pb.Timing(algorithm="flaky", bytes_in=4 * n))

    def Compact(self, request_iterator, context):
        failing = self._start(context)
        kept, n = 0, 0
        for header, r, x in self._chunks(request_iterator, "values"):
            if failing and n * 2 >= header.element_count:
                yield pb.CompactResponse(timing=pb.Timing(algorithm="failed try"), kept_count=kept + 5)
                self._abort(context)
            keep = np.frombuffer(r.flags, np.uint8) != 0 if header.use_flags else x > 0
            v, i = x[keep], np.flatnonzero(keep).astype("<i8") + n
            if failing:  # wrong values and indices, at the right offsets
                v, i = v + 1, i + 1
            out = pb.CompactResponse(kept_offset=kept)
            if header.output != pb.COMPACT_OUTPUT_INDICES:
                out.values = v.tobytes()
            if header.output != pb.COMPACT_OUTPUT_VALUES:
                out.indices = i.tobytes()
            yield out
            kept += len(v)
            n += len(x)
        yield pb.CompactResponse(timing=pb.Timing(algorithm="flaky", bytes_in=4 * n), kept_count=kept,
                                 element_count=n)

    def GetServerInfo(self, request, context):  # no lanes: lanes=K falls back to one call
        return pb.ServerInfo(engine="flaky", limits=pb.Limits(max_lanes=0))


@pytest.fixture()
def flaky(serve_servicer):
    """flaky(fail=..., code=..., hang_s=...) -> (servicer, target); servers stopped at the end."""
    def start(**kw):
        servicer = FlakyServicer(**kw)
        return servicer, serve_servicer(servicer, workers=8)
    return start


def data(rng, n=N):
    return ref.random_array(rng, np.dtype(np.int32), n)


def test_scan_retried_into_out(flaky, rng):
    srv, target = flaky(fail=2)
    seen = []
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=3, backoff=FAST,
                        on_retry=lambda e, n, w: seen.append((type(e), n, w))) as c:
        x = data(rng)
        out = np.full(N, 7, np.int32)
        assert c.scan(x, out=out) is out
        np.testing.assert_array_equal(out, ref.scan(x, "sum", False))
        assert srv.calls == 3
        assert [(t, n) for t, n, _ in seen] == [(gpuscan.Unavailable, 2), (gpuscan.Unavailable, 3)]
        assert 0.008 <= seen[0][2] <= 0.012 and 0.016 <= seen[1][2] <= 0.024
        assert c.last_timing.algorithm == "flaky" and c.last_timing.bytes_in == 4 * N
        srv.fail = srv.calls + 1  # the next call fails once; a new result array
        np.testing.assert_array_equal(c.scan(x, lanes=4), ref.scan(x, "sum", False))
        assert srv.calls == 5


def test_reduce_and_compact_retried(flaky, rng):
    srv, target = flaky(fail=1, code=grpc.StatusCode.CANCELLED)  # cancelled by the server: retried too
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=1, backoff=FAST) as c:
        x = data(rng)
        assert c.reduce(x) == ref.reduce(x, "sum")
        assert srv.calls == 2 and c.last_timing.bytes_in == 4 * N
        srv.code = grpc.StatusCode.UNAVAILABLE
        for kw, want in [({}, x[x > 0]), ({"indices": True, "values": False}, np.flatnonzero(x > 0))]:
            srv.fail = srv.calls + 1
            got = c.compact(x, predicate=("gt", 0), **kw)
            np.testing.assert_array_equal(got, want)
            assert c.last_timing.algorithm == "flaky"
        srv.fail = srv.calls + 1
        mask = rng.random(N) < 0.3
        v, i = c.compact(x, where=mask, indices=True)
        np.testing.assert_array_equal(v, x[mask])
        np.testing.assert_array_equal(i, np.flatnonzero(mask))
        assert srv.calls == 8


def test_two_retries_by_default_as_the_cli_and_the_cpp_client(flaky, rng):
    srv, target = flaky(fail=2)
    x = data(rng)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, backoff=FAST) as c:
        assert c.retries == 2
        assert c.reduce(x) == ref.reduce(x, "sum") and srv.calls == 3
        srv.fail = srv.calls + 3  # three failures: one more than the default allows
        with pytest.raises(gpuscan.Unavailable, match=r"gave up after 3 tries"):
            c.reduce(x)
        assert srv.calls == 6


def test_per_call_retries(flaky, rng):
    srv, target = flaky(fail=2)
    x = data(rng)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=0, backoff=FAST) as c:
        with pytest.raises(gpuscan.Unavailable) as e:
            c.reduce(x)
        assert "gave up" not in str(e.value) and e.value.message == "flaky: call 1 fails" and srv.calls == 1
        assert c.reduce(x, retries=1) == ref.reduce(x, "sum") and srv.calls == 3
        with pytest.raises(ValueError, match="retries must be >= 0, got -1"):
            c.reduce(x, retries=-1)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=5, backoff=FAST) as c:
        srv.fail = srv.calls + 1
        with pytest.raises(gpuscan.Unavailable):
            c.scan(x, retries=0)
        assert srv.calls == 4


def test_gave_up(flaky, rng):
    srv, target = flaky(fail=100)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=2, backoff=FAST) as c:
        for call in (lambda x: c.scan(x), lambda x: c.reduce(x), lambda x: c.compact(x, predicate=("gt", 0))):
            before = srv.calls
            with pytest.raises(gpuscan.Unavailable) as e:
                call(data(rng))
            assert srv.calls == before + 3
            assert e.value.code == grpc.StatusCode.UNAVAILABLE
            assert e.value.message == f"flaky: call {before + 3} fails (gave up after 3 tries)"
            assert str(e.value) == f"UNAVAILABLE: {e.value.message}"


def test_not_retried(flaky, rng):
    """Other codes would recur; scan_iter's chunks are read once; an in-place scan has written over
    its input."""
    srv, target = flaky(fail=1, code=grpc.StatusCode.INVALID_ARGUMENT)
    x = data(rng)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=3, backoff=FAST) as c:
        with pytest.raises(gpuscan.InvalidArgument) as e:
            c.scan(x)
        assert srv.calls == 1 and "gave up" not in str(e.value)
        srv.code = grpc.StatusCode.UNAVAILABLE
        srv.fail = 2
        with pytest.raises(gpuscan.Unavailable) as e:
            list(c.scan_iter([x[:100], x[100:]]))
        assert srv.calls == 2 and "gave up" not in str(e.value)
        srv.fail = 3
        y = x.copy()
        with pytest.raises(gpuscan.Unavailable):
            c.scan(y, out=y)
        assert srv.calls == 3
        np.testing.assert_array_equal(np.concatenate(list(c.scan_iter([x[:100], x[100:]]))), ref.scan(x, "sum", False))


def test_deadline_covers_all_tries(flaky, rng):
    srv, target = flaky(fail=10**9)
    x = data(rng)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=0.8, retries=1000, backoff=(0.05, 0.2)) as c:
        t0 = time.monotonic()
        with pytest.raises(GAVE_UP, match=r"\(gave up after \d+ tries\)"):
            c.scan(x)
        took = time.monotonic() - t0
        assert took < 2.0 and srv.calls >= 3, (took, srv.calls)  # 1000 tries would take minutes
    # A later try gets only the time left: the first fails at once, the second hangs.
    srv, target = flaky(fail=1, hang_s=10)
    with gpuscan.Client(target, chunk_bytes=CHUNK_BYTES, timeout=0.8, retries=5, backoff=FAST) as c:
        t0 = time.monotonic()
        with pytest.raises(gpuscan.DeadlineExceeded, match=r"\(gave up after 2 tries\)"):
            c.reduce(x)
        assert time.monotonic() - t0 < 2.0 and srv.calls == 2


def test_async_client(flaky, rng):
    srv, target = flaky(fail=1)
    x = data(rng)
    seen = []

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=CHUNK_BYTES, timeout=30, retries=2, backoff=FAST,
                                       on_retry=lambda e, n, w: seen.append(n)) as c:
            out = np.zeros(N, np.int32)
            assert await c.scan(x, out=out) is out
            np.testing.assert_array_equal(out, ref.scan(x, "sum", False))
            assert c.last_timing.algorithm == "flaky"
            srv.fail = srv.calls + 1
            assert await c.reduce(x, lanes=2) == ref.reduce(x, "sum")
            srv.fail = srv.calls + 1
            v, i = await c.compact(x, predicate=("gt", 0), indices=True)
            np.testing.assert_array_equal(v, x[x > 0])
            np.testing.assert_array_equal(i, np.flatnonzero(x > 0))
            assert srv.calls == 6 and seen == [2, 2, 2]
            srv.fail = srv.calls + 3
            with pytest.raises(gpuscan.Unavailable, match=r"\(gave up after 3 tries\)"):
                await c.compact(x, predicate=("gt", 0))
            srv.fail = srv.calls + 1
            with pytest.raises(gpuscan.Unavailable):
                await c.scan(x, retries=0)
            srv.fail = srv.calls + 1
            # Not retried. The server fails it mid-upload, which grpc.aio (grpcio 1.6x on the GPU
            # machine) may report as INTERNAL "Internal error from Core" (grpc/grpc#36066).
            with pytest.raises((gpuscan.Unavailable, gpuscan.Internal)):
                async for _ in c.scan_iter([x]):
                    pass
            assert srv.calls == 11
        srv2, target2 = flaky(fail=10**9)
        async with gpuscan.AsyncClient(target2, chunk_bytes=CHUNK_BYTES, timeout=0.8, retries=1000,
                                       backoff=(0.05, 0.2)) as c:
            t0 = time.monotonic()
            with pytest.raises(GAVE_UP, match="gave up after"):
                await c.reduce(x)
            assert time.monotonic() - t0 < 2.0 and srv2.calls >= 3
    asyncio.run(main())


@pytest.mark.parametrize("kw, what", [
    ({"retries": -1}, "retries must be >= 0, got -1"),
    ({"retries": 2.5}, "retries must be an integer >= 0, got 2.5"),
    ({"retries": True}, "retries must be an integer"),
    ({"retries": "3"}, "retries must be an integer"),
    ({"backoff": (0.1,)}, r"backoff must be \(initial, maximum\)"),
    ({"backoff": None}, "backoff must be"),
    ({"backoff": ("a", 1)}, "backoff must be"),
    ({"backoff": (-0.1, 1)}, r"0 <= initial <= maximum, got \(-0.1, 1\)"),
    ({"backoff": (2, 1)}, "0 <= initial <= maximum"),
    ({"backoff": (0.1, float("inf"))}, "0 <= initial <= maximum"),
    ({"on_retry": 5}, "on_retry must be callable"),
])
def test_bad_arguments(kw, what):
    with pytest.raises(ValueError, match=what):
        gpuscan.Client("127.0.0.1:1", **kw)
    with pytest.raises(ValueError, match=what):
        gpuscan.AsyncClient("127.0.0.1:1", **kw)


def test_backoff():
    for _ in range(50):
        assert 0.08 <= _retry.backoff_s((0.1, 2.0), 2) <= 0.12
        assert 0.16 <= _retry.backoff_s((0.1, 2.0), 3) <= 0.24
        assert 1.6 <= _retry.backoff_s((0.1, 2.0), 7) <= 2.4  # 3.2 capped
        assert 1.6 <= _retry.backoff_s((0.1, 2.0), 10**6) <= 2.4
    assert _retry.backoff_s((0, 0), 5) == 0


def test_retryable_codes():
    """The link's faults are tried again; what the server answered is not (it would recur)."""
    from gpuscan.errors import error_for
    assert _retry.retryable(error_for(grpc.StatusCode.UNAVAILABLE, "failed to connect"))
    assert _retry.retryable(error_for(grpc.StatusCode.CANCELLED, "Cancelled by the server"))
    assert not _retry.retryable(error_for(grpc.StatusCode.CANCELLED, "Locally cancelled by application!"))
    assert _retry.retryable(error_for(grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 1"))
    assert not _retry.retryable(error_for(grpc.StatusCode.INTERNAL, "the engine failed: out of memory"))
    assert not _retry.retryable(error_for(grpc.StatusCode.INVALID_ARGUMENT, "Received RST_STREAM"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_server_killed_and_restarted(server_binary, rng):
    """A client calling in a loop (scan, reduce, compact; one call and 3 lanes) while its server is
    SIGKILLed and restarted at the same address: every call returns the right result."""
    port = free_port()
    extra = ["--max-lanes", "4"]
    srv = ServerProcess(server_binary, extra=extra, port=port)
    stop = threading.Event()
    done, failures, retried = [], [], []
    # gRPC's own reconnect backoff (1 s, growing) would otherwise outlast the retries' waits.
    options = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 100)]

    def loop():
        with gpuscan.Client(f"127.0.0.1:{port}", chunk_bytes=4096, timeout=20, retries=100, backoff=(0.02, 0.1),
                            options=options, on_retry=lambda e, n, w: retried.append(e.code)) as c:
            i = 0
            while not stop.is_set():
                x = data(rng, 20_000 + i)
                lanes = 1 + 2 * (i % 2)
                try:
                    if i % 3 == 0:
                        ok = np.array_equal(c.scan(x, lanes=lanes), ref.scan(x, "sum", False))
                    elif i % 3 == 1:
                        ok = c.reduce(x, lanes=lanes) == ref.reduce(x, "sum")
                    else:
                        v, k = c.compact(x, predicate=("gt", 0), indices=True, lanes=lanes)
                        ok = np.array_equal(v, x[x > 0]) and np.array_equal(k, np.flatnonzero(x > 0))
                    (done if ok else failures).append(f"call {i}: {'right' if ok else 'WRONG'}")
                except Exception as e:  # noqa: B902 - reported by the test
                    failures.append(f"call {i}: {e!r}")
                i += 1

    t = threading.Thread(target=loop)
    t.start()
    try:
        for _ in range(3):
            time.sleep(0.4)
            srv.kill()
            time.sleep(0.2)
            srv.stop()
            srv = ServerProcess(server_binary, extra=extra, port=port)
        time.sleep(0.4)
    finally:
        stop.set()
        t.join(60)
        srv.stop()
    assert not failures, failures[:5]
    assert len(done) >= 10 and retried and set(retried) == {grpc.StatusCode.UNAVAILABLE}, (len(done), retried)
