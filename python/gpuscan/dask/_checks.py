"""Arguments of gpuscan.dask's functions, checked on the client before any graph is built, so a
bad call raises TypeError/ValueError at once instead of failing on a worker."""
from __future__ import annotations

import math
import numbers
from typing import Any, Tuple

import numpy as np
import numpy.typing as npt

import dask.array as da

from .._types import _OP_ALIASES, DTYPE_NAMES, OPERATORS

_SERVED = {np.dtype(n) for n in DTYPE_NAMES}


def check_array(x: Any, what: str, fn: str) -> None:
    """x is a 1-D dask array, else TypeError or ValueError."""
    if not isinstance(x, da.Array):
        raise TypeError(f"gpuscan.dask.{fn}: {what} must be a dask array, got {type(x).__name__}; "
                        f"wrap a numpy array with dask.array.from_array({what}, chunks=...)")
    if x.ndim != 1:
        raise ValueError(f"gpuscan.dask.{fn}: {what} must be a 1-D dask array, got shape {x.shape} "
                         f"({x.ndim}-D); pass {what}.ravel() (or one column) instead")


def check_x(x: Any, fn: str, what: str = "x") -> np.dtype[Any]:
    """x is a 1-D dask array of a served dtype: that dtype (native byte order), else TypeError."""
    check_array(x, what, fn)
    d = x.dtype
    if d.byteorder == ">" or d.newbyteorder("=") not in _SERVED or d.kind not in "iuf":
        raise TypeError(f"gpuscan.dask.{fn}: {what} has dtype {d}, which gpuscan does not serve (one of "
                        f"{', '.join(DTYPE_NAMES)}, native byte order); convert it with {what}.astype(...)")
    return np.dtype(d.newbyteorder("="))


def check_op(op: Any, dtype: np.dtype[Any], fn: str) -> str:
    """The operator's name (aliases resolved), else ValueError; bitwise ones for integers only."""
    name = _OP_ALIASES.get(op, op) if isinstance(op, str) else None
    if name not in OPERATORS:
        raise ValueError(f"gpuscan.dask.{fn}: op={op!r} is not an operator gpuscan serves "
                         f"(one of {', '.join(OPERATORS)})")
    if name.startswith("bit_") and dtype.kind == "f":
        raise ValueError(f"gpuscan.dask.{fn}: op={op!r} is bitwise: it takes integer dtypes, and x has dtype {dtype}")
    return name


def check_bool(value: Any, what: str, fn: str) -> bool:
    """value as a bool when it is True or False (numpy's too), else TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"gpuscan.dask.{fn}: {what} must be True or False, got {value!r}")
    return bool(value)


def check_same_chunks(x: Any, other: Any, what: str, fn: str) -> None:
    """other has x's chunks, else ValueError."""
    if other.chunks != x.chunks:
        raise ValueError(f"gpuscan.dask.{fn}: {what} must have x's chunks {x.chunks}, got {other.chunks}; "
                         f"pass {what}.rechunk(x.chunks) (known chunk sizes on both)")


def histogram_spec(dtype: np.dtype[Any], bins: Any, range: Any) -> Tuple[Tuple[Any, ...], Any, npt.NDArray[Any]]:
    """(the per-block call's bins, the edges histogram() returns (as dask.array.histogram does),
    the edges as float64)."""
    if isinstance(bins, (da.Array,)) or hasattr(bins, "__dask_graph__") or hasattr(range, "__dask_graph__"):
        raise TypeError("gpuscan.dask.histogram: bins and range must be concrete (numbers, a sequence or a numpy "
                        "array), not dask collections")
    if bins is None or (np.ndim(bins) == 0 and range is None):
        raise ValueError("gpuscan.dask.histogram requires either bins as a sequence of edges or both range and "
                         "the number of bins (as dask.array.histogram)")
    if np.ndim(bins) == 0:
        if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, numbers.Integral) or bins < 1:
            raise ValueError(f"gpuscan.dask.histogram: bins must be an integer >= 1 or a sequence of edges, "
                             f"got {bins!r}")
        try:
            if len(range) != 2:
                raise ValueError(f"gpuscan.dask.histogram: range must be a pair (lo, hi), got {len(range)} items")
            lo, hi = float(range[0]), float(range[1])
        except TypeError:
            raise TypeError(f"gpuscan.dask.histogram: range must be a pair (lo, hi) of numbers, "
                            f"got {range!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ValueError(f"gpuscan.dask.histogram: range must be finite with lo <= hi, got {range!r}")
        edges = np.linspace(range[0], range[1], int(bins) + 1)  # dask.array.histogram's edges
        # Even bins on the server count as numpy.histogram(x, bins, range) does, which equals these
        # float64 edges except for float32 data (numpy then rounds the edges to float32) and lo == hi
        # (numpy widens the range): there the edges themselves are sent.
        if dtype != np.float32 and lo < hi:
            return ("even", int(bins), (lo, hi)), edges, edges
        return ("edges", edges), edges, edges
    edges = np.asarray(bins)
    if edges.ndim != 1:
        raise ValueError(f"gpuscan.dask.histogram: bins must be a 1-D sequence of edges, got shape {edges.shape}")
    if edges.size < 2:
        raise ValueError(f"gpuscan.dask.histogram: bins needs at least 2 edges, got {edges.size}")
    try:
        e = edges.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"gpuscan.dask.histogram: bins must be numbers, got dtype {edges.dtype}") from None
    if np.isnan(e).any() or (np.diff(e) < 0).any():
        raise ValueError(f"gpuscan.dask.histogram: bins must increase monotonically (no NaN), got {bins!r}")
    returned = bins if isinstance(bins, np.ndarray) else da.asarray(bins)  # what dask.array.histogram returns
    return ("edges", e), returned, e
