"""sort: a sample sort of a 1-D dask array (or a persisted one) around the servers' sorts. Each
block is sorted by its worker's server (where it lies, when persisted) and comes back sorted (the
result's elements, once); a few samples of each sorted block choose k - 1 splitters (k: x's
number of blocks); each sorted block is cut at the splitters on its worker; output block j merges
the j-th pieces of every block. Keys compare in IEEE 754 total order for floats (as the server
sorts: -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN), so the result has the bits of one
gpuscan sort of the whole array."""
from __future__ import annotations

import operator
from typing import Any, Dict, List, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt

import dask.array as da
from dask.base import tokenize

from ._checks import check_bool, check_x
from ._graphs import _array
from ._persisted import blocks_of


def sort(x: Any, descending: bool = False) -> da.Array:
    """x's elements in order (ascending; descending=True: the other way): a lazy dask array of x's
    dtype with x's number of blocks, of unknown sizes (nan), as compact's; floats in IEEE 754 total
    order, as gpuscan.Client.sort (numpy puts every NaN last and -0.0 beside +0.0: the same order
    for arrays without NaN or -0.0). x: a 1-D dask array or a PersistedArray (each block sorted
    where it lies). Output blocks are as even as the samples make them (k - 1 of each sorted block);
    many equal keys land in one block. A block's sort is bound by the server's --max-sort-bytes."""
    x, b = blocks_of(x, "sort")
    dtype = check_x(x, "sort")
    descending = check_bool(descending, "descending", "sort")
    k = x.numblocks[0]
    name = f"gpuscan-sort-{'descending-' if descending else ''}{tokenize(x)}"
    run, samp, spl, parts, piece = (f"{name}-{s}" for s in ("run", "sample", "splitters", "parts", "piece"))
    dsk: Dict[Any, Any] = {}
    for i, key in enumerate(x.__dask_keys__()):
        dsk[(run, i)] = (b.sort_block, key)
        dsk[(samp, i)] = (sample_run, (run, i), k - 1)
        dsk[(parts, i)] = (split_run, (run, i), (spl, 0))
        for j in range(k):
            dsk[(piece, i, j)] = (operator.getitem, (parts, i), j)
    dsk[(spl, 0)] = (choose_splitters, [(samp, i) for i in range(k)], k)
    for j in range(k):
        src = k - 1 - j if descending else j
        dsk[(name, j)] = (merge_bucket, [(piece, i, src) for i in range(k)], descending)
    return _array(name, dsk, [x], ((np.nan,) * k,), dtype)


# -- the numpy steps, on the workers
def order_key(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Keys whose order is a's: integers as they are; floats as signed integers in IEEE 754 total
    order (a negative float's bits but the sign flipped). Its own inverse on those bits."""
    if a.dtype.kind != "f":
        return a
    i = a.view(np.int32 if a.dtype.itemsize == 4 else np.int64)
    return cast(npt.NDArray[Any], i ^ ((i >> (8 * a.dtype.itemsize - 1)) & np.iinfo(i.dtype).max))


def sample_run(run: npt.NDArray[Any], s: int) -> npt.NDArray[Any]:
    """s keys of a sorted block at even positions (none of an empty block)."""
    n = len(run)
    if not n or not s:
        return order_key(run[:0])
    return cast(npt.NDArray[Any], order_key(run)[(np.arange(1, s + 1) * n) // (s + 1)])


def choose_splitters(samples: Sequence[npt.NDArray[Any]], k: int) -> npt.NDArray[Any]:
    """k - 1 splitters at even positions of every block's samples together (the largest key where
    there are none: all elements then go to the first output block)."""
    keys = np.sort(np.concatenate(list(samples)))
    if not len(keys):
        return np.full(k - 1, np.iinfo(keys.dtype).max, keys.dtype)
    return cast(npt.NDArray[Any], keys[(np.arange(1, k) * len(keys)) // k])


def split_run(run: npt.NDArray[Any], splitters: npt.NDArray[Any]) -> Tuple[npt.NDArray[Any], ...]:
    """A sorted block cut into len(splitters) + 1 pieces: piece j holds the keys in
    [splitters[j-1], splitters[j])."""
    cuts = np.searchsorted(order_key(run), splitters, side="left") if len(run) else np.zeros(len(splitters), int)
    bounds: List[int] = [0, *(int(c) for c in cuts), len(run)]
    return tuple(run[a:b] for a, b in zip(bounds[:-1], bounds[1:]))


def merge_bucket(pieces: Sequence[npt.NDArray[Any]], descending: bool) -> npt.NDArray[Any]:
    """The pieces (each sorted) as one sorted block, reversed for a descending sort (equal keys
    have equal bits, so this is the server's stable descending order)."""
    a = np.concatenate(list(pieces))
    if a.dtype.kind == "f":
        keys = np.sort(order_key(a), kind="stable")
        out = order_key(keys.view(a.dtype)).view(a.dtype)
    else:
        out = np.sort(a, kind="stable")
    return cast(npt.NDArray[Any], out[::-1].copy() if descending else out)
