"""Striped lanes (header field 21): one array over K concurrent calls, each on its own connection,
gives bit for bit the result of one call (and numpy's), for scan, reduce and compact, sync and
async, at lengths around the chunk boundaries (64-byte chunks: 16 or 8 elements), with fewer
chunks than lanes and with many chunks. Also: the server really joins the lanes (its log), one TCP
connection per lane, the cap at the server's max_lanes, the single-call fallbacks, bad lanes
values, and a lane that fails mid-array."""
import asyncio
import os
import re
import time

import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan.testing import ServerProcess

CHUNK_BYTES = 64
LANES = (1, 2, 3, 8)  # 1: one plain call
ENGINE = os.environ.get("GPUSCAN_TEST_ENGINE", "cpu")


@pytest.fixture(scope="module")
def lane_server(server_binary):
    """A server of this module's own, so its log shows which calls it joined as lanes."""
    with ServerProcess(server_binary, engine=ENGINE, extra=["--max-lanes", "16", "--lane-wait-ms", "5000"]) as s:
        yield s


@pytest.fixture(scope="module")
def lc(lane_server):
    with gpuscan.Client(lane_server.target, chunk_bytes=CHUNK_BYTES, timeout=60) as c:
        yield c


def lengths(dtype):
    """0, 1, a chunk (c elements) +-1, 3 and 8 chunks +-1 (K*c +-1 for K = 3 and 8), 3 chunks (fewer
    than 8 lanes) and many chunks."""
    c = CHUNK_BYTES // dtype.itemsize
    return sorted({0, 1, c - 1, c + 1, 2 * c + 3, 3 * c - 1, 3 * c + 1, 8 * c - 1, 8 * c + 1, 41 * c + 5})


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def exact(dtype, op):
    """numpy's result is the server's bit for bit (integers wrap; min/max pick an input)."""
    return dtype.kind != "f" or op in ("min", "max")


def lane_lines(server):
    """The server's log lines of calls it joined as lanes: [(op, lane, count, array id, status)]."""
    out = []
    for m in re.finditer(r"^.*?\b(scan|reduce|compact) .*? lane=(\d+)/(\d+) array=(\S+) status=(\w+)", server.log_text(),
                         re.M):
        out.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)))
    return out


# Per dtype kind: (op, exclusive) pairs, both kinds and float sum/product (bits: not numpy's).
SCAN_CASES = {"i": [("sum", False), ("bit_xor", True), ("product", False), ("max", True)],
              "u": [("sum", True), ("bit_and", False), ("min", True)],
              "f": [("sum", False), ("product", True), ("min", False)]}
REDUCE_OPS = {"i": ["sum", "bit_or", "min"], "u": ["product", "bit_xor", "max"], "f": ["sum", "product", "max"]}


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan_lanes_equal_one_call(lc, rng, dtype):
    for op, exclusive in SCAN_CASES[dtype.kind]:
        for n in lengths(dtype):
            x = ref.random_array(rng, dtype, n, op)
            want = ref.scan(x, op, exclusive)
            for k in LANES:
                out = np.empty_like(x)
                got = lc.scan(x, op=op, exclusive=exclusive, out=out, lanes=k)
                where = f"{op} exclusive={exclusive} n={n} lanes={k}"
                assert got is out and lc.last_timing.bytes_in == n * dtype.itemsize, where
                if exact(dtype, op):
                    assert same_bits(got, want), where
                elif k == 1:
                    ref.assert_scan_close(got, want, x, op)
                    single = got
                else:
                    assert same_bits(got, single), where


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_reduce_lanes_equal_one_call(lc, rng, dtype):
    for op in REDUCE_OPS[dtype.kind]:
        for n in lengths(dtype):
            x = ref.random_array(rng, dtype, n, op)
            want = ref.reduce(x, op)
            for k in LANES:
                got = lc.reduce(x, op=op, lanes=k)
                where = (op, n, k, got, want)
                assert type(got) is type(want) and lc.last_timing.bytes_in == n * dtype.itemsize, where
                if exact(dtype, op):
                    assert got.tobytes() == want.tobytes(), where
                elif k == 1:
                    ref.assert_value_close(got, want, x, op)
                    single = got
                else:
                    assert got.tobytes() == single.tobytes(), where


def _threshold(dtype):
    return 1 << (8 * dtype.itemsize - 1) if dtype.kind == "u" else 0


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_compact_lanes_equal_one_call(lc, rng, dtype):
    for n in lengths(dtype):
        x = ref.random_array(rng, dtype, n)
        mask = rng.random(n) < 0.3
        keep = x > dtype.type(_threshold(dtype))
        cases = [  # (kwargs, numpy's values or None, numpy's indices or None)
            (dict(where=mask), x[mask], None),
            (dict(where=mask, values=False, indices=True), None, np.flatnonzero(mask)),
            (dict(predicate=("gt", _threshold(dtype)), indices=True), x[keep], np.flatnonzero(keep)),
        ]
        for kwargs, want_v, want_i in cases:
            for k in LANES:
                got = lc.compact(x, lanes=k, **kwargs)
                gv, gi = got if want_v is not None and want_i is not None else \
                    (got, None) if want_v is not None else (None, got)
                where = f"{kwargs} n={n} lanes={k}"
                if want_v is not None:
                    assert same_bits(gv, want_v), where
                if want_i is not None:
                    assert same_bits(gi, want_i.astype(np.int64)), where


def test_server_joins_the_lanes(lane_server, lc, rng):
    """The lanes reach the server as K calls of one array (not K arrays, not one call)."""
    x = ref.random_array(rng, np.dtype(np.int32), 200)  # 13 chunks of 16
    before = len(lane_lines(lane_server))
    np.testing.assert_array_equal(lc.scan(x, lanes=3), ref.scan(x, "sum", False))
    assert lc.reduce(x, op="max", lanes=4) == x.max()
    np.testing.assert_array_equal(lc.compact(x, predicate=("lt", 0), lanes=5), x[x < 0])
    wanted = (("scan", 3), ("reduce", 4), ("compact", 5))

    def joined(lines, op, k):
        """Whether the lines logged since `before` hold one array of K lanes for op, every lane
        OK: one id, lanes 0..K-1 (not K arrays, not one call). A line of an earlier test's call
        may still be written after `before` (the log is written as calls end), so the calls are
        told apart by their array ids."""
        ids = {}
        for o, lane, count, array_id, status in lines:
            if o == op and count == k:
                ids.setdefault(array_id, []).append((lane, status))
        return any(sorted(lane for lane, _ in v) == list(range(k)) and {st for _, st in v} == {"OK"}
                   for v in ids.values())
    for _ in range(100):
        lines = lane_lines(lane_server)[before:]
        if all(joined(lines, op, k) for op, k in wanted):
            break
        time.sleep(0.05)
    for op, k in wanted:
        assert joined(lines, op, k), (op, k, lines)


def _established_to(port):
    """Client-side TCP connections (ESTABLISHED) to 127.0.0.1:port, from /proc/net/tcp and tcp6
    (where an IPv4 connection may show as ::ffff:127.0.0.1)."""
    count = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                addr, _, rport = cols[2].partition(":")
                if cols[3] == "01" and addr.endswith("0100007F") and int(rport, 16) == port:
                    count += 1
    return count


def test_one_connection_per_lane(lane_server, rng):
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("no /proc/net/tcp")
    port = int(lane_server.target.rsplit(":", 1)[1])
    x = ref.random_array(rng, np.dtype(np.int64), 100)
    before = _established_to(port)
    with gpuscan.Client(lane_server.target, chunk_bytes=CHUNK_BYTES, lanes=4, timeout=60) as c:
        c.info()  # the main channel (it may share another client's connection: same arguments)
        plain = _established_to(port)
        np.testing.assert_array_equal(c.scan(x), ref.scan(x, "sum", False))
        assert _established_to(port) - plain == 4
        np.testing.assert_array_equal(c.scan(x, op="max", lanes=3), ref.scan(x, "max", False))  # reuses 3 of 4
        assert c.reduce(x, lanes=2) == ref.reduce(x, "sum")
        assert _established_to(port) - plain == 4
    for _ in range(100):  # closed with the client
        if _established_to(port) == before:
            break
        time.sleep(0.05)
    assert _established_to(port) == before


def test_client_lanes_default_and_per_call_override(lane_server, rng):
    x = ref.random_array(rng, np.dtype(np.uint32), 1000)
    # native=False: these look at grpcio's own lane channels
    with gpuscan.Client(lane_server.target, chunk_bytes=CHUNK_BYTES, lanes=4, timeout=60, native=False) as c:
        assert c.lanes == 4
        np.testing.assert_array_equal(c.scan(x, lanes=1), ref.scan(x, "sum", False))  # one plain call
        assert c.last_timing.bytes_in == 4000 and c._lane_channels == []
        np.testing.assert_array_equal(c.scan(x, op="bit_or"), ref.scan(x, "bit_or", False))
        assert c.reduce(x, op="min") == x.min()
        v, i = c.compact(x, where=x % 3 == 0, indices=True)
        np.testing.assert_array_equal(v, x[x % 3 == 0])
        np.testing.assert_array_equal(i, np.flatnonzero(x % 3 == 0))
        assert len(c._lane_channels) == 4
        np.testing.assert_array_equal(c.scan(x, lanes=6), ref.scan(x, "sum", False))
        assert len(c._lane_channels) == 6


def test_single_call_fallbacks(lane_server, rng, monkeypatch):
    """One call when the array has a single chunk, and when the server does not join lanes
    (Limits.max_lanes 0, an older server: it would answer each lane as an array of its own)."""
    # native=False: these look at grpcio's own lane channels
    with gpuscan.Client(lane_server.target, chunk_bytes=CHUNK_BYTES, lanes=8, timeout=60, native=False) as c:
        for n in (0, 1, 16):
            x = ref.random_array(rng, np.dtype(np.int32), n)
            np.testing.assert_array_equal(c.scan(x), ref.scan(x, "sum", False))
            assert c.reduce(x) == ref.reduce(x, "sum")
            np.testing.assert_array_equal(c.compact(x, predicate=("gt", 0)), x[x > 0])
        assert c._lane_channels == [] and c._max_lanes is None  # not even asked
        x = ref.random_array(rng, np.dtype(np.int32), 17)
        c.scan(x)
        assert c._max_lanes == 16 and len(c._lane_channels) == 2  # 2 chunks: 2 lanes
    with gpuscan.Client(lane_server.target, chunk_bytes=CHUNK_BYTES, lanes=8, timeout=60) as c:
        c._max_lanes = 0  # as an older server answers
        native_lanes = []  # the native path (where it loads) asks for one call too
        if c._native is not None:
            for name in ("scan", "reduce", "compact"):
                real = getattr(c._native, name)
                monkeypatch.setattr(c._native, name, lambda *a, real=real: native_lanes.append(a[-1]) or real(*a))
        x = ref.random_array(rng, np.dtype(np.float64), 500)
        assert same_bits(c.scan(x), c.scan(x, lanes=1))
        assert c.reduce(x, op="max") == x.max()
        np.testing.assert_array_equal(c.compact(x, predicate=("gt", 0)), x[x > 0])
        assert c._lane_channels == []
        assert native_lanes == ([1, 1, 1, 1] if c._native is not None else [])


@pytest.mark.parametrize("bad", [0, -1, 2.5, "2", True])
def test_bad_lanes_value(lane_server, lc, bad):
    with pytest.raises(ValueError, match="lanes"):
        gpuscan.Client(lane_server.target, lanes=bad)
    with pytest.raises(ValueError, match="lanes"):
        gpuscan.AsyncClient(lane_server.target, lanes=bad)
    x = np.arange(1, 100, dtype=np.int32)
    with pytest.raises(ValueError, match="lanes"):
        lc.scan(x, lanes=bad)
    with pytest.raises(ValueError, match="lanes"):
        lc.reduce(x, lanes=bad)
    with pytest.raises(ValueError, match="lanes"):
        lc.compact(x, predicate="nonzero", lanes=bad)
    with pytest.raises(ValueError, match="lanes"):
        lc.transport(1000, lanes=bad)


@pytest.fixture(scope="module")
def limited_server(server_binary):
    with ServerProcess(server_binary, engine=ENGINE,
                       extra=["--max-lanes", "2", "--max-request-bytes", "4096", "--lane-wait-ms", "5000"]) as s:
        yield s


def test_lanes_capped_at_server_max(limited_server, rng):
    x = ref.random_array(rng, np.dtype(np.int64), 300)  # 2400 bytes: within --max-request-bytes
    # native=False: these look at grpcio's own lane channels
    with gpuscan.Client(limited_server.target, chunk_bytes=CHUNK_BYTES, lanes=8, timeout=60, native=False) as c:
        np.testing.assert_array_equal(c.scan(x), ref.scan(x, "sum", False))  # 8 lanes would be refused
        assert c.reduce(x, op="bit_xor") == ref.reduce(x, "bit_xor")
        assert c.info()["limits"]["max_lanes"] == 2 and len(c._lane_channels) == 2


def test_failing_lane_fails_the_call(limited_server, lc, rng):
    """A lane the server fails (here mid-array: --max-request-bytes counts the whole array) fails
    the call with the server's status; the other lanes are cancelled; the client carries on."""
    x = ref.random_array(rng, np.dtype(np.int32), 2000)  # 8000 bytes
    with gpuscan.Client(limited_server.target, chunk_bytes=256, lanes=2, timeout=60, native=False) as c:  # grpcio lanes
        with pytest.raises(gpuscan.ResourceExhausted, match="max-request-bytes"):
            c.scan(x)
        with pytest.raises(gpuscan.ResourceExhausted, match="max-request-bytes"):
            c.reduce(x)
        with pytest.raises(gpuscan.ResourceExhausted, match="max-request-bytes"):
            c.compact(x, where=x > 0, indices=True)
        y = x[:1000]  # 4000 bytes: fits
        np.testing.assert_array_equal(c.scan(y), ref.scan(y, "sum", False))
        assert len(c._lane_channels) == 2
    # Refused at the header on every lane: the server's InvalidArgument, not a cancellation.
    xf = ref.random_array(rng, np.dtype(np.float64), 100)
    with pytest.raises(gpuscan.InvalidArgument):
        lc.scan(xf, op="bit_or", lanes=3)
    with pytest.raises(gpuscan.InvalidArgument):
        lc.reduce(xf, op="bit_and", lanes=3)
    assert same_bits(lc.scan(xf, lanes=3), lc.scan(xf, lanes=1))


def test_async_client_lanes(lane_server, rng):
    async def main():
        async with gpuscan.AsyncClient(lane_server.target, chunk_bytes=CHUNK_BYTES, lanes=3, timeout=60) as c:
            for dtype in ref.DTYPES:
                for n in lengths(dtype):
                    x = ref.random_array(rng, dtype, n)
                    single = await c.scan(x, exclusive=True, lanes=1)
                    for k in (None, 2, 8):  # None: the client's 3
                        out = np.empty_like(x)
                        assert await c.scan(x, exclusive=True, out=out, lanes=k) is out
                        assert same_bits(out, single), (dtype, n, k)
                        got = await c.reduce(x, op="max", lanes=k)
                        assert got.tobytes() == ref.reduce(x, "max").tobytes()
                        mask = x > 0
                        v, i = await c.compact(x, where=mask, indices=True, lanes=k)
                        assert same_bits(v, x[mask]) and same_bits(i, np.flatnonzero(mask).astype(np.int64))
                    assert c.last_timing.bytes_in == n * dtype.itemsize + n  # the compact's values and flags
            assert len(c._lane_channels) == 8
            x = ref.random_array(rng, np.dtype(np.int64), 777)
            outs = await asyncio.gather(*(c.scan(x[j:], op="bit_xor", lanes=2 + j) for j in range(5)))
            for j, o in enumerate(outs):
                np.testing.assert_array_equal(o, ref.scan(x[j:], "bit_xor", False))
            with pytest.raises(gpuscan.InvalidArgument):
                await c.scan(x.astype(np.float32), op="bit_or")
            np.testing.assert_array_equal(await c.scan(x), ref.scan(x, "sum", False))
            r = await c.transport(10_500, chunk_bytes=1000, lanes=3)
            assert r.bytes_in == 10_500 and r.bytes_received == 10_500 and r.requests == 11
            with pytest.raises(ValueError, match="lanes"):
                await c.reduce(x, lanes=0)
    asyncio.run(main())


def test_async_cancel_cancels_every_lane(lane_server, rng):
    """Cancelling the task of a laned call cancels all its lanes (the server logs each as
    CANCELLED) and the client carries on."""
    x = ref.random_array(rng, np.dtype(np.int32), 200_000)  # 12,500 chunks of 64 bytes
    out = np.zeros_like(x)

    async def main():
        async with gpuscan.AsyncClient(lane_server.target, chunk_bytes=CHUNK_BYTES, timeout=60) as c:
            await c.info()
            task = asyncio.create_task(c.scan(x, op="bit_or", out=out, lanes=3))
            # Chunk i travels on lane i mod 3: once chunks 0-2 have results, every lane's call is
            # under way on the server (waiting for chunk 0 alone let a loaded host cancel before
            # lane 2 had reached it, and the server never logged it).
            while not all(out[16 * i:16 * (i + 1)].any() for i in range(3)):
                assert not task.done()
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not out[-16:].any()  # it did stop early
            y = x[:1000]
            np.testing.assert_array_equal(await c.scan(y, lanes=3), ref.scan(y, "sum", False))
    before = len(lane_lines(lane_server))
    asyncio.run(main())
    for _ in range(100):
        lines = [line for line in lane_lines(lane_server)[before:] if line[2] == 3]
        if len(lines) >= 6:
            break
        time.sleep(0.05)
    by_array = {}
    for op, lane, k, array, status in lines:
        by_array.setdefault(array, []).append((lane, status))
    statuses = sorted(sorted(v) for v in by_array.values())
    assert [(0, "CANCELLED"), (1, "CANCELLED"), (2, "CANCELLED")] in statuses, lines
    assert [(0, "OK"), (1, "OK"), (2, "OK")] in statuses, lines
