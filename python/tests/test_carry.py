"""scan's carry= (ScanHeader.carry): every result is op(carry, the array's own scan), an exclusive
scan's first element the carry itself, so the bits equal the scan without a carry folded with numpy
afterwards (integers: numpy's scan of x after the carry). Every operator and wide dtype, both kinds,
random data (never zeros) at sizes around the 64-byte chunks, on the streamed paths (the C API's
where it loads, and grpcio's), on RemoteArrays (kept and not), shared memory, a narrow x, a
pipeline stage and the AsyncClient; -0.0 carries; carries refused before any call. Resident calls
answered by one message (a reduce, kept results) go through the C API's header call where it loads."""
import asyncio

import numpy as np
import pytest

import gpuscan
from gpuscan import _ops
from gpuscan.aio import AsyncClient
from gpuscan.testing import ServerProcess
from gpuscan.v1 import gpuscan_pb2 as pb

import reference as ref
from conftest import SMALL_CHUNK_BYTES

# Around the 64-byte chunks (16 four-byte or 8 eight-byte elements a chunk), and a few chunks more.
SIZES = (0, 1, 7, 8, 9, 15, 16, 17, 33, 129)


@pytest.fixture(scope="module")
def grpcio_client(target):
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60, native=False) as c:
        yield c


def fold(op, carry, y, exclusive):
    """y (a scan without carry) with the carry folded in, as the server does."""
    with np.errstate(all="ignore"):
        out = ref._UFUNC[op](carry, y).astype(y.dtype)
    if exclusive and len(y):
        out[0] = carry
    return out


def a_carry(rng, dtype, op):
    """A random nonzero value of dtype (small for products, as the data)."""
    return ref.random_array(rng, dtype, 1, op)[0]


def same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (what, got[:8], want[:8])


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_carry_every_operator_kind_and_size(client, grpcio_client, own, rng, dtype):
    """Streamed (both data paths) and resident (kept and not): the bits of the scan without a
    carry, folded; integers equal numpy's scan folded too."""
    for op in ref.ops_for(dtype):
        for exclusive in (False, True):
            for n in SIZES:
                x = ref.random_array(rng, dtype, n, op)
                carry = a_carry(rng, dtype, op)
                plain = grpcio_client.scan(x, op, exclusive)
                want = fold(op, carry, plain, exclusive)
                what = (op, exclusive, n)
                if dtype.kind != "f":
                    same_bits(want, fold(op, carry, ref.scan(x, op, exclusive), exclusive), what)
                same_bits(client.scan(x, op, exclusive, carry=carry), want, what + ("native",))
                same_bits(grpcio_client.scan(x, op, exclusive, carry=carry), want, what + ("grpcio",))
                # a Python number of the same value (a float32's is exact as a float)
                same_bits(grpcio_client.scan(x, op, exclusive, carry=carry.item()), want, what + ("python",))
                if n:
                    r = own.put(x)
                    same_bits(own.scan(r, op, exclusive, carry=np.asarray(carry)), want, what + ("remote",))
                    kept = own.scan(r, op, exclusive, carry=carry, keep=True)
                    same_bits(kept.get(), want, what + ("kept",))
                    r.drop()
                    kept.drop()


def test_negative_zero_carry(client, grpcio_client):
    """A -0.0 carry: an exclusive scan's first element is -0.0 itself (not -0.0 + identity, which is
    +0.0); later elements -0.0 + scan, the scan's own bits (nonzero)."""
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float64):
        x = ref.random_array(rng, np.dtype(dtype), 40)
        for c in (client, grpcio_client):
            y = c.scan(x, "sum", True, carry=-0.0)
            assert y[0] == 0 and np.signbit(y[0]), y[:3]
            same_bits(y[1:], c.scan(x, "sum", True)[1:], dtype)
            same_bits(c.scan(x, "sum", carry=-0.0), c.scan(x, "sum"), dtype)
            z = c.scan(np.array([-0.0, 1.0], dtype), "max", True, carry=-0.0)
            assert np.signbit(z[0]) and np.signbit(z[1]), z


def test_carry_through_shared_memory_narrow_pipeline_and_lanes(target, client, own):
    """A SharedArray (no data streamed), a narrow x (the carry in the accumulator's dtype, beyond
    the input's), a pipeline scan stage, and a client with default lanes (one stream)."""
    rng = np.random.default_rng(8)
    x = ref.random_array(rng, np.dtype(np.int64), 100)
    a = client.shared_array(len(x), np.int64)
    a[:] = x
    same_bits(client.scan(a, carry=-5), fold("sum", np.int64(-5), ref.scan(x, "sum", False), False), "shared")
    same_bits(client.scan(a, "max", True, carry=3), fold("max", np.int64(3), ref.scan(x, "max", True), True),
              "shared exclusive")
    small = rng.integers(-100, 100, 50).astype(np.int8)
    big = 2**40
    same_bits(client.scan(small, carry=big), big + np.cumsum(small, dtype=np.int64), "narrow")
    with pytest.raises(ValueError, match="float16"):
        client.scan(small.astype(np.float16), carry=1.0)
    same_bits(client.scan(small.astype(np.float16), dtype=np.float32, carry=0.5),
              fold("sum", np.float32(0.5), client.scan(small.astype(np.float16), dtype=np.float32), False), "half")
    r = own.put(x)
    p = own.pipeline()
    s1, s2 = p.scan(r, "sum", carry=7), p.scan(r, "bit_xor", True, carry=9)
    res = p.run()
    same_bits(res[s1], fold("sum", np.int64(7), ref.scan(x, "sum", False), False), "pipeline")
    same_bits(res[s2], fold("bit_xor", np.int64(9), ref.scan(x, "bit_xor", True), True), "pipeline exclusive")
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60, lanes=4) as c:
        same_bits(c.scan(x, carry=11), fold("sum", np.int64(11), ref.scan(x, "sum", False), False), "lanes")


def test_async_client_carry(target):
    x = np.arange(1, 50, dtype=np.uint32)

    async def main():
        async with AsyncClient(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60) as c:
            return await c.scan(x, carry=2**32 - 1), await c.scan(x, "min", True, carry=np.uint32(5))
    inclusive, exclusive = asyncio.run(main())
    same_bits(inclusive, fold("sum", np.uint32(2**32 - 1), ref.scan(x, "sum", False), False), "async")
    same_bits(exclusive, fold("min", np.uint32(5), ref.scan(x, "min", True), True), "async exclusive")


@pytest.mark.parametrize("carry, dtype, exc, words", [
    (2**40, np.int32, ValueError, "int32"),
    (-2**31 - 1, np.int32, ValueError, "int32"),
    (2**64, np.uint64, ValueError, "uint64"),
    (-1, np.uint32, ValueError, "uint32"),
    (1.5, np.int64, ValueError, "int64"),
    (float("nan"), np.int32, ValueError, "int32"),
    (0.1, np.float32, ValueError, "float32"),
    (1e300, np.float32, ValueError, "float32"),
    (2**53 + 1, np.float64, ValueError, "float64"),
    (True, np.int32, TypeError, "number"),
    (np.bool_(False), np.int32, TypeError, "number"),
    ("1", np.int32, TypeError, "number"),
    ([1], np.int32, TypeError, "number"),
    (1j, np.float64, TypeError, "number"),
])
def test_bad_carries_are_refused(carry, dtype, exc, words):
    """Before any call (no server behind the target)."""
    with gpuscan.Client("127.0.0.1:1", chunk_bytes=SMALL_CHUNK_BYTES) as c:
        with pytest.raises(exc, match=words):
            c.scan(np.ones(10, dtype), carry=carry)


def test_carry_refused_with_axis_and_lanes():
    with gpuscan.Client("127.0.0.1:1", chunk_bytes=SMALL_CHUNK_BYTES, lanes=4) as c:
        m = np.ones((4, 5), np.int32)
        for axis in (0, 1, -1):
            with pytest.raises(ValueError, match="axis"):
                c.scan(m, axis=axis, carry=1)
        with pytest.raises(ValueError, match="lanes=2"):
            c.scan(np.ones(100, np.int32), carry=1, lanes=2)
        r = gpuscan.RemoteArray(c, pb.ArrayInfo(id=bytes(24), dtype=pb.DTYPE_INT32, element_count=20))
        with pytest.raises(ValueError, match="axis"):
            c.scan(r.reshape(4, 5), axis=0, carry=1)


def test_requests_carry_one_stream():
    """The header carries the carry's little-endian bytes; the call runs on one stream (no lanes)
    and natively through the whole header; without a carry the field is unset."""
    with gpuscan.Client("127.0.0.1:1", lanes=4) as c:
        x = np.ones(1000, np.int64)
        p = _ops.scan(c, x, "sum", True, None, None, None, None, False, None, None, None, carry=-2)
        assert p.request.header.carry == np.int64(-2).tobytes() and not p.striped and not p.native_lanes
        p = _ops.scan(c, x, "sum", True, None, None, None, None, False, None, None, None)
        assert not p.request.header.HasField("carry") and p.striped
        p = _ops.scan(c, x.astype(np.int16), "max", False, None, None, None, None, False, None, None, None,
                      carry=2**40)
        assert p.request.header.carry == np.int64(2**40).tobytes()
        assert p.request.header.output_dtype == pb.DTYPE_INT64


def test_resident_reduce_and_kept_calls_through_the_header_call(target, server_binary):
    """A native client sends a resident reduce and the kept calls (one answer each) through the C
    API's header call; the results are the streamed calls' and a reduce is retried as before (a
    restarted server: UNAVAILABLE, retried, then NotFound)."""
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60) as c:
        if c._native is None:
            pytest.skip("no C API here")
        calls = []
        header_call = c._native.header_call

        def counted(rpc, request, *a, **kw):
            calls.append(rpc)
            return header_call(rpc, request, *a, **kw)
        c._native.header_call = counted
        x = ref.random_array(np.random.default_rng(9), np.dtype(np.float64), 300)
        r = c.put(x)
        try:
            same_bits(c.reduce(r), c.reduce(x), "reduce")
            same_bits(c.reduce(r, "max"), np.max(x), "reduce max")
            kept = [c.scan(r, carry=1.5, keep=True), c.sort(r, keep=True),
                    c.compact(r, predicate=("gt", 0), keep=True)]
            same_bits(kept[0].get(), fold("sum", np.float64(1.5), c.scan(x), False), "kept scan")
            same_bits(kept[1].get(), c.sort(x), "kept sort")
            same_bits(kept[2].get(), x[x > 0], "kept compact")
            assert len(calls) == 5, calls
            same_bits(c.scan(r), c.scan(x), "streamed back")  # many answers: grpcio's stream
            assert len(calls) == 5, calls
        finally:
            for a in c.arrays():
                a.drop()
    srv = ServerProcess(server_binary, extra=["--resident-bytes", "65536"])
    try:
        with gpuscan.Client(srv.target, retries=5, backoff=(0.05, 0.5), timeout=30) as c:
            r = c.put(x[:100])
            same_bits(c.reduce(r), c.reduce(x[:100]), "reduce")
            port = int(srv.target.rsplit(":", 1)[1])
            srv.kill()
            srv.stop()
            srv = ServerProcess(server_binary, extra=["--resident-bytes", "65536"], port=port)
            with pytest.raises(gpuscan.NotFound, match="restarted"):
                c.reduce(r)
    finally:
        srv.stop()


def test_a_server_without_carries_is_refused_before_the_call(target):
    # An older server ignores header.carry (an unknown field) and answers the plain scan: the
    # client asks info() for "scan_carry" first.
    with gpuscan.Client(target, timeout=60) as c:
        c._info = lambda timeout: {"operations": ["scan", "scan2d", "scan_axis"]}
        with pytest.raises(gpuscan.Unimplemented, match="scan_carry"):
            c.scan(np.arange(1, 9, dtype=np.int32), carry=5)
        assert c.scan(np.arange(1, 9, dtype=np.int32))[-1] == 36  # no carry: served as before


def test_info_lists_scan_carry(client):
    assert "scan_carry" in client.info()["operations"]
