"""Shared memory (header field 20): SharedArray regions (name, mode, views, lifetime), and scan,
reduce and compact of arrays in them against numpy on random data (floats: bit for bit against the
streamed call), slices at an offset, out=, in place, lengths 0 and 1, masks shared and not, the
async client, and the errors: a server without --shm-dir, a region deleted before the call, one
outside --shm-dir, one shorter than the array. The session server serves shared memory from a
directory conftest makes (see conftest.target)."""
import asyncio
import gc
import os
import re
import stat

import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan import shared
from gpuscan.testing import ServerProcess

OPS = ["sum", "min", "max"]
LENGTHS = [0, 1, 2, 1000]


@pytest.fixture(scope="module")
def shm_dir(client):
    limits = client.info()["limits"]
    if not limits.get("shared_memory"):
        pytest.skip("the server does not serve shared memory (no --shm-dir)")
    if not os.path.isdir(limits["shm_dir"]):
        pytest.skip(f"the server's --shm-dir {limits['shm_dir']} is not visible here")
    return limits["shm_dir"]


def regions(d):
    return sorted(n for n in os.listdir(d) if n.startswith(shared.REGION_PREFIX))


def filled(client, x, own=False):
    """x copied into a new shared array: carved from the client's arena, or (own) in a region of
    its own under the server's --shm-dir (for the tests of a region's lifetime)."""
    if own:
        a = gpuscan.shared_array(len(x), x.dtype, dir=client.info()["limits"]["shm_dir"])
    else:
        a = client.shared_array(len(x), x.dtype)
    a[:] = x
    return a


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- regions, without a server
def test_region_file_and_views(tmp_path):
    d = str(tmp_path)
    a = gpuscan.shared_array(10, "int64", dir=d)
    assert isinstance(a, gpuscan.SharedArray) and a.dtype == np.int64 and a.shape == (10,)
    assert re.fullmatch(r"gpuscan-[0-9a-f]{32}", a.region) and a.path == os.path.join(d, a.region)
    st = os.stat(a.path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 80 and not a.any()
    a[:] = np.arange(10)
    with open(a.path, "rb") as f:  # the file is the array
        assert f.read() == a.tobytes()
    s = a[3:7]
    assert isinstance(s, gpuscan.SharedArray) and s.region == a.region and s.offset == 24
    assert shared.place(np.asarray(a)[5:]).offset == 40
    assert shared.place(memoryview(a[2:]).cast("B")) is None  # not an ndarray: not ours to judge
    assert shared.place(np.frombuffer(memoryview(a[2:]), np.int64)).offset == 16
    assert shared.place(a[::2]) is None  # not contiguous
    assert shared.place(a.view(np.uint8)[1:9].view(np.int64)) is None  # not element-aligned
    assert type(a + 1) is np.ndarray and shared.place(a + 1) is None  # computed: plain arrays
    assert a.copy().region is None and type(a[[1, 2]]) is np.ndarray and type(a.sum()) is np.int64
    b = gpuscan.shared_array(4, "uint8", dir=d, mode=0o660)
    assert stat.S_IMODE(os.stat(b.path).st_mode) == 0o660  # exactly, whatever the umask
    z = gpuscan.shared_array(0, "float32", dir=d)
    assert z.shape == (0,) and os.path.getsize(z.path) == 0 and shared.place(z).offset == 0
    for bad in (-1, 2.5, "3", True):
        with pytest.raises(ValueError):
            gpuscan.shared_array(bad, dir=d)
    with pytest.raises(ValueError):
        gpuscan.shared_array(3, object, dir=d)
    with pytest.raises(OSError, match="cannot create"):
        gpuscan.shared_array(3, dir=os.path.join(d, "missing"))


def test_region_lifetime(tmp_path):
    d = str(tmp_path)
    with gpuscan.shared_array(16, "float64", dir=d) as a:
        a[:] = 1.5
        view = a[4:]
        path = a.path
        assert os.path.exists(path)
    assert not os.path.exists(path) and a.region is None and view.region is None
    assert a.sum() == 24.0 and view[0] == 1.5  # unlinked, but the memory lives while arrays use it
    a.close()  # idempotent
    b = gpuscan.shared_array(8, "int32", dir=d)
    os.unlink(b.path)  # removed behind its back: close does not mind
    b.close()
    c = gpuscan.shared_array(8, "int32", dir=d)
    tail, path = c[2:], c.path
    del c
    gc.collect()
    assert os.path.exists(path)  # a view still uses the region
    del tail, view, a, b
    gc.collect()
    assert regions(d) == []  # collected: unlinked


# -- calls
@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan(client, shm_dir, rng, dtype):
    for n in LENGTHS:
        for op in OPS:
            for exclusive in (False, True):
                x = ref.random_array(rng, dtype, n, op)
                a = filled(client, x)
                y = client.scan(a, op=op, exclusive=exclusive)
                where = f"{op} exclusive={exclusive} n={n}"
                assert isinstance(y, gpuscan.SharedArray) and y.region is not None, where
                assert not np.may_share_memory(y, a), where  # carved from the arena beside a
                assert os.path.dirname(y.path) == shm_dir and same_bits(np.asarray(a), x), where  # x unchanged
                t = client.last_timing
                assert t.bytes_in == n * dtype.itemsize and t.bytes_out == n * dtype.itemsize, where
                if dtype.kind == "f" and op == "sum":  # the server's float sums: the same bits both ways
                    assert same_bits(np.asarray(y), client.scan(x, op=op, exclusive=exclusive)), where
                    ref.assert_scan_close(np.asarray(y), ref.scan(x, op, exclusive), x, op)
                else:
                    assert same_bits(np.asarray(y), ref.scan(x, op, exclusive)), where


def test_scan_out_in_place_and_slices(client, shm_dir, rng):
    dtype = np.dtype(np.int32)
    x = ref.random_array(rng, dtype, 3000)
    want = ref.scan(x, "sum", False)
    a, out = filled(client, x), client.shared_array(3000, dtype)
    before = regions(shm_dir)
    y = client.scan(a, out=out)  # the shared path copies nothing: the server writes into out
    assert y is out and np.shares_memory(y, out) and same_bits(np.asarray(out), want)
    assert regions(shm_dir) == before  # no region made for this call
    assert client.last_timing.bytes_in == x.nbytes
    out2 = np.full(3000, 7, np.int32)  # a plain out: through a temporary region, copied
    assert client.scan(a, out=out2) is out2 and same_bits(out2, want)
    assert regions(shm_dir) == before  # the temporary region is gone
    lo, hi = 17, 2900  # slices at an offset, into another array's slice
    big = client.shared_array(4000, dtype)
    got = client.scan(a[lo:hi], op="max", exclusive=True, out=big[lo + 100:hi + 100])
    assert got.offset == big.offset + (lo + 100) * 4 and same_bits(np.asarray(got), ref.scan(x[lo:hi], "max", True))
    assert not big[:lo + 100].any() and not big[hi + 100:].any()  # nothing written outside
    assert same_bits(np.asarray(client.scan(a[lo:hi])), ref.scan(x[lo:hi], "sum", False))
    assert client.scan(a, out=a) is a and same_bits(np.asarray(a), want)  # in place
    assert client.scan(a[5:9], op="min", out=a[5:9]).offset == a.offset + 20
    want[5:9] = ref.scan(want[5:9], "min", False)
    assert same_bits(np.asarray(a), want)
    assert client.scan(x, op="bit_xor", out=out) is out  # a plain x: streamed, into the shared out
    assert same_bits(np.asarray(out), ref.scan(x, "bit_xor", False)) and client.last_timing.chunks == 188


def test_reduce(client, shm_dir, rng):
    for dtype in ref.DTYPES:
        for n in LENGTHS:
            for op in OPS:
                x = ref.random_array(rng, dtype, n, op)
                a = filled(client, x)
                got = client.reduce(a, op=op)
                where = (str(dtype), n, op, got)
                assert type(got) is dtype.type and client.last_timing.bytes_in == n * dtype.itemsize, where
                if dtype.kind == "f" and op == "sum":
                    assert got.tobytes() == client.reduce(x, op=op).tobytes(), where
                    ref.assert_value_close(got, ref.reduce(x, op), x, op)
                else:
                    assert got.tobytes() == ref.reduce(x, op).tobytes(), where
        x = ref.random_array(rng, dtype, 500)
        a = filled(client, x)
        assert client.reduce(a[123:321], op="max") == x[123:321].max()


def test_compact(client, shm_dir, rng):
    for dtype in ref.DTYPES:
        for n in LENGTHS:
            x = ref.random_array(rng, dtype, n)
            a = filled(client, x)
            mask = rng.random(n) < 0.4
            m = client.shared_array(n, np.bool_)
            m[:] = mask
            keep = x > 0
            cases = [  # (kwargs, numpy's values or None, numpy's indices or None)
                (dict(where=m), x[mask], None),  # a shared mask: read in place
                (dict(where=mask, indices=True), x[mask], np.flatnonzero(mask)),  # plain: copied
                (dict(where=mask.astype(np.float32), values=False, indices=True), None, np.flatnonzero(mask)),
                (dict(predicate=("gt", 0), indices=True), x[keep], np.flatnonzero(keep)),
                (dict(predicate="nonzero"), x[x != 0], None),
            ]
            for kwargs, want_v, want_i in cases:
                got = client.compact(a, **kwargs)
                gv, gi = got if want_v is not None and want_i is not None else \
                    (got, None) if want_v is not None else (None, got)
                where = f"{dtype} n={n} {kwargs.keys()}"
                for g, w in ((gv, want_v), (gi, want_i)):
                    if w is not None:
                        assert isinstance(g, gpuscan.SharedArray) and g.region is not None, where
                        assert same_bits(np.asarray(g), w.astype(g.dtype)), where
                assert client.last_timing.bytes_in >= n * dtype.itemsize, where
    x = ref.random_array(rng, np.dtype(np.int64), 777)
    a = filled(client, x)
    flags = client.shared_array(800, np.uint8)
    flags[:] = rng.integers(0, 4, 800)  # any nonzero byte keeps
    v, i = client.compact(a[10:700], where=flags[50:740], indices=True)
    sel = flags[50:740] != 0
    assert same_bits(np.asarray(v), x[10:700][sel]) and same_bits(np.asarray(i), np.flatnonzero(sel))


def test_temporary_regions_go(client, shm_dir, rng):
    gc.collect()
    before = regions(shm_dir)
    x = ref.random_array(rng, np.dtype(np.float64), 300)
    with filled(client, x, own=True) as a:  # a region of its own: results get theirs too
        y = client.scan(a)
        v = client.compact(a, where=x > 0)
        assert len(regions(shm_dir)) == len(before) + 3  # a, y and v's; the mask's is gone
        del y, v
        gc.collect()
        assert len(regions(shm_dir)) == len(before) + 1
    assert regions(shm_dir) == before


def test_lanes_and_closed_regions(target, shm_dir, rng):
    """Lanes do not apply to shared arrays; a closed region's arrays are streamed like any array."""
    x = ref.random_array(rng, np.dtype(np.uint64), 1000)
    with gpuscan.Client(target, lanes=4, chunk_bytes=64, timeout=60) as c:
        a = filled(c, x, own=True)  # close() unlinks a region of its own (an arena's stays)
        assert same_bits(np.asarray(c.scan(a, op="max")), ref.scan(x, "max", False))
        assert c.reduce(a) == ref.reduce(x, "sum")
        a.close()
        y = c.scan(a, lanes=1)
        assert type(y) is np.ndarray and same_bits(y, ref.scan(x, "sum", False))
        assert c.last_timing.chunks == 125  # streamed: 8 elements per 64-byte chunk


def test_async_client(target, shm_dir, rng):
    async def main():
        async with gpuscan.AsyncClient(target, timeout=60) as c:
            x = ref.random_array(rng, np.dtype(np.int32), 513)
            with await c.shared_array(513, "int32") as a:
                assert os.path.dirname(a.path) == shm_dir
                a[:] = x
                y = await c.scan(a, exclusive=True)
                assert same_bits(np.asarray(y), ref.scan(x, "sum", True)) and c.last_timing.bytes_in == x.nbytes
                out = await c.shared_array(513, "int32", dir=shm_dir)
                assert await c.scan(a, op="min", out=out) is out
                assert same_bits(np.asarray(out), ref.scan(x, "min", False))
                assert await c.reduce(a[1:], op="max") == x[1:].max()
                v, i = await c.compact(a, predicate=("lt", 0), indices=True)
                assert same_bits(np.asarray(v), x[x < 0]) and same_bits(np.asarray(i), np.flatnonzero(x < 0))
                os.unlink(a.path)
                with pytest.raises(gpuscan.NotFound):
                    await c.reduce(a)
    asyncio.run(main())


def test_errors(client, server_binary, shm_dir, rng):
    x = ref.random_array(rng, np.dtype(np.int32), 100)
    a = filled(client, x, own=True)
    before = regions(shm_dir)
    os.unlink(a.path)  # deleted before the call
    for call in (lambda: client.scan(a), lambda: client.reduce(a), lambda: client.compact(a, predicate="nonzero")):
        with pytest.raises(gpuscan.NotFound, match=a.region):
            call()
    gc.collect()
    assert regions(shm_dir) == [r for r in before if r != a.region]  # the outputs made for them are gone
    c1 = filled(client, x, own=True)
    os.truncate(c1.path, 40)  # shorter than the array (its memory past 40 bytes is not touched here)
    with pytest.raises(gpuscan.OutOfRange, match="40 bytes"):
        client.reduce(c1)
    assert client.reduce(c1[:10]) == ref.reduce(x[:10], "sum")
    b = gpuscan.shared_array(10, "int32", dir=os.path.dirname(shm_dir))  # not under --shm-dir
    try:
        with pytest.raises(gpuscan.NotFound):
            client.reduce(b)
    finally:
        b.close()
    with ServerProcess(server_binary, engine=os.environ.get("GPUSCAN_TEST_ENGINE", "cpu")) as plain:
        with gpuscan.Client(plain.target, timeout=30) as c:
            assert c.info()["limits"]["shared_memory"] is False
            c2 = filled(client, x)
            for call in (lambda: c.scan(c2), lambda: c.reduce(c2), lambda: c.compact(c2, predicate="nonzero")):
                with pytest.raises(gpuscan.FailedPrecondition, match="shm-dir"):
                    call()
            assert c.reduce(x) == ref.reduce(x, "sum")  # a plain array: streamed as ever
            with c.shared_array(4) as d:  # no --shm-dir: made in /dev/shm
                assert os.path.dirname(d.path) == shared.DEFAULT_DIR
