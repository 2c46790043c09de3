"""N-D host arrays (python.md's "N-D input" table): reduce, histogram and compact flatten them as
numpy's axis=None does (compact's where= of x's shape, indices into the flattened x), scan without
an axis flattens as np.cumsum; a non-C-contiguous one only with copy=True; sort, argsort,
segmented_scan and put refuse them by name. Random data, several shapes and dtypes."""
import numpy as np
import pytest

import gpuscan

SHAPES = [(3, 4), (37, 129), (2, 3, 5, 7), (1, 1000), (1000, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.int8])
def test_flattened_as_numpy(client, rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        m = rng.standard_normal(shape).astype(dtype)
    else:
        m = rng.integers(-100, 100, shape).astype(dtype)
    acc = np.int64 if dtype.itemsize < 4 else dtype
    assert client.reduce(m, "max") == m.max()
    if dtype.kind != "f":
        assert client.reduce(m) == m.sum(dtype=acc)
    np.testing.assert_array_equal(client.histogram(m, 8).counts, np.histogram(m, 8)[0])
    v, i = client.compact(m, predicate=("gt", 0), indices=True)
    np.testing.assert_array_equal(v, m[m > 0])
    np.testing.assert_array_equal(i, np.flatnonzero(m > 0))
    mask = rng.random(shape) < 0.4
    v, i = client.compact(m, where=mask, indices=True)
    np.testing.assert_array_equal(v, m[mask])
    np.testing.assert_array_equal(i, np.flatnonzero(mask))
    if dtype.kind != "f":
        np.testing.assert_array_equal(client.scan(m), np.cumsum(m, dtype=acc))


def test_not_contiguous_only_with_copy(client, rng):
    m = rng.integers(-100, 100, (64, 33)).astype(np.int32).T  # Fortran order
    for call in (lambda **k: client.reduce(m, **k), lambda **k: client.histogram(m, 4, **k),
                 lambda **k: client.compact(m, predicate=("lt", 0), **k)):
        with pytest.raises(ValueError, match=r"shape \(33, 64\) is not C-contiguous.*copy=True"):
            call()
    assert client.reduce(m, copy=True) == m.sum(dtype=np.int32)
    np.testing.assert_array_equal(client.histogram(m, 4, copy=True).counts, np.histogram(m, 4)[0])
    np.testing.assert_array_equal(client.compact(m, predicate=("lt", 0), copy=True), m[m < 0])


def test_refused_by_name(client, rng):
    m = rng.integers(-100, 100, (6, 7)).astype(np.int32)
    with pytest.raises(ValueError, match=r"sort takes a 1-D array, x has shape \(6, 7\).*axis=None"):
        client.sort(m)
    with pytest.raises(ValueError, match=r"argsort takes a 1-D array, x has shape \(6, 7\)"):
        client.argsort(m)
    with pytest.raises(ValueError, match=r"where has shape \(7, 6\), x has \(6, 7\)"):
        client.compact(m, where=np.ones((7, 6), bool))
    with pytest.raises(ValueError, match=r"1-D"):
        client.segmented_scan(m, keys=np.zeros((6, 7), np.int32))
