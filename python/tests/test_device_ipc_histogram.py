"""Histograms of device memory (see device_ipc.py). Against a stand-in server and driver: the
header, and the range found by two reductions on the device; malformed answers. On a GPU with a
server that serves device memory: against numpy.histogram and the streamed path (even bins,
autodetected range, explicit edges; NaN and infinities).
"""
import numpy as np
import pytest

import gpuscan
from gpuscan.v1 import gpuscan_pb2 as pb

import reference as ref
from device_ipc import UUID, Malformed, StandIn, dm, handle_of, same_bits, same_histogram
from device_ipc import cp, dev, fake, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


# -- everywhere: requests and results against a stand-in server and driver
def test_histogram_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(100, "float64", at=20, room=200)
        got = c.histogram(x, 8, range=(-1.5, 2.5))
        h = srv.headers[-1]
        assert (h.dtype, h.bins, h.lo, h.hi, list(h.edges), h.element_count) == \
            (pb.DTYPE_FLOAT64, 8, -1.5, 2.5, [], 100)
        assert (dm(h).device_uuid, dm(h).handle, dm(h).offset, dm(h).bytes) == (UUID, handle_of(1), 160, 800)
        for field in ("output", "indices", "flags", "values", "values_output"):  # a histogram writes nothing
            assert not getattr(dm(h), f"{field}_handle") and not getattr(dm(h), f"{field}_offset"), field
        assert isinstance(got, gpuscan.HistogramResult) and got.counts.dtype == np.uint64
        assert got.counts.tolist() == list(range(8)) and got.edges.tolist() == np.linspace(-1.5, 2.5, 9).tolist()
        assert (got.below, got.above, got.nan_count, got.element_count) == (1, 2, 3, 100)
        assert c.last_timing.total_us == 8 and len(fake.allocations) == 1  # nothing allocated

        counts, edges = c.histogram(x, [0, 1, 1, 5.5])  # explicit edges, as float64
        h = srv.headers[-1]
        assert list(h.edges) == [0.0, 1.0, 1.0, 5.5] and h.bins == 0 and dm(h).handle == handle_of(1)
        assert counts.tolist() == [0, 1, 2] and edges.tolist() == [0.0, 1.0, 1.0, 5.5]

        # range=None: x's min and max, from two reductions of x where it lies, then the header the
        # host path sends for an array of those extremes (numpy's bins of a float32 array's range)
        for dtype, lo, hi, bins in (("int32", -3, 42, 5), ("uint64", 2**63 + 5, 2**64 - 1, 3),
                                    ("float32", -1.3, 2.7, 7), ("float64", 0.1, 0.7, 1000), ("int64", 9, 9, 2)):
            xs = fake.array(77, dtype, at=5, room=90)
            srv.reduced = {pb.OPERATOR_MIN: lo, pb.OPERATOR_MAX: hi}
            before = len(srv.headers)
            got = c.histogram(xs, bins)
            mn, mx, hd = srv.headers[before:]
            assert isinstance(mn, pb.ReduceHeader) and isinstance(mx, pb.ReduceHeader), (mn, mx)
            assert (mn.op, mx.op) == (pb.OPERATOR_MIN, pb.OPERATOR_MAX)
            assert mn.dtype == mx.dtype == hd.dtype and mn.element_count == mx.element_count == 77
            assert mn.device_memory == mx.device_memory == hd.device_memory and dm(hd).offset == 5 * xs.dtype.itemsize
            host = np.array([hi, lo] + [lo] * 75, dtype)  # the same extremes on the host: streamed
            want = c.histogram(host, bins)
            hh = srv.headers[-1]
            assert not hh.HasField("device_memory") and hh.element_count == 77
            hd.ClearField("device_memory")
            assert hd == hh, (dtype, hd, hh)
            assert got.edges.tolist() == want.edges.tolist() and got.counts.tolist() == want.counts.tolist()

        srv.reduced = {pb.OPERATOR_MIN: np.nan, pb.OPERATOR_MAX: 1.0}  # NaN in x: numpy's autodetected range fails
        before = len(srv.headers)
        with pytest.raises(ValueError, match="autodetected range of .* is not finite"):
            c.histogram(fake.array(10, "float32"), 4)
        assert all(isinstance(h, pb.ReduceHeader) for h in srv.headers[before:])  # no histogram call
        srv.reduced = {}
        c.histogram(x, 3, range=(0, 1), retries=2, copy=True)  # retries= checked, copy= ignored: one call
        assert len(srv.headers) == 25  # 1 + 1 + 5 x (2 reductions, the histogram, the host's) + 2 + 1
        assert fake.synchronized == [1] * 9  # one wait per histogram of a device array, before its reductions


@pytest.mark.parametrize("how, words", [("count", "histogram counted 11 elements"), ("edges", "2 histogram counts")])
def test_malformed_histogram_answers(serve_servicer, fake, how, words):
    with gpuscan.Client(serve_servicer(Malformed(how)), native=False) as c:
        with pytest.raises(gpuscan.Internal, match=words):
            c.histogram(fake.array(10), 1, range=(0, 1))


# -- a GPU, CuPy and a server that serves device memory
def inner_range(x):
    """A range that leaves some of x out on both sides (as test_histogram's)."""
    lo, hi = np.quantile(x.astype(np.float64), [0.2, 0.7])
    d = max(1.0, 1e5 * float(np.spacing(abs(lo))))
    return (float(lo), float(hi)) if lo < hi else (float(lo) - d, float(lo) + d)


def collapses(x) -> bool:
    """x's autodetected range stays one point in float64 widened by 0.5 (one value beyond 2^53)."""
    lo, hi = float(x.min()), float(x.max())
    return lo == hi and lo - 0.5 == hi + 0.5


def histogram_cases(rng, x):
    """(bins, range) pairs for x (finite): even bins over an inner range, one bin, the autodetected
    range (None), explicit edges (repeated, infinite)."""
    r = inner_range(x)
    q = np.quantile(x.astype(np.float64), [0.0, 0.1, 0.1, 0.5, 0.9, 1.0])
    return [(16, r), (1, r), (int(rng.integers(2, 300)), None), (q, None),
            (np.array([-np.inf, q[1], q[3], np.inf]), None), (np.array([q[2], q[2]]), (0.0, 1.0))]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_histogram(cp, dev, rng, dtype):
    """Every dtype at 1, 4097 and 2^20 + 3 elements against the same server's streamed path (bit
    for bit), and numpy.histogram's counts except for a float32 array's even bins (numpy's float32
    edge arithmetic: the streamed path's test_histogram checks those against numpy); floats again
    with NaN and +-inf (an autodetected range then fails, as numpy's)."""
    for n in (1, 4097, (1 << 20) + 3):
        x = ref.random_array(rng, dtype, n)
        passes = [x]
        if dtype.kind == "f":
            special = x.copy()
            at = rng.integers(0, n, max(n // 50, 1))
            special[at] = rng.choice(np.array([np.nan, np.inf, -np.inf], dtype), len(at))
            passes.append(special)
        cases = histogram_cases(rng, x)
        for xs in passes:
            xd = cp.asarray(xs)
            for bins, r in cases:
                where = f"{dtype} n={n} bins={bins} range={r} specials={xs is not x}"
                finite = dtype.kind != "f" or np.isfinite(xs).all()
                if r is None and np.ndim(bins) == 0 and not finite:
                    for arr in (xd, xs):  # NaN or inf in x.min()/x.max(), as numpy
                        with pytest.raises(ValueError, match="autodetected range"):
                            dev.histogram(arr, bins)
                    continue
                if r is None and np.ndim(bins) == 0 and collapses(xs):  # the server refuses lo >= hi, both paths
                    for arr in (xd, xs):
                        with pytest.raises(gpuscan.InvalidArgument, match=r"\blo\b"):
                            dev.histogram(arr, bins)
                    continue
                got = dev.histogram(xd, bins, range=r)
                assert dev.last_timing.engine == "cuda", (where, dev.last_timing)
                same_histogram(got, dev.histogram(xs, bins, range=r), where)
                if dtype != np.float32 or np.ndim(bins) != 0:
                    with np.errstate(invalid="ignore"):
                        counts, edges = np.histogram(xs, bins, r)
                    assert same_bits(got.counts, counts.astype(np.uint64)), where
                    np.testing.assert_array_equal(got.edges, edges.astype(np.float64), err_msg=where)
            assert same_bits(cp.asnumpy(xd), xs)  # read, never written
    m = ref.random_array(rng, dtype, 7000)
    for bins, r in ((10, (-1.0, 1.0)), (10, None)):  # any shape: all its elements, as numpy's
        same_histogram(dev.histogram(cp.asarray(m).reshape(7, 1000), bins, range=r), dev.histogram(m, bins, range=r))
