"""histogram (Client/AsyncClient) against numpy.histogram on random data (never all zeros): every
dtype, lengths around the chunk boundaries of several chunk sizes, values on the edges, outside the
range, NaN and +-inf, explicit edges (repeated, infinite), 1 bin and many, empty arrays, float32
edges that float32 cannot hold, int64/uint64 beyond 2^53; below/above/nan_count against the same
comparisons numpy made (float32 for a float32 array's even bins, float64 otherwise). Then what the
client refuses (ValueError) and what the server refuses (INVALID_ARGUMENT naming the field, with
headers sent raw where the client would refuse them), info(), retries and the async client."""
import asyncio
import dataclasses
import math
import threading

import grpc
import numpy as np
import pytest

import gpuscan
import reference as ref
from conftest import SMALL_CHUNK_BYTES
from gpuscan import _chunking, _wire
from gpuscan.client import DEFAULT_CHUNK_BYTES
from gpuscan.errors import from_rpc_error
from gpuscan.testing import ServerProcess
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc
from test_retries import free_port

CHUNK_SIZES = [SMALL_CHUNK_BYTES, 1000, 4096, DEFAULT_CHUNK_BYTES]  # 1000: not a multiple of 8
FLOATS = [d for d in ref.DTYPES if d.kind == "f"]


def expect(got, x, bins, range=None):
    """got equals np.histogram(x, bins, range): counts, and edges as float64 (numpy's float32
    edges of a float32 array's even bins widen exactly); below/above/nan_count by numpy's own
    comparison type. Ranges and edges are passed as floats: numpy then compares integers as float64
    as the proto does (with Python ints it would compare int64 exactly)."""
    with np.errstate(invalid="ignore"):
        counts, edges = np.histogram(x, bins, range)
    assert isinstance(got, gpuscan.HistogramResult)
    assert got.counts.dtype == np.uint64 and got.edges.dtype == np.float64
    what = f"{x.dtype} n={len(x)} bins={bins if np.ndim(bins) == 0 else list(bins)} range={range}"
    np.testing.assert_array_equal(got.counts, counts.astype(np.uint64), err_msg=what)
    np.testing.assert_array_equal(got.edges, edges.astype(np.float64), err_msg=what)
    xc = x if edges.dtype == np.float32 else x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = (np.count_nonzero(xc < edges[0]), np.count_nonzero(xc > edges[-1]),
                np.count_nonzero(np.isnan(xc)), len(x))
    assert (got.below, got.above, got.nan_count, got.element_count) == want, what
    assert int(got.counts.sum()) + got.below + got.above + got.nan_count == len(x), what


def boundary_lengths(chunk_bytes, dtype):
    per = _chunking.chunk_elements(chunk_bytes, dtype.itemsize)
    return sorted({0, 1, per - 1, per, per + 1, 2 * per + 1} if per > 1000 else
                  {0, 1, 2, per - 1, per, per + 1, 3 * per - 1, 3 * per + 1})


def inner_range(x):
    """A range that leaves some of x out on both sides (floats, as the client sends them)."""
    lo, hi = np.quantile(x.astype(np.float64), [0.2, 0.7])
    # One value: a range around it wide enough that float64 keeps the even edges apart (where
    # rounding repeats them, numpy's even-bin fast path can count x in an empty bin [E, E)).
    d = max(1.0, 1e5 * float(np.spacing(abs(lo))))
    return (float(lo), float(hi)) if lo < hi else (float(lo) - d, float(lo) + d)


def collapses(x) -> bool:
    """x's autodetected range stays one point in float64 even widened by 0.5 (one value beyond
    2^53): numpy fails there (IndexError), the server refuses lo >= hi (test_collapsed_range)."""
    lo, hi = float(x.min()), float(x.max())
    return lo == hi and lo - 0.5 == hi + 0.5


def raw_histogram(target, header, data=b""):
    """One Histogram call with a header the client would not build; grpc errors as gpuscan's."""
    with grpc.insecure_channel(target) as ch:
        try:
            return pb_grpc.GpuScanStub(ch).Histogram(iter([pb.HistogramRequest(header=header, data=data)]),
                                                     timeout=30)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None


@pytest.fixture(scope="module")
def clients(target):
    cs = [gpuscan.Client(target, chunk_bytes=cb, timeout=60) for cb in CHUNK_SIZES]
    yield cs
    for c in cs:
        c.close()


@pytest.fixture(scope="module")
def max_bins(client):
    return client.info()["limits"]["max_histogram_bins"]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_dtypes_and_chunk_boundaries(clients, rng, dtype):
    for c in clients:
        for n in boundary_lengths(c.chunk_bytes, dtype):
            x = ref.random_array(rng, dtype, n)
            bins = int(rng.integers(1, 40))
            if n == 0 or not collapses(x):
                expect(c.histogram(x, bins), x, bins)
                assert c.last_timing.bytes_in == x.nbytes
            if n:
                r = inner_range(x)
                expect(c.histogram(x, bins, range=r), x, bins, r)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_values_on_the_edges(client, rng, dtype):
    # Integer edges 0..10 (exact in every dtype), x on them, hi itself included, some outside.
    x = rng.integers(0 if dtype.kind == "u" else -3, 13, 600).astype(dtype)
    x[:5] = 10
    expect(client.histogram(x, 10, range=(0.0, 10.0)), x, 10, (0.0, 10.0))
    expect(client.histogram(x, 4, range=(0.0, 9.0)), x, 4, (0.0, 9.0))
    e = np.array([0.0, 2.0, 3.0, 7.0, 10.0])
    expect(client.histogram(x, e), x, e)
    if dtype.kind == "f":
        # Edges of 0.1..0.7 (not integers: float32 rounds them), x on each edge and its neighbours.
        edges = np.histogram(np.zeros(0, dtype), 6, (0.1, 0.7))[1]
        x = rng.choice(np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)]), 600)
        x = x.astype(dtype)
        expect(client.histogram(x, 6, range=(0.1, 0.7)), x, 6, (0.1, 0.7))
        expect(client.histogram(x, edges.astype(np.float64)), x, edges.astype(np.float64))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_inf_and_outside(client, rng, dtype):
    x = (rng.standard_normal(2000) * 3).astype(dtype)
    x[rng.random(2000) < 0.1] = np.nan
    x[rng.random(2000) < 0.03] = np.inf
    x[rng.random(2000) < 0.03] = -np.inf
    for bins, r in [(12, (-1.0, 2.0)), (1, (-0.5, 0.5)), (7, (-100.0, 100.0))]:
        expect(client.histogram(x, bins, range=r), x, bins, r)
    for e in ([-np.inf, -1.0, 0.0, 0.0, 2.5, np.inf], [-np.inf, np.inf], [0.0, 1.0, np.inf], [-np.inf, -2.0]):
        e = np.array(e)
        got = client.histogram(x, e)
        expect(got, x, e)
        if e[-1] == np.inf:  # +inf equals the last edge: counted in the last bin
            assert got.counts[-1] >= np.count_nonzero(x == np.inf) > 0 and got.above == 0
    with pytest.raises(ValueError, match="autodetected range"):
        client.histogram(x, 10)  # NaN in x.min(), as numpy
    with pytest.raises(ValueError, match="autodetected range"):
        client.histogram(np.array([1.0, np.inf], dtype), 10)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_explicit_edges(client, rng, dtype):
    x = ref.random_array(rng, dtype, 3000)
    picks = rng.choice(x, 6).astype(np.float64)
    repeated = np.sort(np.repeat(picks, rng.integers(1, 4, 6)))  # repeats inside
    for e in (np.sort(picks), repeated, np.append(repeated, repeated[-1]),  # a repeated last edge: [e, e]
              np.array([repeated[0], repeated[-1]]), np.array([picks.min()] * 3)):
        expect(client.histogram(x, e), x, e)
        expect(client.histogram(x, list(e), range=(0.0, 1.0)), x, e)  # range ignored with edges
    small = np.array([0, 1, 5, 9], dtype)
    got = client.histogram(small, [0, 5, 9])  # integer edges, as a list
    np.testing.assert_array_equal(got.counts, [2, 2])
    np.testing.assert_array_equal(got.edges, [0.0, 5.0, 9.0])


def test_one_bin_and_many(big_client, rng, max_bins):
    many = min(10_000, max_bins)
    for dtype in (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint64)):
        x = ref.random_array(rng, dtype, 200_000)
        r = inner_range(x)
        for bins in (1, many):
            expect(big_client.histogram(x, bins), x, bins)
            expect(big_client.histogram(x, bins, range=r), x, bins, r)
    if max_bins <= 1 << 20:  # the cap itself is accepted
        x = ref.random_array(rng, np.dtype(np.float64), 5000)
        expect(big_client.histogram(x, max_bins), x, max_bins)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_empty(client, dtype):
    x = np.zeros(0, dtype)
    for bins, r in [(5, None), (3, (2.0, 3.0)), (np.array([1.0, 2.0, 4.0]), None)]:
        got = client.histogram(x, bins, range=r)
        expect(got, x, bins, r)
        assert not got.counts.any() and len(got.edges) == len(got.counts) + 1 and got.element_count == 0


def test_float32_edges_not_representable(client, rng):
    """Even edges computed in float64, then rounded to float32; elements compared in float32."""
    for r in [(0.1, 0.7), (1 / 3, 2 / 3), (-0.3, 1e-3), (1e-8, 1.0 + 1e-7)]:
        for bins in (3, 7, 10, 1000):
            want_edges = np.histogram(np.zeros(0, np.float32), bins, r)[1]
            assert want_edges.dtype == np.float32
            assert (want_edges.astype(np.float64) != np.linspace(r[0], r[1], bins + 1)).any()  # rounding shows
            near = np.concatenate([want_edges, np.nextafter(want_edges, -np.inf), np.nextafter(want_edges, np.inf)])
            x = np.concatenate([rng.choice(near, 1000), rng.uniform(r[0] - 0.1, r[1] + 0.1, 1000).astype(np.float32),
                                np.array([r[0], r[1]], np.float64).astype(np.float32)])
            rng.shuffle(x)
            expect(client.histogram(x, bins, range=r), x, bins, r)


def test_integers_beyond_2_53(client, rng):
    """Integers compare as float64: 2^53 + 1 rounds to 2^53 and sits on that edge."""
    b = 2 ** 53
    x = np.array([b + k for k in range(-40, 41)] + [b + 1] * 5 + [-b - 1, -b + 1], np.int64)
    rng.shuffle(x)
    for bins, r in [(8, (float(b - 32), float(b + 32))), (3, (float(b), float(b + 6))), (5, None)]:
        expect(client.histogram(x, bins, range=r), x, bins, r)
    for e in (np.array([0.0, float(b)]), np.array([float(b), b + 2.0, b + 4.0, b + 8.0])):
        expect(client.histogram(x, e), x, e)
    got = client.histogram(np.array([b + 1], np.int64), np.array([0.0, float(b)]))
    assert got.counts[0] == 1 and got.above == 0
    u = np.array([2 ** 64 - 1 - k for k in range(0, 5000, 7)] + [2 ** 63, 2 ** 63 + 1, 3], np.uint64)
    for bins, r in [(6, None), (4, (float(2 ** 63), float(2 ** 64 - 2048)))]:
        expect(client.histogram(u, bins, range=r), u, bins, r)
    extremes = np.array([-2 ** 63, 2 ** 63 - 1, 0, 1, -1, 2 ** 62], np.int64)
    expect(client.histogram(extremes, 4), extremes, 4)


def test_collapsed_range(client):
    """One value beyond 2^53: x.min() - 0.5 == x.max() + 0.5 in float64, so the autodetected range
    is still empty (numpy raises IndexError there); the client sends it as it is and the server
    refuses lo >= hi. A range that fits works."""
    for x in (np.array([2 ** 60], np.int64), np.array([2 ** 60, 2 ** 60 + 1], np.uint64), np.array([1e17, 1e17])):
        assert collapses(x)
        with pytest.raises(gpuscan.InvalidArgument, match=r"\blo\b"):
            client.histogram(x, 4)
        r = (float(x[0]) - 1024, float(x[0]) + 1024)
        expect(client.histogram(x, 4, range=r), x, 4, r)


def test_result_timing_and_copy(target, rng, tmp_path):
    with gpuscan.Client(target, chunk_bytes=4096, timeout=60) as c:
        x = ref.random_array(rng, np.dtype(np.float64), 3000)  # 24000 bytes: 6 chunks of 4096
        result = c.histogram(x, 16, range=(-1.0, 1.0))
        counts, edges = result  # numpy's pair
        assert counts is result.counts and edges is result.edges and len(list(result)) == 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.below = 0
        counts[0] += 1  # the caller's own arrays
        t = c.last_timing
        assert isinstance(t, gpuscan.Timing) and t.bytes_in == 24000 and t.chunks == 6 and t.engine
        # copy=True sends a strided or big-endian array; lists are converted.
        strided = x[::3]
        expect(c.histogram(strided, 5, copy=True), np.ascontiguousarray(strided), 5)
        big = x.astype(">f8")
        expect(c.histogram(big, 5, range=(0.0, 1.0), copy=True), x, 5, (0.0, 1.0))
        expect(c.histogram([1, 2, 2, 3], 2), np.array([1, 2, 2, 3]), 2)
        # A shared array is streamed like any other (no shared-memory histogram on the server).
        a = gpuscan.shared_array(1000, "int32", dir=str(tmp_path))
        a[:] = ref.random_array(rng, np.dtype(np.int32), 1000)
        expect(c.histogram(a, 9), np.asarray(a), 9)
        a.close()


@pytest.mark.parametrize("x, kw, what", [
    (np.arange(1, 10, dtype=np.int32)[::2], {}, "not contiguous"),
    (np.arange(1, 10, dtype=">i4"), {}, "big-endian"),
    (np.arange(1, 10, dtype=np.complex64), {}, "not served"),
    (np.ones((3, 2), np.float32).T, {}, "not C-contiguous"),  # a C-contiguous N-D x is flattened (test_nd.py)
    (np.float32(3), {}, "scalar"),
    (np.arange(1, 10, dtype=np.float64), {"bins": 0}, "bins must be >= 1"),
    (np.arange(1, 10, dtype=np.float64), {"bins": -4}, "bins must be >= 1"),
    (np.arange(1, 10, dtype=np.float64), {"bins": 2.5}, "bins must be an integer"),
    (np.arange(1, 10, dtype=np.float64), {"bins": "auto"}, "bins must be an integer"),
    (np.arange(1, 10, dtype=np.float64), {"bins": [[0, 1], [2, 3]]}, "bins must be an integer or a 1-D"),
    (np.arange(1, 10, dtype=np.float64), {"range": (0, math.inf)}, "range .* not finite"),
    (np.arange(1, 10, dtype=np.float64), {"range": (math.nan, 1)}, "range .* not finite"),
    (np.arange(1, 10, dtype=np.float64), {"range": (1,)}, "range must be a pair"),
    (np.array([1.0, np.nan]), {}, "autodetected range"),
])
def test_client_side_value_errors(client, x, kw, what):
    with pytest.raises(ValueError, match=what):
        client.histogram(x, **kw)


@pytest.mark.parametrize("header, data, field", [
    ({"bins": 0, "lo": 0.0, "hi": 1.0}, b"", r"\bbins\b|\bedges\b"),  # bins 0, no edges: neither
    ({}, b"", r"\bbins\b|\bedges\b"),
    ({"bins": 2, "lo": 0.0, "hi": 1.0, "edges": [0.0, 1.0]}, b"", r"\bbins\b|\bedges\b"),
    ({"bins": 4, "lo": 1.0, "hi": 1.0}, b"", r"\blo\b"),
    ({"bins": 4, "lo": 2.0, "hi": 1.0}, b"", r"\blo\b"),
    ({"bins": 4, "lo": math.nan, "hi": 1.0}, b"", r"\blo\b"),
    ({"bins": 4, "lo": -math.inf, "hi": 1.0}, b"", r"\blo\b"),
    ({"bins": 4, "lo": 0.0, "hi": math.inf}, b"", r"\bhi\b"),
    ({"bins": 4, "lo": -1.7e308, "hi": 1.7e308}, b"", r"\blo\b|\bhi\b"),  # hi - lo overflows
    ({"bins": "max+1", "lo": 0.0, "hi": 1.0}, b"", r"\bbins\b"),
    ({"edges": [1.0]}, b"", r"\bedges\b"),
    ({"edges": [0.0, math.nan, 1.0]}, b"", r"\bedges\b"),
    ({"edges": [0.0, 2.0, 1.0]}, b"", r"\bedges\b"),
    ({"dtype": pb.DTYPE_UNSPECIFIED, "bins": 4, "lo": 0.0, "hi": 1.0}, b"", r"\bdtype\b"),
    ({"bins": 4, "lo": 0.0, "hi": 1.0, "element_count": 5}, np.ones(3).tobytes(), r"\belement_count\b"),
])
def test_server_rejects_headers(target, max_bins, header, data, field):
    h = {"dtype": pb.DTYPE_FLOAT64, **header}
    if h.get("bins") == "max+1":
        h["bins"] = max_bins + 1
    with pytest.raises(gpuscan.InvalidArgument, match=field) as e:
        raw_histogram(target, pb.HistogramHeader(**h), data)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_server_judges_through_the_client(client, max_bins):
    """What the client passes on as the proto defines it, for the server to refuse."""
    x = np.arange(1, 50, dtype=np.float64)
    for kw, field in [({"bins": max_bins + 1}, r"\bbins\b"), ({"bins": 4, "range": (2, 1)}, r"\blo\b"),
                      ({"bins": [0.0, math.nan, 1.0]}, r"\bedges\b"), ({"bins": [0, 2, 1]}, r"\bedges\b"),
                      ({"bins": [1.0]}, r"\bedges\b"), ({"bins": []}, r"\bbins\b|\bedges\b"),
                      ({"bins": 4, "range": (-1.7e308, 1.7e308)}, r"\blo\b|\bhi\b")]:
        with pytest.raises(gpuscan.InvalidArgument, match=field):
            client.histogram(x, **kw)
    expect(client.histogram(x, 3), x, 3)  # the client carries on


def test_framing_matches_generated_messages():
    """Histogram requests go through the reduce path's hand framing (gpuscan._wire)."""
    x = np.arange(1, 301, dtype=np.float64)
    first = pb.HistogramRequest(header=pb.HistogramHeader(dtype=pb.DTYPE_FLOAT64, edges=[0.0, 1.5, 400.0]))
    reqs = list(_chunking.data_requests(first, _wire.HISTOGRAM_DATA, x, 200))
    assert reqs[0] == pb.HistogramRequest(header=first.header, data=x[:200].tobytes()).SerializeToString()
    assert reqs[1] == pb.HistogramRequest(data=x[200:].tobytes()).SerializeToString() and len(reqs) == 2


def test_info(client):
    info = client.info()
    assert {"scan", "reduce", "compact", "histogram", "segmented_scan", "reduce_by_key"} <= set(info["operations"])
    assert info["limits"]["max_histogram_bins"] >= 1


def test_retried_until_the_server_is_up(server_binary, rng):
    """The in-memory array is sent again: the first tries find no server, a later one succeeds."""
    port = free_port()
    x = ref.random_array(rng, np.dtype(np.int64), 5000)
    seen = []
    options = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 100)]
    started = []
    starter = threading.Timer(0.3, lambda: started.append(ServerProcess(server_binary, port=port)))
    with gpuscan.Client(f"127.0.0.1:{port}", chunk_bytes=4096, timeout=30, options=options, backoff=(0.02, 0.1), retries=0,
                        on_retry=lambda e, n, w: seen.append(e.code)) as c:
        with pytest.raises(gpuscan.Unavailable):
            c.histogram(x, 8)  # the client's retries=0: no on_retry
        assert not seen
        starter.start()
        try:
            expect(c.histogram(x, 8, retries=200), x, 8)
        finally:
            starter.join()
            for s in started:
                s.stop()
    assert seen and set(seen) == {grpc.StatusCode.UNAVAILABLE}


def test_async_client(target, rng, max_bins):
    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=1000, timeout=60) as c:
            for dtype in ref.DTYPES:
                x = ref.random_array(rng, dtype, 777)
                expect(await c.histogram(x, 13), x, 13)
                assert c.last_timing.bytes_in == x.nbytes
            x = ref.random_array(rng, np.dtype(np.float32), 5000)
            counts, edges = await c.histogram(x, 50, range=(-0.3, 0.7))
            np.testing.assert_array_equal(counts, np.histogram(x, 50, (-0.3, 0.7))[0])
            e = np.array([-1.0, 0.0, 0.0, 2.0])
            expect(await c.histogram(x, e), x, e)
            with pytest.raises(gpuscan.InvalidArgument, match=r"\bbins\b"):
                await c.histogram(x, max_bins + 1)
            with pytest.raises(gpuscan.InvalidArgument, match=r"\bedges\b"):
                await c.histogram(x, [0.0, 2.0, 1.0])
            with pytest.raises(ValueError, match="bins"):
                await c.histogram(x, 0)
            parts = [x[:k * 250] for k in range(1, 6)]

            async def one(p):  # last_timing is per task
                r = await c.histogram(p, 7)
                await asyncio.sleep(0.01)
                return r, c.last_timing.bytes_in
            for p, (r, bytes_in) in zip(parts, await asyncio.gather(*(one(p) for p in parts))):
                expect(r, p, 7)
                assert bytes_in == p.nbytes
    asyncio.run(main())
