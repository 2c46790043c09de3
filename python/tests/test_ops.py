"""scan / reduce / compact against numpy, for every dtype, operator, kind and length around the
chunk boundaries (client chunks of 64 bytes: 16 or 8 elements); random lengths in test_properties."""
import numpy as np
import pytest

import reference as ref
from conftest import SMALL_CHUNK_BYTES


def boundary_lengths(dtype):
    per = SMALL_CHUNK_BYTES // dtype.itemsize
    return sorted({0, 1, 2, per - 1, per, per + 1, 3 * per - 1, 3 * per, 3 * per + 1, 5 * per + 3})


CASES = [(d, op, ex) for d in ref.DTYPES for op in ref.ops_for(d) for ex in (False, True)]


def _id(case):
    d, op, ex = case
    return f"{d}-{op}-{'ex' if ex else 'in'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_scan_boundaries(client, rng, case):
    dtype, op, exclusive = case
    for n in boundary_lengths(dtype):
        x = ref.random_array(rng, dtype, n, op)
        got = client.scan(x, op=op, exclusive=exclusive)
        ref.assert_scan_close(got, ref.scan(x, op, exclusive), x, op)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_reduce_boundaries(client, rng, dtype):
    for op in ref.ops_for(dtype):
        for n in boundary_lengths(dtype):
            x = ref.random_array(rng, dtype, n, op)
            ref.assert_value_close(client.reduce(x, op=op), ref.reduce(x, op), x, op)


def test_integer_wraparound(client):
    for dtype in (np.int32, np.int64, np.uint32, np.uint64):
        info = np.iinfo(dtype)
        x = np.array([info.max, 1, info.max, info.max, 3], dtype)
        np.testing.assert_array_equal(client.scan(x), ref.scan(x, "sum", False))
        assert client.reduce(x) == ref.reduce(x, "sum")
        y = np.array([info.max, 2, 3], dtype)
        np.testing.assert_array_equal(client.scan(y, op="product"), ref.scan(y, "product", False))
    assert client.reduce(np.array([2**31 - 1, 1], np.int32)) == np.int32(-2**31)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_nan_propagates(client, rng, dtype):
    for op in ref.FLOAT_OPS:
        x = ref.random_array(rng, np.dtype(dtype), 50, op)
        x[20] = np.nan
        y = client.scan(x, op=op)
        assert not np.isnan(y[:20]).any() and np.isnan(y[20:]).all(), op
        e = client.scan(x, op=op, exclusive=True)
        assert not np.isnan(e[:21]).any() and np.isnan(e[21:]).all(), op
        assert np.isnan(client.reduce(x, op=op)), op


def test_float_min_max_signed_zero_and_inf(client):
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1.0], np.float64)
    np.testing.assert_array_equal(client.scan(x, op="min"), [0.0, -0.0, -0.0, -np.inf, -np.inf])
    assert np.signbit(client.scan(x, op="min")[1])
    assert client.reduce(x, op="max") == np.inf


def test_empty_identities(client):
    for dtype in ref.DTYPES:
        for op in ref.ops_for(dtype):
            x = np.empty(0, dtype)
            v = client.reduce(x, op=op)
            assert v.dtype == dtype and v == ref.identity(op, dtype), (dtype, op, v)
            assert client.scan(x, op=op).shape == (0,)


# -- compaction

PREDICATES = ["nonzero", "eq", "ne", "lt", "le", "gt", "ge", "in_range", "not_nan"]
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def compact_input(rng, dtype, n):
    """Values with repeats (so eq/ne/range hit), NaNs among floats."""
    if dtype.kind == "f":
        x = rng.integers(-5, 6, n).astype(dtype) + dtype.type(0.5)
        x[rng.random(n) < 0.1] = np.nan
    elif dtype.kind == "u":
        x = rng.integers(0, 10, n).astype(dtype)
    else:
        x = rng.integers(-5, 6, n).astype(dtype)
    if n and not x.any():
        x[0] = 1
    return x


def predicate_for(name, x, rng):
    t = x.dtype.type(x[len(x) // 2] if len(x) and not np.isnan(x[len(x) // 2]) else 1)
    if name in ("nonzero", "not_nan"):
        spec, mask = (name,), (x != 0) if name == "nonzero" else ~np.isnan(x) if x.dtype.kind == "f" else np.ones(len(x), bool)
    elif name == "in_range":
        lo, hi = (x.dtype.type(1), x.dtype.type(4)) if x.dtype.kind == "u" else (x.dtype.type(-2), x.dtype.type(3))
        spec, mask = ("in_range", lo, hi), (x >= lo) & (x < hi)
    else:
        spec, mask = (name, t), _CMP[name](x, t)
    return spec, mask


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_compact_every_predicate(client, rng, dtype):
    for name in PREDICATES:
        for n in boundary_lengths(dtype):
            x = compact_input(rng, dtype, n)
            spec, mask = predicate_for(name, x, rng)
            v, i = client.compact(x, predicate=spec, indices=True)
            np.testing.assert_array_equal(v, x[mask], err_msg=f"{name} n={n}")
            np.testing.assert_array_equal(i, np.flatnonzero(mask).astype(np.int64))
            assert v.dtype == dtype and i.dtype == np.int64
            np.testing.assert_array_equal(client.compact(x, predicate=spec), x[mask])
            np.testing.assert_array_equal(client.compact(x, predicate=spec, values=False, indices=True),
                                          np.flatnonzero(mask))
