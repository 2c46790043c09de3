"""scan(x, axis=...) on matrices (issue 47) against numpy, bit for bit: np.cumsum(x, axis) in the
dtype for sum (np.multiply / np.minimum / np.maximum / np.bitwise_* .accumulate for the other
operators), which folds each row or column in order as the server does; exclusive scans against
the same fold shifted by one behind the identity. Every dtype and operator; shapes whose rows are
shorter than a chunk, cross chunk boundaries and are longer than one, one row, one column, no
rows; negative axes; axis=None flattens as numpy does; async; what the client refuses (before any
call) and a server without "scan_axis". Narrow matrices (int8, uint8, int16, uint16, float16,
bool) along either axis and in scan2d, accumulated in numpy's dtype= (its default or chosen):
integers exactly against numpy, float16 against the server's own float32 result rounded once."""
import asyncio

import numpy as np
import pytest

import gpuscan
from test_scan2d import ACCUMULATE, DTYPES, matrix, same_bits
from test_scan2d import reference as table_reference

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


# -- narrow matrices (int8, uint8, int16, uint16, float16, bool): they travel narrow and are
# accumulated in dtype= (numpy's default or chosen), along either axis and in scan2d. Integers
# exactly against numpy; float16 against the server's own float32 result of the same values
# rounded once (that is what the server computes), whose bits are in turn numpy's float32 fold.

NARROW = ["int8", "uint8", "int16", "uint16", "float16", "bool"]
# 4096-byte chunks of a narrow matrix hold 512 elements for 8-byte results, 1024 for 4-byte ones:
# rows shorter than a chunk that straddle its end, rows of exactly a chunk, rows longer than one.
NARROW_SHAPES = [(1, 1), (1, 700), (600, 1), (3, 511), (2, 512), (5, 513), (37, 301), (2, 1025)]
EXPLICIT = {"i": ["int32", "int64", "float64", "uint64"], "u": ["uint32", "uint64", "int32", "float32"],
            "b": ["int32", "uint32", "uint64", "float64"], "f": ["float32", "float64"]}


def narrow_matrix(rng, rows, cols, dtype):
    """Random values of a narrow dtype, never all zeros (all False)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        x = rng.random((rows, cols)) < 0.4
    elif dt.kind == "f":
        x = (rng.standard_normal((rows, cols)) * 10.0 ** rng.uniform(-2, 2, (rows, cols))).astype(dt)
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, (rows, cols), dtype=dt, endpoint=True)
    x[0, 0] = dt.type(1) if dt.kind != "b" else True
    return x


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_matrices_along_both_axes(small_chunks, rng, dtype):
    c = small_chunks
    dt = np.dtype(dtype)
    for k, shape in enumerate(NARROW_SHAPES):
        x = narrow_matrix(rng, *shape, dt)
        for axis in (0, 1):
            default = np.cumsum(x, axis=axis).dtype  # numpy's: int64, uint64 or float16
            for exclusive in (False, True):
                what = (shape, axis, exclusive)
                got = c.scan(x, exclusive=exclusive, axis=axis)
                assert got.shape == x.shape and got.dtype == default, what
                assert c.last_timing.bytes_in == x.nbytes, what  # narrow on the wire
                explicit = EXPLICIT[dt.kind][(k + 2 * axis + exclusive) % len(EXPLICIT[dt.kind])]
                chosen = c.scan(x, exclusive=exclusive, axis=axis - 2, dtype=explicit)
                assert chosen.dtype == np.cumsum(x, axis=axis, dtype=explicit).dtype, what
                if dt.kind == "f":
                    wide = c.scan(x.astype(np.float32), exclusive=exclusive, axis=axis)
                    assert same_bits(wide, reference(x.astype(np.float32), "sum", axis, exclusive)), what
                    assert same_bits(got, wide.astype(np.float16)), what
                    want = wide if explicit == "float32" else c.scan(x.astype(np.float64), exclusive=exclusive,
                                                                      axis=axis)
                    assert same_bits(chosen, want), what
                else:
                    assert same_bits(got, reference(x.astype(default), "sum", axis, exclusive)), what
                    assert same_bits(chosen, reference(x.astype(explicit), "sum", axis, exclusive)), what


def test_narrow_matrices_other_operators(small_chunks, rng):
    c = small_chunks
    x = narrow_matrix(rng, 29, 517, "int8")
    for op in ("min", "max", "product", "bit_xor"):
        for axis in (0, 1):
            assert same_bits(c.scan(x, op, True, axis=axis, dtype="int32"),
                             reference(x.astype(np.int32), op, axis, True)), (op, axis)
    u = narrow_matrix(rng, 40, 77, "uint16")
    assert same_bits(c.scan(u, "bit_or", axis=0), reference(u.astype(np.uint64), "bit_or", 0))
    h = narrow_matrix(rng, 33, 129, "float16")
    for axis in (0, 1):
        assert same_bits(c.scan(h, "max", axis=axis), reference(h, "max", axis)), axis
        assert same_bits(c.scan(h, "min", True, axis=axis, dtype="float32"),
                         reference(h.astype(np.float32), "min", axis, True)), axis


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_scan2d(small_chunks, rng, dtype):
    c = small_chunks
    dt = np.dtype(dtype)
    for k, shape in enumerate([(1, 1), (1, 700), (600, 1), (5, 513), (37, 301), (2, 1025)]):
        x = narrow_matrix(rng, *shape, dt)
        explicit = EXPLICIT[dt.kind][k % len(EXPLICIT[dt.kind])]
        got, chosen = c.scan2d(x), c.scan2d(x, dtype=explicit)
        assert c.last_timing.bytes_in == x.nbytes, shape
        for d, r in ((None, got), (explicit, chosen)):
            acc = np.cumsum(np.cumsum(x, 0, dtype=d), 1, dtype=d).dtype  # numpy's result dtype
            assert r.shape == x.shape and r.dtype == acc, (shape, d)
            if dt.kind != "f":  # rows folded first, then columns (float32 accumulators: the order shows)
                assert same_bits(r, table_reference(x.astype(acc), "sum")), (shape, d)
        if dt.kind == "f":
            wide = c.scan2d(x.astype(np.float32))
            assert same_bits(got, wide.astype(np.float16)), shape
            assert same_bits(chosen, wide if explicit == "float32" else c.scan2d(x.astype(np.float64))), shape
    m = narrow_matrix(rng, 20, 31, dt)
    if dt.kind != "f":
        assert same_bits(c.scan2d(m, "max", dtype="int64"), table_reference(m.astype(np.int64), "max"))
    else:
        assert same_bits(c.scan2d(m, "min"), table_reference(m, "min"))


def test_narrow_matrix_out_copy_conversion_and_async(small_chunks, target, rng):
    c = small_chunks
    x = narrow_matrix(rng, 30, 40, "int16")
    out = np.empty(x.shape, np.int32)
    assert c.scan(x, axis=0, dtype=np.int32, out=out) is out
    assert same_bits(out, np.cumsum(x, axis=0, dtype=np.int32))
    out64 = np.empty(x.shape, np.int64)
    assert c.scan2d(x, out=out64) is out64
    assert same_bits(out64, np.cumsum(np.cumsum(x, 0), 1))
    with pytest.raises(ValueError, match="out must be a writable contiguous int64"):
        c.scan(x, axis=1, out=np.empty(x.shape, np.int16))
    with pytest.raises(ValueError, match="out must be a writable contiguous int32"):
        c.scan2d(x, dtype="int32", out=np.empty(x.shape, np.int64))
    t = x[:, ::2]
    with pytest.raises(ValueError, match="contiguous"):
        c.scan(t, axis=1)
    assert same_bits(c.scan(t, axis=1, copy=True), np.cumsum(t, axis=1))
    big = x.astype(">i2")
    with pytest.raises(ValueError, match="big-endian"):
        c.scan2d(big)
    assert same_bits(c.scan2d(big, copy=True), np.cumsum(np.cumsum(x, 0), 1))
    b = [[True, False, True], [True, True, False]]  # a list of bools is a bool matrix
    assert same_bits(c.scan(b, axis=0), np.cumsum(b, axis=0))
    w = np.asfortranarray(matrix(rng, 25, 30, "int32", "sum"))  # a 4-byte matrix converted first
    assert same_bits(c.scan(w, axis=1, dtype="float64"), np.cumsum(w, axis=1, dtype=np.float64))
    assert same_bits(c.scan2d(w, dtype=np.int64), np.cumsum(np.cumsum(w, 0, dtype=np.int64), 1, dtype=np.int64))
    h = narrow_matrix(rng, 50, 77, "float16")

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=1000, timeout=60) as ac:
            return (await ac.scan(x, exclusive=True, axis=0), await ac.scan2d(h, dtype="float32"),
                    await ac.scan(h, axis=1))
    ax0, sat, rows = asyncio.run(main())
    assert same_bits(ax0, reference(x.astype(np.int64), "sum", 0, True))
    assert same_bits(sat, c.scan2d(h.astype(np.float32)))
    assert same_bits(rows, np.cumsum(h.astype(np.float32), axis=1).astype(np.float16))


def test_narrow_matrix_refusals(small_chunks):
    c = small_chunks
    h = np.ones((3, 4), np.float16)
    i8 = np.ones((3, 4), np.int8)
    for call in (lambda **k: c.scan(h, axis=0, **k), lambda **k: c.scan2d(h, **k)):
        for bad in ("int64", "uint32", np.int32):
            with pytest.raises(ValueError, match="float16 input"):
                call(dtype=bad)
    for call in (lambda **k: c.scan(i8, axis=1, **k), lambda **k: c.scan2d(i8, **k)):
        for bad in ("int16", "int8", "float16"):
            with pytest.raises(ValueError, match="dtype="):
                call(dtype=bad)
    with pytest.raises(gpuscan.InvalidArgument, match="bitwise"):
        c.scan(h, "bit_or", axis=1)
    with pytest.raises(gpuscan.InvalidArgument, match="bitwise"):
        c.scan2d(i8, "bit_and", dtype="float64")
    with pytest.raises(ValueError, match="at least one column"):
        c.scan(np.zeros((2, 0), np.uint8), axis=0)
    assert c.scan(np.zeros((0, 3), np.int8), axis=0).dtype == np.int64
