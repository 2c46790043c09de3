"""The operators applied with numpy on the workers, as the server computes them: the carries and
partials of the blocks are folded with these."""
from __future__ import annotations

from typing import Any, Dict, cast

import numpy as np
import numpy.typing as npt

SPLIT_EVERY = 32  # fan-in of the tree that combines reduce/histogram partials

_UFUNCS: Dict[str, np.ufunc] = {"sum": np.add, "product": np.multiply, "bit_and": np.bitwise_and,
                                "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


def identity(op: str, dtype: npt.DTypeLike) -> np.generic:
    """The operator's identity in dtype: what an exclusive scan starts from and an empty reduce
    gives (sum, bit_or, bit_xor: 0; product: 1; min: +inf or the largest integer; max: -inf or the
    smallest; bit_and: all bits set)."""
    dt: np.dtype[Any] = np.dtype(dtype)
    if op in ("sum", "bit_or", "bit_xor"):
        return cast(np.generic, dt.type(0))
    if op == "product":
        return cast(np.generic, dt.type(1))
    if op == "bit_and":
        return cast(np.generic, dt.type(np.iinfo(dt).max) if dt.kind == "u" else dt.type(-1))
    if dt.kind == "f":
        return cast(np.generic, dt.type(np.inf if op == "min" else -np.inf))
    return cast(np.generic, dt.type(np.iinfo(dt).max if op == "min" else np.iinfo(dt).min))


def combine(op: str, a: Any, b: Any) -> Any:
    """a op b (either may be an array or a scalar, of one dtype), integers wrapping silently, float
    min/max as IEEE 754-2019 minimum/maximum (NaN propagates, -0.0 < +0.0), as the server computes."""
    with np.errstate(all="ignore"):
        if op in _UFUNCS:
            return _UFUNCS[op](a, b)
        r = np.minimum(a, b) if op == "min" else np.maximum(a, b)
        if np.result_type(a, b).kind == "f" and all(np.ndim(v) or v == 0 for v in (a, b)):
            zeros = (np.asarray(a) == 0) & (np.asarray(b) == 0)
            if np.any(zeros):  # numpy returns b of equal zeros: the sign decides here
                neg = np.signbit(a) | np.signbit(b) if op == "min" else np.signbit(a) & np.signbit(b)
                r = np.where(zeros, np.where(neg, -0.0, 0.0).astype(r.dtype), r)
                if np.ndim(r) == 0:
                    r = r[()]
        return r
