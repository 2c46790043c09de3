"""Narrow inputs beyond scan and reduce (test_narrow.py): segmented_scan and reduce_by_key of
int8, uint8, int16, uint16, bool and float16 values with numpy's dtype= (the accumulator: numpy's
default or chosen), compact, sort/argsort (keys and values) and histogram of them as they are, on
random data against numpy; lengths around the chunk boundaries (each chunk holds CHUNK bytes of
the widest array a request or response carries). float16 sums against the server's own float32
result of the same values rounded once (its association is float32's); kept and sorted float16
values bit for bit (NaN payloads, -0.0, inf). Then what the client refuses and info()."""
import asyncio

import numpy as np
import pytest

import gpuscan

CHUNK = 512  # bytes per request: 512 int8 ... 64 int64 elements, a few chunks for a few hundred
NARROW = ["int8", "uint8", "int16", "uint16", "float16", "bool"]
INTS = ["int8", "uint8", "int16", "uint16", "bool"]
UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}


@pytest.fixture(scope="module", params=[None, False], ids=["default_path", "grpcio"])
def paths(target, request):
    """Both data paths: compact's C API one where it loads, and grpcio's."""
    with gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60, native=request.param) as c:
        yield c


@pytest.fixture(scope="module")
def c(target):
    """segmented_scan, reduce_by_key, sort and histogram take grpcio on every client."""
    with gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60) as c:
        yield c


def lengths(*itemsizes):
    """0, 1, around one chunk, a few chunks and an odd part, for requests of the widest itemsize."""
    per = CHUNK // max(itemsizes)
    return [0, 1, per - 1, per, per + 1, 3 * per + 5]


def values(rng, dtype, n, narrow_range=False):
    """Random values of dtype (never all zeros for n > 1); narrow_range: few distinct ones."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.4
    if dt.kind == "f":
        if narrow_range:
            return rng.integers(-3, 4, n).astype(dt) * dt.type(0.5)
        return (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 2, n)).astype(dt)
    info = np.iinfo(dt)
    lo, hi = (max(info.min, -3), min(info.max, 3)) if narrow_range else (info.min, info.max)
    return rng.integers(lo, hi, n, dtype=dt, endpoint=True)


def run_keys(rng, n, dtype="int16"):
    """Keys in runs of 1..12 equal ones (narrow: the client widens them to int32/uint32)."""
    lengths_ = rng.integers(1, 13, n + 1)
    return np.repeat(rng.integers(-50, 50, n + 1), lengths_)[:n].astype(dtype)


def starts_of(n, keys=None, heads=None):
    s = np.zeros(n, bool)
    if n:
        s[0] = True
        s[1:] = keys[1:] != keys[:-1] if keys is not None else heads[1:]
    return s


def identity(op, dt):
    if op == "sum":
        return dt.type(0)
    big = np.inf if dt.kind == "f" else np.iinfo(dt).max
    return dt.type(big if op == "min" else (-np.inf if dt.kind == "f" else np.iinfo(dt).min))


def segmented_ref(x, starts, op, exclusive, acc):
    """Each segment of x.astype(acc) folded by numpy (integers wrap, as numpy and C do)."""
    xx = x.astype(acc)
    out = np.empty(len(x), acc)
    bounds = np.append(np.flatnonzero(starts), len(x))
    for s, e in zip(bounds[:-1], bounds[1:]):
        inc = UFUNC[op].accumulate(xx[s:e])
        if exclusive:
            out[s] = identity(op, np.dtype(acc))
            out[s + 1:e] = inc[:-1]
        else:
            out[s:e] = inc
    return out


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == np.float16 else a


def same(got, want, what=""):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert np.array_equal(bits(got), bits(want)), what


# -- segmented_scan and reduce_by_key: accumulated in dtype=

@pytest.mark.parametrize("dtype", INTS)
def test_segmented_scan_integers(c, rng, dtype):
    dt = np.dtype(dtype)
    default = np.cumsum(np.ones(1, dt)).dtype  # numpy's: int64, or uint64 for uint8/uint16
    for n in lengths(dt.itemsize, 8):
        x = values(rng, dt, n)
        keys = run_keys(rng, n)
        heads = rng.random(n) < 0.15
        sk, sh = starts_of(n, keys=keys), starts_of(n, heads=heads)
        what = (dtype, n)
        same(c.segmented_scan(x, keys), segmented_ref(x, sk, "sum", False, default), what)
        assert c.last_timing.bytes_in == x.nbytes + 4 * n  # narrow values, keys widened to int32
        same(c.segmented_scan(x, heads=heads, exclusive=True, dtype="int32"),
             segmented_ref(x, sh, "sum", True, np.int32), what)
        same(c.segmented_scan(x, keys, op="max", exclusive=True, dtype="uint64"),
             segmented_ref(x, sk, "max", True, np.uint64), what)
        same(c.segmented_scan(x, heads=heads.view(np.uint8), op="min", dtype="int64"),
             segmented_ref(x, sh, "min", False, np.int64), what)
        same(c.segmented_scan(x, keys, dtype="float64"), segmented_ref(x, sk, "sum", False, np.float64), what)
        out = np.empty(n, np.uint32)
        assert c.segmented_scan(x, heads=heads, dtype="uint32", out=out) is out
        same(out, segmented_ref(x, sh, "sum", False, np.uint32), what)


def test_segmented_scan_float16(c, rng):
    for n in lengths(2, 4):
        h = values(rng, "float16", n)
        keys = run_keys(rng, n, "int64")
        heads = rng.random(n) < 0.1
        what = n
        wide = c.segmented_scan(h.astype(np.float32), keys)  # the same association, in float32
        same(c.segmented_scan(h, keys), wide.astype(np.float16), what)
        wide_ex = c.segmented_scan(h.astype(np.float32), heads=heads, exclusive=True)
        same(c.segmented_scan(h, heads=heads, exclusive=True), wide_ex.astype(np.float16), what)
        same(c.segmented_scan(h, heads=heads, exclusive=True, dtype="float32"), wide_ex, what)
        same(c.segmented_scan(h, keys, dtype=np.float64), c.segmented_scan(h.astype(np.float64), keys), what)
        same(c.segmented_scan(h, keys, op="max", exclusive=True),
             segmented_ref(h, starts_of(n, keys=keys), "max", True, np.float16), what)


@pytest.mark.parametrize("dtype", NARROW)
def test_reduce_by_key(c, rng, dtype):
    dt = np.dtype(dtype)
    for n in lengths(dt.itemsize, 8):
        x = values(rng, dt, n)
        keys = run_keys(rng, n, "uint8" if n % 2 else "int32")
        at = np.flatnonzero(starts_of(n, keys=keys))
        k, v = c.reduce_by_key(x, keys)
        assert k.dtype == (np.uint32 if keys.dtype == np.uint8 else np.int32)
        assert np.array_equal(k, keys[at]), (dtype, n)
        if dt.kind == "f":
            wk, wv = c.reduce_by_key(x.astype(np.float32), keys)
            same(v, wv.astype(np.float16), n)
            same(c.reduce_by_key(x, keys, dtype="float32")[1], wv, n)
            same(c.reduce_by_key(x, keys, op="min")[1],
                 np.minimum.reduceat(x, at) if n else np.zeros(0, np.float16), n)
            continue
        default = np.sum(np.ones(1, dt)).dtype

        def want(op, acc):
            return UFUNC[op].reduceat(x.astype(acc), at) if n else np.zeros(0, acc)
        same(v, want("sum", default), (dtype, n))
        same(c.reduce_by_key(x, keys, op="max", dtype="int32")[1], want("max", np.int32), (dtype, n))
        same(c.reduce_by_key(x, keys, dtype=np.uint64)[1], want("sum", np.uint64), (dtype, n))
        same(c.reduce_by_key(x, keys, dtype="float32")[1], want("sum", np.float32), (dtype, n))


# -- compact, sort, histogram: narrow values as they are

def with_specials(rng, h):
    """float16 values with NaN (both signs, payloads), +-0.0, +-inf and 65504 put in at random."""
    special = np.array([0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x8000, 0x0000, 0x7C00, 0xFC00, 0x7BFF, 0x0001],
                       np.uint16).view(np.float16)
    if len(h) >= 2 * len(special):
        h = h.copy()
        h[rng.choice(len(h), len(special), replace=False)] = special
    return h


@pytest.mark.parametrize("dtype", NARROW)
def test_compact(paths, rng, dtype):
    c = paths
    dt = np.dtype(dtype)
    for n in lengths(dt.itemsize):
        x = values(rng, dt, n)
        if dt.kind == "f":
            x = with_specials(rng, x)
        mask = rng.random(n) < 0.5
        what = (dtype, n)
        same(c.compact(x, where=mask), x[mask], what)
        v, i = c.compact(x, where=mask.astype(np.int8) * 7, indices=True)
        same(v, x[mask], what)
        assert np.array_equal(i, np.flatnonzero(mask)), what
        if dt.kind == "b":
            same(c.compact(x, predicate="nonzero"), x[x], what)
            same(c.compact(x, predicate=("eq", False)), x[~x], what)
            continue
        t = x[rng.integers(n)].item() if n else 1
        with np.errstate(invalid="ignore"):
            keep = x > t
        same(c.compact(x, predicate=("gt", t)), x[keep], what)
        assert np.array_equal(c.compact(x, predicate=("gt", t), values=False, indices=True),
                              np.flatnonzero(keep)), what
        if dt.kind == "f":
            with np.errstate(invalid="ignore"):
                same(c.compact(x, predicate=("le", 0.1)), x[x <= 0.1], what)  # 0.1 compared in float16
                same(c.compact(x, predicate=("in_range", -0.5, 1e5)), x[(x >= -0.5) & (x < 1e5)], what)
            same(c.compact(x, predicate="not_nan"), x[~np.isnan(x)], what)
        else:
            lo = 0 if dt.kind == "u" else -3
            same(c.compact(x, predicate=("in_range", lo, 100)), x[(x >= lo) & (x < 100)], what)


def test_compact_with_lanes_and_shared_memory(paths, rng):
    """A narrow x streams on one call: lanes= does not apply, a shared one is streamed."""
    c = paths
    x = values(rng, "int16", 5000)
    same(c.compact(x, predicate=("lt", 0), lanes=4), x[x < 0])
    a = c.shared_array(1000, "uint8")
    a[:] = values(rng, "uint8", 1000)
    v, i = c.compact(a, predicate=("ge", 128), indices=True)
    same(v, np.asarray(a)[np.asarray(a) >= 128])
    assert np.array_equal(i, np.flatnonzero(np.asarray(a) >= 128))


def order_key(x):
    """Sort's order as unsigned integers: IEEE totalOrder for float16, two's complement for signed."""
    if x.dtype.kind == "b":
        return x.view(np.uint8)
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    if x.dtype.kind == "u":
        return u
    if x.dtype.kind == "i":
        return u ^ u.dtype.type(1 << (8 * x.dtype.itemsize - 1))
    return np.where(u >> 15, ~u, u | np.uint16(0x8000)).astype(np.uint16)


def stable_order(x, descending):
    k = order_key(x)
    return np.argsort(np.iinfo(k.dtype).max - k if descending else k, kind="stable")


@pytest.mark.parametrize("dtype", NARROW)
def test_sort_and_argsort(c, rng, dtype):
    dt = np.dtype(dtype)
    for n in lengths(dt.itemsize, 8):
        x = values(rng, dt, n, narrow_range=n % 2 == 1)  # odd lengths: many duplicates (stability)
        if dt.kind == "f":
            x = with_specials(rng, x)
        vdt = NARROW[(NARROW.index(dtype) + 1) % len(NARROW)]
        v = values(rng, vdt, n)
        for descending in (False, True):
            what = (dtype, n, descending)
            perm = stable_order(x, descending)
            same(c.sort(x, descending=descending), x[perm], what)
            assert np.array_equal(c.argsort(x, descending=descending), perm), what
            k, i = c.argsort(x, descending=descending, return_keys=True)
            same(k, x[perm], what)
            assert np.array_equal(i, perm), what
            k, sv = c.sort(x, values=v, descending=descending)
            same(k, x[perm], what)
            same(sv, v[perm], what)
        if dt.kind in "iub":
            assert np.array_equal(c.sort(x), np.sort(x, kind="stable"))
            assert np.array_equal(c.argsort(x), np.argsort(x, kind="stable"))


def test_sort_narrow_values_of_wide_keys(c, rng):
    x = values(rng, "int32", 300, narrow_range=True)
    for vdt in NARROW:
        v = with_specials(rng, values(rng, vdt, 300)) if vdt == "float16" else values(rng, vdt, 300)
        perm = stable_order(x, False)
        k, sv = c.sort(x, values=v)
        same(k, x[perm], vdt)
        same(sv, v[perm], vdt)


def expect_histogram(got, x, bins, range=None):
    """got equals np.histogram(x, bins, range): counts, and numpy's edges as float64."""
    with np.errstate(invalid="ignore"):
        counts, edges = np.histogram(x, bins, range)
    what = f"{x.dtype} n={len(x)} bins={bins} range={range}"
    assert np.array_equal(got.counts, counts.astype(np.uint64)), what
    assert np.array_equal(got.edges, edges.astype(np.float64)), what
    xf = x.astype(np.float64)
    assert got.nan_count == np.count_nonzero(np.isnan(xf)) and got.element_count == len(x), what
    assert int(got.counts.sum()) + got.below + got.above + got.nan_count == len(x), what


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_histogram_integers(c, rng, dtype):
    dt = np.dtype(dtype)
    for n in lengths(dt.itemsize):
        x = values(rng, dt, n)
        expect_histogram(c.histogram(x, 7), x, 7)
        expect_histogram(c.histogram(x, 5, range=(-20.0, 90.5)), x, 5, (-20.0, 90.5))
        edges = [-1000.0, -3.5, 0.0, 2.0, 2.0, 50.25, 300.0]
        expect_histogram(c.histogram(x, edges), x, edges)


def test_histogram_float16_and_bool(c, rng):
    for n in lengths(2):
        h = values(rng, "float16", n)
        expect_histogram(c.histogram(h, 9), h, 9)  # numpy's float16 edges of h's min and max
        h = with_specials(rng, h)
        for bins, range_ in ((6, (-1.0, 1.0)), (10, (-100.0, 250.0)), (4, (0.0, 0.001))):
            expect_histogram(c.histogram(h, bins, range=range_), h, bins, range_)
        edges = [-np.inf, -0.7, 0.0, 0.1, 0.1000000001, 3.0, np.inf]
        expect_histogram(c.histogram(h, edges), h, edges)
        b = values(rng, "bool", n)
        want = c.histogram(b, 3)
        expect_histogram(want, b.view(np.uint8), 3)  # numpy bins bool as uint8 too


# -- what is refused, async, info

def test_client_refusals(c):
    x = np.arange(1, 11, dtype=np.int8)
    k = np.repeat([1, 2], 5)
    for bad in ("int8", "int16", "float16", "bool"):
        with pytest.raises(ValueError, match=f"dtype={bad}"):
            c.segmented_scan(x, k, dtype=bad)
        with pytest.raises(ValueError, match=f"dtype={bad}"):
            c.reduce_by_key(x, k, dtype=bad)
    h = x.astype(np.float16)
    for bad in ("int64", "uint32"):
        with pytest.raises(ValueError, match=f"dtype={bad} for x of dtype float16"):
            c.segmented_scan(h, heads=k == 1, dtype=bad)
        with pytest.raises(ValueError, match=f"dtype={bad} for x of dtype float16"):
            c.reduce_by_key(h, k, dtype=bad)
    with pytest.raises(ValueError, match="dtype=int16 is not served as an output"):
        c.segmented_scan(x.astype(np.int32), k, dtype="int16")
    with pytest.raises(gpuscan.InvalidArgument, match="float16"):
        c.segmented_scan(h, k, op="bit_xor")
    with pytest.raises(gpuscan.InvalidArgument, match="float64"):
        c.reduce_by_key(x, k, op="bit_or", dtype="float64")
    with pytest.raises(ValueError, match="out must be a writable contiguous int64"):
        c.segmented_scan(x, k, out=np.empty(10, np.int8))
    with pytest.raises(ValueError, match="contiguous"):
        c.segmented_scan(x[::2], k[::2].copy())
    same(c.segmented_scan(x[::2], k[::2].copy(), copy=True), segmented_ref(x[::2], starts_of(5, k[::2]), "sum",
                                                                           False, np.int64))
    with pytest.raises(ValueError, match="big-endian"):
        c.sort(x.astype(">i2"))
    same(c.sort(x[::-1].astype(">i2"), copy=True), np.sort(x).astype(np.int16))
    with pytest.raises(ValueError, match="not contiguous"):
        c.compact(h[::2], predicate=("gt", 0))
    with pytest.raises(ValueError, match="not served"):
        c.histogram(np.ones(4, np.complex64), 2)
    with pytest.raises(ValueError, match="does not fit int8"):
        c.compact(x, predicate=("gt", 200))
    # lists of bools are bool arrays (numpy's conversion)
    same(c.sort([True, False, True]), np.array([False, True, True]))
    same(c.segmented_scan([True, True, False], heads=[1, 0, 1]), np.array([1, 2, 0], np.int64))


def test_async(target, rng):
    x = values(rng, "int8", 3000)
    keys = run_keys(rng, 3000)
    h = with_specials(rng, values(rng, "float16", 3000))

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=CHUNK, timeout=60) as ac:
            return (await ac.segmented_scan(x, keys, dtype="int32"), await ac.reduce_by_key(x, keys),
                    await ac.compact(h, predicate="not_nan", lanes=3), await ac.sort(h, values=x),
                    await ac.argsort(x, descending=True), await ac.histogram(h, 5, range=(-1.0, 1.0)))
    seg, (k, v), kept, (sk, sv), idx, hist = asyncio.run(main())
    same(seg, segmented_ref(x, starts_of(3000, keys=keys), "sum", False, np.int32))
    at = np.flatnonzero(starts_of(3000, keys=keys))
    assert np.array_equal(k, keys[at]) and np.array_equal(v, np.add.reduceat(x.astype(np.int64), at))
    same(kept, h[~np.isnan(h)])
    perm = stable_order(h, False)
    same(sk, h[perm])
    same(sv, x[perm])
    assert np.array_equal(idx, stable_order(x, True))
    expect_histogram(hist, h, 5, (-1.0, 1.0))


def test_info_lists_the_narrow_operations(c):
    assert set(c.info()["narrow_operations"]) == {"scan", "reduce", "segmented_scan", "reduce_by_key", "compact",
                                                    "sort", "histogram", "scan2d"}
