"""scan(x, axis=...) on matrices (issue 47) against numpy, bit for bit: np.cumsum(x, axis) in the
dtype for sum (np.multiply / np.minimum / np.maximum / np.bitwise_* .accumulate for the other
operators), which folds each row or column in order as the server does; exclusive scans against
the same fold shifted by one behind the identity. Every dtype and operator; shapes whose rows are
shorter than a chunk, cross chunk boundaries and are longer than one, one row, one column, no
rows; negative axes; axis=None flattens as numpy does; async; what the client refuses (before any
call) and a server without "scan_axis"."""
import asyncio

import numpy as np
import pytest

import gpuscan
from test_scan2d import ACCUMULATE, DTYPES, matrix, same_bits

IDENTITY = {"sum": 0, "product": 1, "bit_and": -1, "bit_or": 0, "bit_xor": 0}


def reference(x, op, axis, exclusive=False):
    u = ACCUMULATE[op]
    with np.errstate(over="ignore", invalid="ignore"):
        inclusive = u.accumulate(x, axis=axis, dtype=x.dtype)
    if not exclusive:
        return inclusive
    if op in IDENTITY:
        first = np.array(IDENTITY[op]).astype(x.dtype) if op != "bit_and" else np.array(~x.dtype.type(0), x.dtype)
    elif x.dtype.kind == "f":
        first = np.array(np.inf if op == "min" else -np.inf, x.dtype)
    else:
        info = np.iinfo(x.dtype)
        first = np.array(info.max if op == "min" else info.min, x.dtype)
    out = np.empty_like(inclusive)
    lead = [slice(None)] * 2
    lead[axis] = slice(0, 1)
    out[tuple(lead)] = first
    rest, before = [slice(None)] * 2, [slice(None)] * 2
    rest[axis], before[axis] = slice(1, None), slice(0, -1)
    out[tuple(rest)] = inclusive[tuple(before)]
    return out


@pytest.fixture(scope="module")
def small_chunks(target):
    with gpuscan.Client(target, chunk_bytes=4096, timeout=60) as c:
        yield c


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_operator_both_axes_bit_for_bit(small_chunks, rng, dtype):
    ops = ["sum", "product", "min", "max"] + (["bit_and", "bit_or", "bit_xor"] if dtype[0] != "f" else [])
    for op in ops:
        x = matrix(rng, 37, 301, dtype, op)  # rows of 1204 or 2408 bytes: chunks of 4096 end mid-row
        for axis in (0, 1):
            for exclusive in (False, True):
                got = small_chunks.scan(x, op, exclusive, axis=axis)
                assert same_bits(got, reference(x, op, axis, exclusive)), (op, axis, exclusive)


@pytest.mark.parametrize("shape", [(1, 1), (1, 5000), (5000, 1), (0, 3), (2, 1023), (3, 1025), (700, 2),
                                   (129, 33)])
def test_shapes_around_chunks(small_chunks, rng, shape):
    x = matrix(rng, *shape, "float32", "sum")
    for axis in (0, 1, -1, -2):
        assert same_bits(small_chunks.scan(x, axis=axis), reference(x, "sum", axis % 2)), axis


def test_rows_longer_than_a_chunk_and_many_chunks(target, rng):
    x = matrix(rng, 300, 5000, "float64", "sum")  # 40000-byte rows
    with gpuscan.Client(target, chunk_bytes=1 << 16, timeout=60) as c:
        for axis in (0, 1):
            assert same_bits(c.scan(x, axis=axis), np.cumsum(x, axis=axis, dtype=x.dtype))


def test_out_one_dimensional_arrays_and_flattening(small_chunks, rng):
    c = small_chunks
    x = matrix(rng, 20, 30, "int64", "sum")
    out = np.empty_like(x)
    assert c.scan(x, axis=1, out=out) is out
    assert same_bits(out, np.cumsum(x, axis=1))
    v = x[0].copy()
    assert same_bits(c.scan(v, axis=0), np.cumsum(v))  # a 1-D array's axis 0 is the 1-D scan
    assert same_bits(c.scan(v, axis=-1), np.cumsum(v))
    flat = c.scan(x)  # axis None: the flattened array, as np.cumsum(x)
    assert flat.shape == (600,) and same_bits(flat, np.cumsum(x))
    t = np.asfortranarray(x)
    with pytest.raises(ValueError, match="not C-contiguous"):
        c.scan(t)
    assert same_bits(c.scan(t, copy=True), np.cumsum(x))
    assert same_bits(c.scan(t, axis=0, copy=True), np.cumsum(x, axis=0))


def test_async(target, rng):
    x = matrix(rng, 50, 77, "uint32", "max")

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=1000, timeout=60) as ac:
            return await ac.scan(x, "max", True, axis=0)
    assert same_bits(asyncio.run(main()), reference(x, "max", 0, True))


def test_client_refusals(small_chunks):
    c = small_chunks
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    for axis in (2, -3):
        with pytest.raises(ValueError, match=f"axis {axis}"):
            c.scan(m, axis=axis)
    with pytest.raises(ValueError, match="axis"):
        c.scan(np.zeros((2, 2, 2), np.int32), axis=0)
    for axis in (1.0, "1", True):
        with pytest.raises(ValueError, match="axis must be None or an integer"):
            c.scan(m, axis=axis)
    with pytest.raises(ValueError, match="algorithm"):
        c.scan(m, axis=1, algorithm="decoupled_lookback")
    with pytest.raises(ValueError, match="contiguous"):
        c.scan(m[:, ::2], axis=1)
    with pytest.raises(ValueError, match="shape"):
        c.scan(m, axis=0, out=np.empty((4, 3), np.int32))
    with pytest.raises(ValueError, match="at least one column"):
        c.scan(np.zeros((3, 0), np.float32), axis=0)
    with pytest.raises(gpuscan.InvalidArgument, match="bitwise"):
        c.scan(m.astype(np.float32), "bit_or", axis=1)


def test_a_server_without_axis_scans_is_refused_before_the_call(target):
    with gpuscan.Client(target, timeout=60) as c:
        c._info = lambda timeout: {"operations": ["scan", "scan2d"]}  # as an older server answers
        with pytest.raises(gpuscan.Unimplemented, match="scan_axis"):
            c.scan(np.ones((2, 2), np.int32), axis=1)


def test_info_lists_scan_axis(client):
    assert "scan_axis" in client.info()["operations"]
