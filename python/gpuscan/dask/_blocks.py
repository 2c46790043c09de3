"""The block tasks, run on the workers: each block's call on the worker's server (an empty block
makes none), and the numpy steps that carry totals across blocks and fold them into results."""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple, cast

import numpy as np
import numpy.typing as npt

from ._ops import combine, identity
from ._worker import plugin


def scan_block(x: Any, op: str, exclusive: bool, algorithm: Optional[str]) -> Tuple[Any, Tuple[int, Any]]:
    """(the block's scan, (element count, the block's total))."""
    x = np.asarray(x)
    if len(x) == 0:
        return x.copy(), (0, identity(op, x.dtype))
    y = plugin().scan(x, op, exclusive, algorithm)
    return y, (len(x), _last_total(op, exclusive, x, y, len(x)))


def _last_total(op: str, exclusive: bool, x: npt.NDArray[Any], y: npt.NDArray[Any], run: int) -> Any:
    """The fold of the last `run` elements of x (the block, or its last segment) from the scan y of
    them: an inclusive scan's last output; an exclusive one leaves the last element out, so its
    last output folded with x[-1], except for a run of one, whose output is the identity: x[-1]
    alone (identity op x[-1] could turn -0.0 into +0.0)."""
    if not exclusive:
        return y[-1]
    return x[-1] if run == 1 else combine(op, y[-1], x[-1])


def scan_carries(summaries: Iterable[Tuple[int, Any]], op: str) -> List[Any]:
    """Each block's carried prefix: None where no element comes before it, else op over every
    earlier block's total, in block order."""
    carries: List[Any] = []
    acc: Any = None
    for n, total in summaries:
        carries.append(acc)
        if n:
            acc = total if acc is None else combine(op, acc, total)
    return carries


def finish_scan(part: Tuple[Any, Any], carries: List[Any], i: int, op: str, exclusive: bool) -> Any:
    """Block i's scan (part: scan_block's) with its carried prefix folded in."""
    y = part[0]
    c = carries[i]
    if c is None or len(y) == 0:
        return y
    r = combine(op, c, y)
    if exclusive:
        r[0] = c  # the identity there: c exactly (op(c, identity) could turn -0.0 into +0.0)
    return r


def reduce_block(x: Any, op: str) -> Tuple[int, Any]:
    """(element count, the block's reduction: the identity for an empty block)."""
    x = np.asarray(x)
    if len(x) == 0:
        return 0, identity(op, x.dtype)
    return len(x), plugin().reduce(x, op)


def reduce_combine(parts: Iterable[Tuple[int, Any]], op: str, dtype: npt.DTypeLike) -> Tuple[int, Any]:
    """reduce_block's results folded in block order: (element count, the reduction)."""
    acc: Any
    n, acc = 0, None
    for k, v in parts:
        if k:
            acc = v if acc is None else combine(op, acc, v)
            n += k
    return n, (identity(op, dtype) if acc is None else acc)


def reduce_final(parts: Iterable[Tuple[int, Any]], op: str, dtype: npt.DTypeLike) -> Any:
    """The reduction of every block as a numpy scalar of dtype."""
    return np.dtype(dtype).type(reduce_combine(parts, op, dtype)[1])


def hist_block(x: Any, spec: Any, nbins: int) -> npt.NDArray[Any]:
    """The block's counts (int64; zeros for an empty block)."""
    x = np.asarray(x)
    if len(x) == 0:
        return np.zeros(nbins, np.int64)
    return cast(npt.NDArray[Any], plugin().histogram(x, spec).astype(np.int64))


def hist_combine(parts: Any) -> Any:
    """The blocks' counts summed (int64)."""
    return np.sum(parts, axis=0, dtype=np.int64)


def compact_block(x: Any, mask: Any, predicate: Any, indices: bool, start: int) -> Any:
    """The block's kept values, or (values, indices), its indices counted from `start`."""
    x = np.asarray(x)
    if len(x) == 0:
        v = x[:0].copy()
        return (v, np.zeros(0, np.int64)) if indices else v
    if mask is not None:
        mask = np.asarray(mask)
    out = plugin().compact(x, mask, predicate, indices)
    if indices:
        return out[0], out[1] + np.int64(start)
    return out


def segscan_block(x: Any, keys: Any, op: str, exclusive: bool) -> Tuple[Any, int, Tuple[Any, ...]]:
    """(the block's segmented scan, the length of its first run, its summary: (element count,
    first key, last key, whether it is one run, the total of its last run))."""
    x, keys = np.asarray(x), np.asarray(keys)
    if len(x) == 0:
        return x.copy(), 0, (0, None, None, True, None)
    y = plugin().segmented_scan(x, keys, op, exclusive)
    diff = np.flatnonzero(keys[1:] != keys[:-1])
    head = int(diff[0]) + 1 if len(diff) else len(x)
    last_run = len(x) - (int(diff[-1]) + 1) if len(diff) else len(x)
    tail = _last_total(op, exclusive, x, y, last_run)
    return y, head, (len(x), keys[0], keys[-1], head == len(x), tail)


def segscan_carries(summaries: Iterable[Tuple[Any, ...]], op: str) -> List[Any]:
    """Each block's carry: None, or (the key of the run the blocks before it end with, that run's
    total so far); a run goes on through a block that is one run of the same key."""
    carries: List[Any] = []
    state: Any = None
    for n, first, last, single, tail in summaries:
        carries.append(state)
        if not n:
            continue
        if state is not None and single and first == state[0]:
            state = (state[0], combine(op, state[1], tail))
        else:
            state = (last, tail)
    return carries


def finish_segscan(part: Tuple[Any, ...], keys: Any, carries: List[Any], i: int, op: str, exclusive: bool) -> Any:
    """Block i's segmented scan with the carried run's total folded into its first run."""
    y, head = part[0], part[1]
    c = carries[i]
    if c is None or len(y) == 0 or np.asarray(keys)[0] != c[0]:
        return y
    r = y.copy()
    r[:head] = combine(op, c[1], y[:head])
    if exclusive:
        r[0] = c[1]
    return r


def to_shared_block(x: Any) -> Any:
    """in_shared_memory's block task: the block copied once into its worker's arena."""
    x = np.asarray(x)
    return plugin().to_shared(x) if len(x) else x


def sort_block(x: Any) -> Any:
    """The block sorted by its worker's server (ascending, floats in total order)."""
    x = np.asarray(x)
    return x.copy() if len(x) == 0 else plugin().sort(x)
