"""numpy references for the server's operations, and random (never all-zero) inputs."""
import numpy as np

DTYPES = [np.dtype(d) for d in ("int32", "int64", "uint32", "uint64", "float32", "float64")]
INT_OPS = ["sum", "product", "min", "max", "bit_and", "bit_or", "bit_xor"]
FLOAT_OPS = ["sum", "product", "min", "max"]

_UFUNC = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum,
          "bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


def ops_for(dtype):
    return FLOAT_OPS if dtype.kind == "f" else INT_OPS


def identity(op, dtype):
    if op in ("sum", "bit_or", "bit_xor"):
        return dtype.type(0)
    if op == "product":
        return dtype.type(1)
    if op == "bit_and":
        return np.array(-1).astype(dtype)[()] if dtype.kind == "i" else np.iinfo(dtype).max
    big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    small = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return dtype.type(big if op == "min" else small)


def scan(x, op, exclusive):
    with np.errstate(all="ignore"):
        inc = _UFUNC[op].accumulate(x, dtype=x.dtype) if len(x) else x.copy()
    if not exclusive:
        return inc
    out = np.empty_like(x)
    if len(x):
        out[0] = identity(op, x.dtype)
        out[1:] = inc[:-1]
    return out


def reduce(x, op):
    if len(x) == 0:
        return identity(op, x.dtype)
    with np.errstate(all="ignore"):
        return _UFUNC[op].reduce(x, dtype=x.dtype)


def random_array(rng, dtype, n, op="sum"):
    """Random values, never all zero. Integers span the whole range (sums wrap), except products
    (small odd values so they do not become 0 at once). Float products stay near 1."""
    if dtype.kind == "f":
        if op == "product":
            return rng.uniform(0.5, 1.5, n).astype(dtype)
        return rng.standard_normal(n).astype(dtype)
    info = np.iinfo(dtype)
    if op == "product":
        return (rng.integers(1, 8, n, dtype=dtype) | 1).astype(dtype)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if n and not x.any():
        x[0] = 1
    return x


def assert_scan_close(got, want, x, op):
    assert got.dtype == want.dtype and got.shape == want.shape
    if x.dtype.kind != "f" or op in ("min", "max"):
        np.testing.assert_array_equal(got, want)
        return
    eps = np.finfo(x.dtype).eps
    n = max(len(x), 1)
    if op == "sum":
        scale = np.cumsum(np.abs(x.astype(np.float64))) if len(x) else np.zeros(0)
        assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= 4 * n * eps * scale + 1e-30), \
            f"float sum scan differs beyond tolerance: max err {np.max(np.abs(got - want)) if len(x) else 0}"
    else:
        np.testing.assert_allclose(got, want, rtol=4 * n * eps)


def assert_value_close(got, want, x, op):
    assert isinstance(got, np.generic) and got.dtype == x.dtype.newbyteorder("="), (type(got), got)
    if x.dtype.kind != "f" or op in ("min", "max"):
        if x.dtype.kind == "f" and np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want, (got, want)
        return
    eps = np.finfo(x.dtype).eps
    n = max(len(x), 1)
    scale = float(np.sum(np.abs(x.astype(np.float64)))) if op == "sum" else abs(float(want))
    assert abs(float(got) - float(want)) <= 4 * n * eps * max(scale, 1e-30), (got, want)
