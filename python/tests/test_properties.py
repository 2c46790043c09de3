"""Property tests (hypothesis, few examples: CI runs on 2 cores): random dtype, operator, kind,
length and data against numpy. Skipped where hypothesis is not installed."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import reference as ref  # noqa: E402
from test_ops import PREDICATES, boundary_lengths, compact_input, predicate_for  # noqa: E402


def lengths(dtype):
    """0, 1, chunk boundaries +-1, several chunks, or anything up to 200."""
    return st.one_of(st.sampled_from(boundary_lengths(dtype)), st.integers(0, 200))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_scan_reduce_random(client, data):
    dtype = data.draw(st.sampled_from(ref.DTYPES))
    op = data.draw(st.sampled_from(ref.ops_for(dtype)))
    exclusive = data.draw(st.booleans())
    n = data.draw(lengths(dtype))
    seed = data.draw(st.integers(0, 2**32 - 1))
    x = ref.random_array(np.random.default_rng(seed), dtype, n, op)
    ref.assert_scan_close(client.scan(x, op=op, exclusive=exclusive), ref.scan(x, op, exclusive), x, op)
    ref.assert_value_close(client.reduce(x, op=op), ref.reduce(x, op), x, op)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_compact_where_random(client, data):
    dtype = data.draw(st.sampled_from(ref.DTYPES))
    n = data.draw(lengths(dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = ref.random_array(rng, dtype, n)
    mask = rng.random(n) < data.draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    v, i = client.compact(x, where=mask, indices=True)
    np.testing.assert_array_equal(v, x[mask])
    np.testing.assert_array_equal(i, np.flatnonzero(mask))
    # A non-bool mask: nonzero keeps.
    np.testing.assert_array_equal(client.compact(x, where=mask.astype(np.int32) * 7), x[mask])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_compact_predicate_random(client, data):
    dtype = data.draw(st.sampled_from(ref.DTYPES))
    name = data.draw(st.sampled_from(PREDICATES))
    n = data.draw(lengths(dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = compact_input(rng, dtype, n)
    spec, mask = predicate_for(name, x, rng)
    v, i = client.compact(x, predicate=spec, indices=True)
    np.testing.assert_array_equal(v, x[mask])
    np.testing.assert_array_equal(i, np.flatnonzero(mask))
