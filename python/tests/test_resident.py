"""Resident arrays (issue 56): put/get/drop/arrays, scan (keep chains) and reduce of a RemoteArray with
the streamed calls' bits, every dtype (narrow ones widened by the server), sizes around the test
client's 64-byte chunks, tenants, ttl and quotas on servers of their own, a server that keeps none,
and the AsyncClient alike (the other operations: test_resident_ops.py)."""
import asyncio
import time

import numpy as np
import pytest

import gpuscan
from gpuscan.aio import AsyncClient
from gpuscan.testing import ServerProcess

from conftest import RESIDENT_BYTES, SMALL_CHUNK_BYTES

WIDE = ("int32", "int64", "uint32", "uint64", "float32", "float64")
NARROW = ("int8", "uint8", "int16", "uint16", "float16", "bool")
# Around the 64-byte chunks: 64 one-byte, 32 two-byte, 16 four-byte and 8 eight-byte elements each.
SIZES = (0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000)
OPS = ("sum", "max", "product")


@pytest.fixture(scope="module", autouse=True)
def served(client):
    if "resident" not in client.info()["operations"]:
        pytest.skip("the server keeps no resident arrays (start it with --resident-bytes)")


@pytest.fixture()
def tenant(request):
    """A tenant of this test's own (its arrays apart from every other test's)."""
    return f"t-{request.node.name}"[:128].replace("[", "-").replace("]", "")


@pytest.fixture()
def own(target, tenant):
    """A client of the test's own tenant, with the tiny chunks."""
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60, tenant=tenant) as c:
        yield c
        for r in c.arrays():
            r.drop()


def data(rng, dtype, n, op="sum"):
    """Random elements, never all zeros: for products near 1 (floats) or small (integers)."""
    d = np.dtype(dtype)
    if d.kind == "b":
        return rng.random(n) < 0.5
    if d.kind == "f":
        lo, hi = (0.9, 1.1) if op == "product" else (0.5, 100.0)
        x = rng.uniform(lo, hi, n) * (1 if op == "product" else rng.choice([-1.0, 1.0], n))
        return x.astype(d)
    top = 3 if op == "product" else min(int(np.iinfo(d).max), 1000)
    x = rng.integers(1, top + 1, n)
    if d.kind == "i":
        x *= rng.choice([-1, 1], n)
    return x.astype(d)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", WIDE + NARROW)
def test_put_get_every_dtype_and_size(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        r = own.put(x, label=f"n{n}")
        kept = np.dtype("uint8") if dtype == "bool" else np.dtype(dtype)  # bool is kept as uint8
        assert isinstance(r, gpuscan.RemoteArray) and r.client is own
        assert (r.dtype, r.size, r.shape, len(r), r.nbytes, r.label) == (kept, n, (n,), n, n * kept.itemsize, f"n{n}")
        assert len(r.id) == 24 and r.device and r.ttl > 0 and r.expires > time.time()
        assert r.info["element_count"] == n and r.info["dtype"] == kept and r.info["id"] == r.id
        same_bits(own.get(r), x.view(kept))
        same_bits(np.asarray(r), x.view(kept))
        if n:
            same_bits(r.get(n // 3, n - n // 3 - 1), x.view(kept)[n // 3:n - 1])
        r.drop()


def test_get_ranges(own, rng):
    x = data(rng, "int64", 100)
    r = own.put(x)
    for offset, count in [(0, None), (0, 100), (99, 1), (7, 9), (8, 8), (50, None), (100, None), (100, 0), (0, 0)]:
        same_bits(r.get(offset, count), x[offset:None if count is None else offset + count])
    same_bits(own.get(r.id, 3, 5), x[3:8])  # by id: bytes, or its hex text
    same_bits(own.get(r.id.hex(), 3), x[3:])
    with pytest.raises(gpuscan.OutOfRange, match="past the array's end"):
        r.get(90, 11)
    with pytest.raises(gpuscan.OutOfRange, match="past the array's end"):
        r.get(101)
    with pytest.raises(ValueError, match="offset"):
        r.get(-1)
    with pytest.raises(ValueError, match="count"):
        r.get(0, -1)
    with pytest.raises(TypeError, match="RemoteArray or its id"):
        own.get(3)


@pytest.mark.parametrize("dtype", WIDE)
def test_scan_and_reduce_equal_the_streamed_calls(own, rng, dtype):
    """The same bits as the streamed call (float sums and products too), every size around the
    chunks, three operators, inclusive and exclusive."""
    for op in OPS:
        for n in SIZES:
            x = data(rng, dtype, n, op)
            with own.put(x) as r:
                for exclusive in (False, True):
                    y = own.scan(r, op=op, exclusive=exclusive)
                    same_bits(y, own.scan(x, op=op, exclusive=exclusive))
                    if op == "sum" and np.dtype(dtype).kind in "iu":
                        same_bits(y, np.cumsum(x, dtype=dtype) - (x if exclusive else 0))
                same_bits(own.reduce(r, op=op), own.reduce(x, op=op))
                assert own.last_timing is not None


def test_scan_into_out(own, rng):
    x = data(rng, "float64", 33)
    r = own.put(x)
    out = np.full(33, np.nan)
    assert own.scan(r, out=out) is out
    same_bits(out, own.scan(x))
    with pytest.raises(ValueError, match="out must be"):
        own.scan(r, out=np.empty(32))
    with pytest.raises(ValueError, match="dtype"):
        own.scan(r, dtype="float32")
    with pytest.raises(ValueError, match="axis"):
        own.scan(r, axis=0)


def test_keep_chains(own, rng):
    x = data(rng, "int64", 129)
    r = own.put(x, label="x")
    a = own.scan(r, keep=True, label="a", ttl=30)
    assert isinstance(a, gpuscan.RemoteArray) and a.id != r.id
    assert (a.dtype, a.size, a.label, a.ttl) == (np.dtype("int64"), 129, "a", 30.0)
    b = own.scan(a, op="max", exclusive=True, keep=True)
    c = own.scan(b, keep=True)
    want_a = own.scan(x)
    want_b = own.scan(want_a, op="max", exclusive=True)
    same_bits(a.get(), want_a)
    same_bits(b.get(), want_b)
    same_bits(c.get(), own.scan(want_b))
    same_bits(own.reduce(c, op="max"), own.reduce(own.scan(want_b), op="max"))
    same_bits(r.get(), x)  # the input stays as it was
    assert [q.label for q in own.arrays()] == ["x", "a", "", ""]
    with pytest.raises(ValueError, match="keep=True"):
        own.scan(r, ttl=5)
    with pytest.raises(ValueError, match="keep=True"):
        own.scan(r, label="no")
    with pytest.raises(ValueError, match="out="):
        own.scan(r, keep=True, out=np.empty(129, np.int64))
    with pytest.raises(ValueError, match="RemoteArray"):
        own.scan(x, keep=True)


def test_float_keep_chain_bits(own, rng):
    x = data(rng, "float32", 1000)
    r = own.put(x)
    k1 = own.scan(r, keep=True)
    k2 = own.scan(k1, op="product", exclusive=True, keep=True)
    s1 = own.scan(x)
    same_bits(k1.get(), s1)
    same_bits(k2.get(), own.scan(s1, op="product", exclusive=True))


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_scan_and_reduce_equal_the_streamed_calls(own, rng, dtype):
    """The server widens a narrow resident array as the streamed call does (bool: kept as uint8)."""
    for n in (0, 1, 63, 64, 65, 1000):
        x = data(rng, dtype, n)
        kept = x.view(np.uint8) if dtype == "bool" else x
        r = own.put(x)
        same_bits(r.get(), kept)
        same_bits(own.scan(r), own.scan(kept))
        same_bits(own.scan(r, exclusive=True, op="max"), own.scan(kept, exclusive=True, op="max"))
        same_bits(own.reduce(r), own.reduce(kept))
        if dtype != "float16":
            same_bits(own.scan(r, dtype="int32"), own.scan(kept, dtype="int32"))
        same_bits(own.scan(r, keep=True).get(), own.scan(kept))


def test_streams_refuse_a_remote_array(own, rng):
    """Calls that stream their input or write into out= take no RemoteArray (test_resident_ops: the
    operations that do, and their refusals of a mix)."""
    x = data(rng, "int32", 20)
    r = own.put(x)
    calls = {
        "scan_iter": lambda: list(own.scan_iter([r])),
        "put": lambda: own.put(r),
        "scan out": lambda: own.scan(x, out=r),
        "segmented_scan out": lambda: own.segmented_scan(x, np.zeros(20, np.int32), out=r),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match="does not take resident arrays"):
            call()
    same_bits(r.get(), x)  # nothing fetched or changed


def test_tenants_apart(target, rng, monkeypatch):
    monkeypatch.delenv("GPUSCAN_NATIVE", raising=False)  # the data path's reason is tenant='s
    x = data(rng, "int32", 40)
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="alice") as alice, \
            gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="bob") as bob, \
            gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, native=False) as anyone:
        assert alice.tenant == "alice" and alice.data_path.name == "grpcio" and "tenant" in alice.data_path.reason
        r = alice.put(x, label="alice's")
        for other in (bob, anyone):
            with pytest.raises(gpuscan.NotFound, match="no such resident array"):
                other.get(r)
            with pytest.raises(gpuscan.NotFound):
                other.scan(r)
            with pytest.raises(gpuscan.NotFound):
                other.reduce(r)
            with pytest.raises(gpuscan.NotFound):
                other.drop(r)
            assert r.id not in {q.id for q in other.arrays()}
        listed = alice.arrays()
        assert [q.id for q in listed] == [r.id] and listed.tenant_bytes == 160
        same_bits(alice.scan(r), np.cumsum(x, dtype=np.int32))  # still there, still alice's
        same_bits(alice.scan(x, lanes=3), np.cumsum(x, dtype=np.int32))  # lanes carry the tenant too
        r.drop()
        assert len(alice.arrays()) == 0
    for bad in ("x" * 129, "caf\u00e9", "tab\there", 5):
        with pytest.raises(ValueError, match="tenant"):
            gpuscan.Client(target, tenant=bad)
    with pytest.raises(ValueError, match="tenant"):
        gpuscan.Client(target, tenant="alice", native=True)


def test_drop_and_context_manager(own, rng):
    x = data(rng, "uint32", 17)
    r = own.put(x, label="d")
    info = own.drop(r)
    assert info["id"] == r.id and info["label"] == "d" and info["element_count"] == 17
    with pytest.raises(gpuscan.NotFound):
        r.drop()
    with pytest.raises(gpuscan.NotFound):
        r.get()
    with own.put(x) as r2:
        same_bits(r2.get(), x)
    with pytest.raises(gpuscan.NotFound):
        r2.get()
    with own.put(x) as r3:
        r3.drop()  # gone before the exit: no error from __exit__
    with pytest.raises(KeyError):  # the body's error passes through; the array is dropped all the same
        with own.put(x) as r4:
            raise KeyError("body")
    assert r4.id not in {q.id for q in own.arrays()}
    assert "RemoteArray(" in repr(r) and "uint32" in repr(r) and "size=17" in repr(r) and "'d'" in repr(r)


def test_arrays_listing(own, rng):
    assert len(own.arrays()) == 0
    rs = [own.put(data(rng, d, n), label=f"l{i}") for i, (d, n) in enumerate([("int32", 10), ("float64", 3),
                                                                              ("int8", 5)])]
    listed = own.arrays()
    assert isinstance(listed, gpuscan.ResidentArrays) and len(listed) == 3
    # One store lists oldest first; a front of worker processes (a host of several GPUs) device by
    # device, its budget the devices' together (docs/resident.md).
    stores = listed.budget_bytes // RESIDENT_BYTES
    assert stores >= 1 and listed.budget_bytes == stores * RESIDENT_BYTES and listed.used_bytes >= listed.tenant_bytes
    if stores == 1:
        assert [q.id for q in listed] == [r.id for r in rs]
    by_id = {q.id: q for q in listed}
    assert sorted(by_id) == sorted(r.id for r in rs) and [by_id[r.id].label for r in rs] == ["l0", "l1", "l2"]
    assert by_id[rs[1].id].dtype == np.dtype("float64") and by_id[rs[1].id].client is own
    assert listed.tenant_bytes == 40 + 24 + 5 and listed.tenant_quota_bytes == 0
    same_bits(by_id[rs[2].id].get(), rs[2].get())
    rs[0].drop()
    assert sorted(q.label for q in own.arrays()) == ["l1", "l2"]


def test_arrays_listing_gathers_every_page(own, rng):
    """ListArrays answers 1000 arrays a page: arrays() asks for every page (next_page_token)."""
    rs = [own.put(np.full(1 + i % 3, i, np.int32)) for i in range(1050)]
    listed = own.arrays()
    assert len(listed) == 1050 and sorted(q.id for q in listed) == sorted(r.id for r in rs)
    if listed.budget_bytes == RESIDENT_BYTES:  # one store: oldest first
        assert [q.id for q in listed] == [r.id for r in rs]
    for r in rs:
        r.drop()
    assert len(own.arrays()) == 0


def test_argument_checks(own, rng):
    x = data(rng, "int32", 4)
    for bad in (0, -1, "1", float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="ttl"):
            own.put(x, ttl=bad)
    with pytest.raises(ValueError, match="label"):
        own.put(x, label=5)
    with pytest.raises(gpuscan.InvalidArgument, match="label"):
        own.put(x, label="l" * 129)
    with pytest.raises(ValueError, match="1-D"):
        own.put(np.ones((2, 2), np.int32))
    with pytest.raises(ValueError, match="not served"):
        own.put(np.ones(3, np.complex64))
    with pytest.raises(ValueError, match="contiguous"):
        own.put(np.arange(10, dtype=np.int32)[::2])
    same_bits(own.put(np.arange(10, dtype=np.int32)[::2], copy=True).get(), np.arange(0, 10, 2, dtype=np.int32))


def test_ttl_quota_and_budget(server_binary, rng):
    """A server of its own: ttl cap 1 s, a 4 KiB budget, a 2 KiB quota per tenant."""
    extra = ["--resident-bytes", "4096", "--tenant-quota-bytes", "2048", "--resident-ttl-ms", "1000"]
    with ServerProcess(server_binary, extra=extra) as srv, \
            gpuscan.Client(srv.target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="a") as a, \
            gpuscan.Client(srv.target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="b") as b:
        limits = a.info()["limits"]
        assert (limits["resident_bytes"], limits["tenant_quota_bytes"], limits["resident_ttl_ms"]) == (4096, 2048, 1000)
        assert a.put(data(rng, "int32", 4), ttl=3600).ttl == 1.0  # capped by the server's
        short = a.put(data(rng, "int32", 4), ttl=0.2)
        assert short.ttl == 0.2
        with a.put(data(rng, "int32", 4), ttl=0.2) as gone:
            time.sleep(0.5)
        # (gone is idle past its ttl: leaving `with` raised nothing)
        with pytest.raises(gpuscan.NotFound, match="idle past its ttl"):
            short.get()
        with pytest.raises(gpuscan.NotFound):
            gone.get()
        held = a.put(data(rng, "int64", 200))  # 1600 bytes of a's 2048
        with pytest.raises(gpuscan.ResourceExhausted, match="quota"):
            a.put(data(rng, "int64", 100))
        with pytest.raises(gpuscan.ResourceExhausted, match="quota"):
            a.scan(held, keep=True)  # a kept result counts too
        same_bits(a.reduce(held), a.reduce(held.get()))  # a scratch result does not
        b.put(data(rng, "int64", 250))  # 2000 of b's
        with gpuscan.Client(srv.target, tenant="c") as c, pytest.raises(gpuscan.ResourceExhausted, match="budget"):
            c.put(data(rng, "int64", 100))  # past the budget
        with pytest.raises(gpuscan.ResourceExhausted, match="budget"):
            a.put(data(rng, "int64", 1000))


def test_ids_of_a_restarted_server(server_binary, rng):
    """A restarted server's arrays are gone: NotFound saying so (the client's retries reconnect)."""
    x = data(rng, "int32", 33)
    args = ["--resident-bytes", "65536"]
    srv = ServerProcess(server_binary, extra=args)
    try:
        with gpuscan.Client(srv.target, chunk_bytes=SMALL_CHUNK_BYTES, retries=5, backoff=(0.05, 0.5),
                            timeout=30) as c:
            r = c.put(x)
            port = int(srv.target.rsplit(":", 1)[1])
            srv.kill()
            srv.stop()
            srv = ServerProcess(server_binary, extra=args, port=port)
            with pytest.raises(gpuscan.NotFound, match="restarted"):
                c.get(r)
            with pytest.raises(gpuscan.NotFound, match="restarted"):
                c.scan(r)
            same_bits(c.put(x).get(), x)
    finally:
        srv.stop()


def test_server_without_resident_arrays(server_binary, rng):
    with ServerProcess(server_binary) as srv, gpuscan.Client(srv.target) as c:
        assert "resident" not in c.info()["operations"]
        for call in (lambda: c.put(data(rng, "int32", 3)), c.arrays, lambda: c.get(bytes(24)),
                     lambda: c.drop(bytes(24))):
            with pytest.raises(gpuscan.Unimplemented, match="--resident-bytes"):
                call()


def test_async_client(target, rng):
    x = data(rng, "float64", 65)

    async def main():
        async with AsyncClient(target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="async-one") as c, \
                AsyncClient(target, chunk_bytes=SMALL_CHUNK_BYTES, tenant="async-two") as other:
            r = await c.put(x, label="x")
            assert isinstance(r, gpuscan.RemoteArray) and r.client is c and r.size == 65
            same_bits(await c.get(r), x)
            same_bits(await r.get(8, 9), x[8:17])
            for exclusive in (False, True):
                same_bits(await c.scan(r, exclusive=exclusive), await c.scan(x, exclusive=exclusive))
            same_bits(await c.reduce(r, op="max"), await c.reduce(x, op="max"))
            k = await c.scan(r, keep=True, label="k")
            same_bits(await k.get(), await c.scan(x))
            listed = await c.arrays()
            assert [q.label for q in listed] == ["x", "k"] and listed.tenant_bytes == 2 * 65 * 8
            with pytest.raises(gpuscan.NotFound):
                await other.get(r)
            with pytest.raises(gpuscan.OutOfRange):
                await r.get(60, 10)
            with pytest.raises(TypeError, match="await r.get"):
                np.asarray(r)
            with pytest.raises(TypeError, match="async with"):
                with r:
                    pass
            with pytest.raises(TypeError, match="x is a RemoteArray but values is not"):
                await c.sort(r, values=x)
            assert (await c.drop(k))["label"] == "k"
            async with r:
                pass
            with pytest.raises(gpuscan.NotFound):
                await r.drop()
            async with await c.put(x) as r2:
                await r2.drop()  # gone before the exit: no error
            assert len(await c.arrays()) == 0
    asyncio.run(main())


def test_async_server_without_resident_arrays(server_binary):
    async def main():
        async with AsyncClient(srv.target) as c:
            with pytest.raises(gpuscan.Unimplemented, match="--resident-bytes"):
                await c.put(np.arange(1, 4, dtype=np.int32))
    with ServerProcess(server_binary) as srv:
        asyncio.run(main())
