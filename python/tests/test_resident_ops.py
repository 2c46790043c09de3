"""Every operation on resident inputs (RemoteArrays): compact, histogram, segmented_scan,
reduce_by_key, sort, argsort, scan2d and scan along an axis give the bits of the same client's
streamed call, for random data at sizes around the test client's 64-byte chunks; keep=True gives
RemoteArrays (in the non-keep call's shape) whose get() equals the streamed result; a mix of
resident and host inputs, and keep where it cannot apply, are refused before any call; kept calls
are not retried; narrow resident inputs are widened by the server (Compact's and Sort's results
narrowed back); the AsyncClient alike. The request checks (test_requests_*) need no server."""
import asyncio

import numpy as np
import pytest

import gpuscan
from gpuscan import _ops
from gpuscan.aio import AsyncClient
from gpuscan.v1 import gpuscan_pb2 as pb

from conftest import SMALL_CHUNK_BYTES
from test_resident import data, same_bits

WIDE = ("int32", "int64", "uint32", "uint64", "float32", "float64")
NARROW = ("int8", "uint8", "int16", "uint16", "float16")
# Around the 64-byte chunks of 4- and 8-byte elements (16 and 8 a chunk), and a few chunks more.
SIZES = (0, 1, 7, 8, 9, 15, 16, 17, 33, 129, 300)


def keys_for(rng, n, dtype="int32"):
    """Runs of 1-4 equal keys (random values, so a key may come back after another run)."""
    return np.repeat(rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, n), rng.integers(1, 5, n))[:n] \
        .astype(dtype)


def fetched(result):
    """A kept call's RemoteArrays (a tuple, or one) fetched, None kept as None."""
    if isinstance(result, tuple):
        return tuple(None if r is None else r.get() for r in result)
    return result.get()


def same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for u, v in zip(a, b):
            same(u, v)
    elif isinstance(a, gpuscan.HistogramResult):
        same_bits(a.counts, b.counts)
        same_bits(a.edges, b.edges)
        assert (a.below, a.above, a.nan_count, a.element_count) == (b.below, b.above, b.nan_count, b.element_count)
    else:
        same_bits(a, b)


def check(c, call, args, resident, keep=True, **kw):
    """call(*args) streamed, call(*resident) on the RemoteArrays: the same bits; and with keep, the
    same shape of RemoteArrays whose get() gives them again."""
    streamed = call(*args, **kw)
    same(call(*resident, **kw), streamed)
    if keep:
        kept = call(*resident, keep=True, label="kept", **kw)
        shape = kept if isinstance(kept, tuple) else (kept,)
        assert all(isinstance(r, gpuscan.RemoteArray) and r.label == "kept" for r in shape)
        same(fetched(kept), streamed)
        for r in shape:
            r.drop()
    return streamed


@pytest.mark.parametrize("dtype", WIDE)
def test_compact(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        mask = (rng.random(n) < 0.5).astype(np.uint8)
        r, m = own.put(x), own.put(mask)
        for outputs in ({}, {"indices": True}, {"values": False, "indices": True}):
            check(own, own.compact, (x,), (r,), predicate=("gt", 0), **outputs)
            check(own, lambda v, w, **kw: own.compact(v, where=w, **kw), (x, mask), (r, m), **outputs)


@pytest.mark.parametrize("dtype", WIDE)
def test_histogram(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        r = own.put(x)
        check(own, own.histogram, (x,), (r,), keep=False, bins=7, range=(-50, 60))
        check(own, own.histogram, (x,), (r,), keep=False, bins=[-100.0, -1.0, 0.0, 3.5, 80.0])


@pytest.mark.parametrize("dtype", WIDE)
def test_segmented_scan(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        keys = keys_for(rng, n, "int64" if dtype.endswith("64") else "int32")
        heads = (rng.random(n) < 0.3).astype(np.uint8)
        r, k, h = own.put(x), own.put(keys), own.put(heads)
        for exclusive in (False, True):
            check(own, own.segmented_scan, (x, keys), (r, k), exclusive=exclusive, op="max")
            check(own, lambda v, hd, **kw: own.segmented_scan(v, heads=hd, **kw), (x, heads), (r, h),
                  exclusive=exclusive)


@pytest.mark.parametrize("dtype", WIDE)
def test_reduce_by_key(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        keys = keys_for(rng, n, "uint32")
        r, k = own.put(x), own.put(keys)
        check(own, own.reduce_by_key, (x, keys), (r, k))
        check(own, own.reduce_by_key, (x, keys), (r, k), op="min")


@pytest.mark.parametrize("dtype", WIDE)
def test_sort_and_argsort(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        x[: n // 4] = x[n // 2: n // 2 + n // 4]  # equal keys: stability shows
        values = data(rng, "float64" if dtype == "int32" else "int32", n)
        r, v = own.put(x), own.put(values)
        for descending in (False, True):
            check(own, own.sort, (x,), (r,), descending=descending)
            check(own, lambda a, b, **kw: own.sort(a, values=b, **kw), (x, values), (r, v), descending=descending)
            check(own, own.argsort, (x,), (r,), descending=descending)
            check(own, own.argsort, (x,), (r,), descending=descending, return_keys=True)


@pytest.mark.parametrize("dtype", WIDE)
def test_scan2d_and_axis_scans(own, rng, dtype):
    for rows, cols in ((1, 1), (3, 5), (16, 1), (7, 9), (9, 17), (40, 33)):
        x = data(rng, dtype, rows * cols).reshape(rows, cols)
        r = own.put(x.reshape(-1))
        m = r.reshape(rows, cols)
        assert (m.shape, m.ndim, m.id, r.shape) == ((rows, cols), 2, r.id, (rows * cols,))
        assert r.reshape(-1, cols).shape == (rows, cols) and m.reshape(-1).shape == (rows * cols,)
        check(own, own.scan2d, (x,), (m,))
        check(own, own.scan2d, (x,), (m,), op="max")
        for axis in (0, 1):
            for exclusive in (False, True):
                streamed = check(own, own.scan, (x,), (m,), axis=axis, exclusive=exclusive)
                assert streamed.shape == (rows, cols)
        kept = own.scan2d(m, keep=True)
        assert kept.shape == (rows, cols) and kept.get().shape == (rows, cols)  # the matrix handle
        same_bits(own.scan(kept, axis=0), own.scan(own.scan2d(x), axis=0))  # a kept matrix chains
        same_bits(kept.get(0, cols), own.scan2d(x)[0])


def test_keep_chains_across_operations(own, rng):
    """A kept result feeds the next operation where it lies: sort, then reduce_by_key of the sorted
    keys (a group-by), then a scan of the runs' values; each step's bits as the host chain's."""
    n = 1000
    k, v = keys_for(rng, n, "int32"), data(rng, "int64", n)
    sk, sv = own.sort(own.put(k), values=own.put(v), keep=True)
    uk, uv = own.reduce_by_key(sv, sk, keep=True)
    total = own.scan(uv, keep=True)
    hk, hv = own.sort(k, values=v)
    huk, huv = own.reduce_by_key(hv, hk)
    same_bits(uk.get(), huk)
    same_bits(total.get(), own.scan(huv))
    kept_values, kept_indices = own.compact(total, predicate=("gt", 0), indices=True, keep=True)
    same(fetched((kept_values, kept_indices)), own.compact(own.scan(huv), predicate=("gt", 0), indices=True))


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_resident_inputs(own, rng, dtype):
    """A narrow RemoteArray computed as the streamed narrow call (the server widens it)."""
    for n in (0, 1, 63, 64, 65, 200):
        x = data(rng, dtype, n)
        keys, mask = keys_for(rng, n, "int32"), (rng.random(n) < 0.5).astype(np.uint8)
        r, k, m = own.put(x), own.put(keys), own.put(mask)
        check(own, own.segmented_scan, (x, keys), (r, k))
        check(own, lambda a, hd, **kw: own.segmented_scan(a, heads=hd, **kw), (x, mask), (r, m), exclusive=True)
        check(own, own.reduce_by_key, (x, keys), (r, k))
        check(own, own.histogram, (x,), (r,), keep=False, bins=5, range=(-100, 100))
        if n:
            check(own, own.scan2d, (x.reshape(n, 1),), (r.reshape(n, 1),))
            check(own, own.scan, (x.reshape(1, n),), (r.reshape(1, n),), axis=1)
        # Compact and sort: the server widens into the carrier and narrows the results back.
        for outputs in ({}, {"indices": True}, {"values": False, "indices": True}):
            check(own, own.compact, (x,), (r,), predicate=("gt", 0), **outputs)
            check(own, lambda v, w, **kw: own.compact(v, where=w, **kw), (x, mask), (r, m), **outputs)
        check(own, own.sort, (x,), (r,))
        check(own, own.sort, (x,), (r,), descending=True)
        check(own, own.argsort, (x,), (r,))
        check(own, lambda a, v, **kw: own.sort(a, values=v, **kw), (x, keys), (r, k))  # narrow keys, wide values
        check(own, lambda a, v, **kw: own.sort(a, values=v, **kw), (keys, x), (k, r))  # wide keys, narrow values
        kept = own.compact(r, predicate=("gt", 0), keep=True)
        assert kept.dtype == x.dtype  # kept narrow, as the streamed call returns it
        kept.drop()


def test_refusals(own, rng):
    x = data(rng, "int32", 20)
    keys = np.arange(20, dtype=np.int32) // 5
    r, k, f = own.put(x), own.put(keys), own.put(np.ones(20, np.float32))
    mixes = (  # (the call, the argument named resident, the one named not)
        (lambda: own.compact(x, where=own.put(np.ones(20, np.uint8))), "where", "x"),
        (lambda: own.compact(r, where=np.ones(20, np.uint8)), "x", "where"),
        (lambda: own.segmented_scan(r, keys), "x", "keys"),
        (lambda: own.segmented_scan(x, heads=own.put(np.ones(20, np.uint8))), "heads", "x"),
        (lambda: own.sort(x, values=r), "values", "x"),
        (lambda: own.reduce_by_key(x, k), "keys", "x"),
        (lambda: own.argsort(r.get()), None, None),
    )
    for call, remote, host in mixes:
        if remote is None:
            call()  # all host: no refusal
            continue
        with pytest.raises(TypeError, match=f"{remote} is a RemoteArray but {host} is not"):
            call()
    with pytest.raises(TypeError, match="does not take resident arrays"):
        own.segmented_scan(r, k, out=own.put(x))
    for call in (lambda: own.compact(x, predicate="nonzero", keep=True), lambda: own.sort(x, label="l"),
                 lambda: own.reduce_by_key(x, keys, ttl=5), lambda: own.scan2d(x.reshape(4, 5), keep=True)):
        with pytest.raises(ValueError, match="keep=, ttl= and label= take RemoteArray inputs"):
            call()
    with pytest.raises(ValueError, match="need keep=True"):
        own.sort(r, ttl=5)
    with pytest.raises(ValueError, match="out= and keep=True"):
        own.segmented_scan(r, k, out=np.empty(20, np.int32), keep=True)
    with pytest.raises(ValueError, match="range="):
        own.histogram(r, 5)
    with pytest.raises(TypeError):
        own.histogram(r, 5, range=(0, 1), keep=True)  # a histogram is values: nothing to keep
    with pytest.raises(ValueError, match="reshape"):
        own.scan2d(r)
    with pytest.raises(ValueError, match="reshape"):
        r.reshape(3, 7)
    with pytest.raises(ValueError, match="uint8 or int8"):
        own.compact(r, where=f)
    for bad in (f, own.put(keys.astype(np.int16))):  # floats; narrow keys (a streamed call widens them)
        with pytest.raises(ValueError, match="int32, int64, uint32 or uint64"):
            own.reduce_by_key(r, bad)
    with pytest.raises(ValueError, match="elements but x has"):
        own.sort(r, values=own.put(np.ones(3, np.int32)))
    with pytest.raises(gpuscan.NotFound):
        own.sort(gpuscan.RemoteArray(own, pb.ArrayInfo(id=b"\x01" * 24, dtype=pb.DTYPE_INT32, element_count=20)))
    same_bits(r.get(), x)


def _remote(c, dtype=pb.DTYPE_INT32, n=10, ident=b"\x07" * 24):
    return gpuscan.RemoteArray(c, pb.ArrayInfo(id=ident, dtype=dtype, element_count=n))


def test_requests_name_every_input_and_keep_is_not_retried():
    """The headers the calls send (no server: the requests are built before any call)."""
    with gpuscan.Client("127.0.0.1:1", retries=3) as c:
        x, m, k, v = (_remote(c, d, 10, bytes([i]) * 24) for i, d in
                      ((1, pb.DTYPE_FLOAT32), (2, pb.DTYPE_UINT8), (3, pb.DTYPE_INT64), (4, pb.DTYPE_INT16)))
        calls = {
            "compact": (_ops.compact(c, x, m, None, True, True, False, None, None, None), {"values": 1, "flags": 2}),
            "segmented": (_ops.segmented_scan(c, x, k, None, "sum", False, None, False, None, None),
                          {"values": 1, "keys": 3}),
            "heads": (_ops.segmented_scan(c, x, None, m, "sum", False, None, False, None, None),
                      {"values": 1, "flags": 2}),
            "by key": (_ops.reduce_by_key(c, x, k, "sum", False, None, None), {"values": 1, "keys": 3}),
            "sort": (_ops.sort(c, x, v, False, False, None, None), {"values": 1, "sort_values": 4}),
            "argsort": (_ops.argsort(c, x, False, True, False, None, None), {"values": 1}),
            "histogram": (_ops.histogram(c, x, 4, (0, 1), False, None, None), {"values": 1}),
            "scan2d": (_ops.scan2d(c, x.reshape(2, 5), "sum", None, False, None, None), {"values": 1}),
        }
        for name, (p, want) in calls.items():
            res = p.request.header.resident
            for field in ("values", "flags", "keys", "sort_values"):
                assert getattr(res, field) == (bytes([want[field]]) * 24 if field in want else b""), (name, field)
            assert not res.keep and p.retries == 3 and len(p.x) == 0, name
            assert list(p.requests()) == [p.request.SerializeToString()], name  # the header alone
        h = calls["by key"][0].request.header
        assert (h.key_dtype, h.element_count) == (pb.DTYPE_INT64, 10)
        assert calls["sort"][0].request.header.output == pb.SORT_OUTPUT_KEYS_AND_VALUES
        assert calls["scan2d"][0].request.header.rows == 2 and calls["scan2d"][0].request.header.cols == 5
        assert calls["heads"][0].request.header.heads
        for p in (_ops.compact(c, x, None, "nonzero", False, True, False, None, None, None, True, 7, "l"),
                  _ops.sort(c, x, None, False, False, None, None, True),
                  _ops.reduce_by_key(c, x, k, "sum", False, None, None, None, True),
                  _ops.segmented_scan(c, x, k, None, "sum", False, None, False, None, None, None, True),
                  _ops.scan2d(c, x.reshape(5, 2), "sum", None, False, None, None, 1, True, None, True),
                  _ops.scan(c, x, "sum", False, None, None, None, None, False, None, None, None, True)):
            res = p.request.header.resident
            assert res.keep and p.retries == 0 and p.out is None, p.method  # a retry would keep twice
        assert _ops.compact(c, x, None, "nonzero", False, True, False, None, None, None, True, 7, "l") \
            .request.header.resident.ttl_ms == 7000
        n8 = _remote(c, pb.DTYPE_INT8)
        p = _ops.segmented_scan(c, n8, _remote(c, pb.DTYPE_UINT32), None, "sum", False, None, False, None, None)
        assert (p.request.header.dtype, p.request.header.output_dtype, p.out.dtype) == (pb.DTYPE_INT8,
                                                                                        pb.DTYPE_INT64, np.int64)
        assert p.request.header.key_dtype == pb.DTYPE_UINT32


def test_async_client(target, rng):
    async def main():
        async with AsyncClient(target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="ops-async") as c:
            if "resident" not in (await c.info())["operations"]:
                pytest.skip("the server keeps no resident arrays")
            n = 77
            x, keys = data(rng, "float64", n), keys_for(rng, n, "int32")
            mask = (rng.random(n) < 0.5).astype(np.uint8)
            r, k, m = await c.put(x), await c.put(keys), await c.put(mask)
            same(await c.compact(r, where=m, indices=True), await c.compact(x, where=mask, indices=True))
            kv, ki = await c.compact(r, where=m, indices=True, keep=True)
            same((await kv.get(), await ki.get()), await c.compact(x, where=mask, indices=True))
            same(await c.segmented_scan(r, k), await c.segmented_scan(x, keys))
            same(await (await c.segmented_scan(r, k, keep=True)).get(), await c.segmented_scan(x, keys))
            uk, uv = await c.reduce_by_key(r, k, keep=True)
            same((await uk.get(), await uv.get()), await c.reduce_by_key(x, keys))
            same(await c.sort(r, values=k), await c.sort(x, values=keys))
            same(await c.argsort(r), await c.argsort(x))
            same(await c.histogram(r, 6, range=(-90, 90)), await c.histogram(x, 6, range=(-90, 90)))
            m2 = r.reshape(7, 11)
            same(await c.scan2d(m2), await c.scan2d(x.reshape(7, 11)))
            same(await c.scan(m2, axis=1), await c.scan(x.reshape(7, 11), axis=1))
            with pytest.raises(TypeError, match="values is not"):
                await c.sort(r, values=keys)
            for a in (await c.arrays()):
                await a.drop()
    asyncio.run(main())
