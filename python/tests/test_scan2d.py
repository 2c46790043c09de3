"""scan2d (Client/AsyncClient) against numpy's double loop, bit for bit: np.cumsum(axis=1) then
np.cumsum(axis=0) in the dtype for sum (np.multiply / np.minimum / np.maximum / np.bitwise_*
.accumulate for the other operators), which is the association the server fixes. Every dtype
and operator; shapes whose rows are shorter than a chunk, cross chunk boundaries, are longer
than one (chunks end mid-row), one row, one column, no rows; the same bits whatever
chunk_bytes; out=; what the client refuses (ValueError before any call) and what the server
refuses (INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the field)."""
import asyncio

import numpy as np
import pytest

import gpuscan
import raw
from gpuscan.v1 import gpuscan_pb2 as pb

DTYPES = ["int32", "int64", "uint32", "uint64", "float32", "float64"]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}  # float16 too (test_scan_axis.py)
ACCUMULATE = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum,
              "bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


def reference(x, op):
    u = ACCUMULATE[op]
    with np.errstate(over="ignore", invalid="ignore"):
        return u.accumulate(u.accumulate(x, axis=1, dtype=x.dtype), axis=0, dtype=x.dtype)


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(UINT[a.itemsize]),
                                                                        b.view(UINT[b.itemsize]))


def matrix(rng, rows, cols, dtype, op):
    """Random values that keep the table informative: floats of many magnitudes for sum (where
    the association shows), near 1 for product, small odd integers for integer product (the
    product wraps but never sticks at 0), bit patterns with few zeros for bit_and."""
    dt = np.dtype(dtype)
    n = (rows, cols)
    if dt.kind == "f":
        if op == "product":
            return (1 + rng.uniform(-1e-3, 1e-3, n)).astype(dt)
        return (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dt)
    info = np.iinfo(dt)
    if op == "product":
        return (rng.integers(0, 50, n) * 2 + 1).astype(dt)
    if op == "bit_and":
        return (~(np.ones(n, dt) << rng.integers(0, 8 * dt.itemsize, n).astype(dt))).astype(dt) | dt.type(1)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_operator_bit_for_bit(small_chunks, rng, dtype):
    ops = ["sum", "product", "min", "max"] + (["bit_and", "bit_or", "bit_xor"] if dtype[0] != "f" else [])
    for op in ops:
        for rows, cols in ((40, 300), (3, 5000), (700, 1)):
            x = matrix(rng, rows, cols, dtype, op)
            got = small_chunks.scan2d(x, op=op)
            assert same_bits(got, reference(x, op)), (dtype, op, rows, cols)
            assert small_chunks.last_timing.bytes_in == x.nbytes


@pytest.mark.parametrize("shape", [(0, 7), (1, 1), (1, 1023), (1, 1025), (1023, 1), (2, 1024), (3, 1023),
                                   (5, 1025), (17, 3001)])
def test_shapes_around_chunks(small_chunks, rng, shape):
    # 4096-byte chunks: 1024 float32 elements, so rows of 1023 / 1024 / 1025 end chunks mid-row
    x = matrix(rng, *shape, "float32", "sum")
    got = small_chunks.scan2d(x)
    assert got.shape == shape and got.dtype == np.float32
    assert same_bits(got, reference(x, "sum"))


def test_same_bits_whatever_the_chunking(target, rng):
    x = matrix(rng, 123, 777, "float64", "sum")
    want = reference(x, "sum")
    for chunk in (4096, 1 << 20, 8 * 1237):
        with gpuscan.Client(target, chunk_bytes=chunk, timeout=60) as c:
            assert same_bits(c.scan2d(x), want), chunk


def test_out_copy_and_async(target, small_chunks, rng):
    x = matrix(rng, 64, 129, "int64", "sum")
    out = np.empty_like(x)
    assert small_chunks.scan2d(x, out=out) is out
    assert same_bits(out, reference(x, "sum"))
    xt = np.asfortranarray(x)  # not C-contiguous: copy=True sends a contiguous copy
    assert same_bits(small_chunks.scan2d(xt, copy=True), reference(x, "sum"))
    big = x.astype(">i8")
    assert same_bits(small_chunks.scan2d(big, copy=True), reference(x, "sum"))

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=1000, timeout=60) as ac:
            return await ac.scan2d(x, op="max")
    assert same_bits(asyncio.run(main()), reference(x, "max"))


def test_client_refusals(small_chunks):
    c = small_chunks
    for bad in (np.arange(6, dtype=np.int32), np.zeros((2, 2, 2), np.int32)):
        with pytest.raises(ValueError, match="2-D"):
            c.scan2d(bad)
    with pytest.raises(ValueError, match="at least one column"):
        c.scan2d(np.zeros((3, 0), np.float32))
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    with pytest.raises(ValueError, match="contiguous"):
        c.scan2d(m[:, ::2])
    with pytest.raises(ValueError):
        c.scan2d(m.astype(">i4"))
    with pytest.raises(ValueError, match="not served"):
        c.scan2d(m.astype(np.complex64))
    with pytest.raises(ValueError, match="float16 input"):  # narrow matrices: test_scan_axis.py
        c.scan2d(m.astype(np.float16), dtype="int64")
    with pytest.raises(ValueError, match="shape"):
        c.scan2d(m, out=np.empty((4, 3), np.int32))
    with pytest.raises(gpuscan.InvalidArgument, match="bitwise"):
        c.scan2d(m.astype(np.float32), op="bit_xor")


def raw_call(target, header, *chunks):
    """One Scan2D with a header (and chunks) the client would not send."""
    return raw.call(target, "Scan2D", pb.Scan2DRequest(header=header), *(pb.Scan2DRequest(data=d) for d in chunks))


def test_server_refusals(target, client):
    i4 = np.arange(25, dtype=np.int32).tobytes()
    with pytest.raises(gpuscan.InvalidArgument, match="header.cols=0"):
        raw_call(target, pb.Scan2DHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, cols=0))
    with pytest.raises(gpuscan.InvalidArgument, match="inside a row"):
        raw_call(target, pb.Scan2DHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, cols=10), i4)
    with pytest.raises(gpuscan.InvalidArgument, match="header.rows=3"):
        raw_call(target, pb.Scan2DHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, cols=5, rows=3), i4)
    info = client.info()
    limit = info["limits"]["max_scan2d_row_bytes"]
    assert limit > 0
    with pytest.raises(gpuscan.ResourceExhausted, match="max_scan2d_row_bytes"):
        raw_call(target, pb.Scan2DHeader(dtype=pb.DTYPE_FLOAT64, op=pb.OPERATOR_SUM, cols=limit // 8 + 1))
    assert "scan2d" in info["operations"]
