"""The public functions of gpuscan.dask: each checks its arguments and builds its own graph (no
map_blocks but in_shared_memory's, no cumreduction) that keeps the block index and reads each block
once: a call per block, a summary per block, one task combining the summaries in block order, a
task per block folding the carry in (scans), or a tree of combine tasks (reduce, histogram). x may
be a PersistedArray (persist()): the same graph over its blocks' handles, with _resident_blocks'
tasks, which call each block where it lies."""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

import dask.array as da
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._types import PREDICATES, scan_algorithm
from . import _resident_blocks
from ._blocks import (finish_scan, finish_segscan, hist_combine, reduce_combine, reduce_final, scan_carries,
                      segscan_block, segscan_carries, to_shared_block)
from ._checks import check_array, check_bool, check_op, check_same_chunks, check_x, histogram_spec
from ._ops import SPLIT_EVERY
from ._persisted import PersistedArray, blocks_of, check_mask_together, refuse, same_kind, scan_kept


# -- graphs ------------------------------------------------------------------------------------------------
def _array(name: str, dsk: Dict[Any, Any], deps: List[Any], chunks: Tuple[Tuple[float, ...], ...],
           dtype: npt.DTypeLike) -> da.Array:
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    ndim = len(chunks)
    return da.Array(graph, name, chunks, dtype=dtype, meta=np.empty((0,) * ndim, dtype))


def _tree(dsk: Dict[Any, Any], prefix: str, keys: List[Any], combine: Callable[..., Any], final_key: Any,
          final: Callable[..., Any], *args: Any) -> None:
    """final(list of results, *args) at final_key over a tree of combine(list, *args) tasks of fan-in
    SPLIT_EVERY (keys: the partials' keys)."""
    level = 0
    while len(keys) > SPLIT_EVERY:
        nxt = []
        for j in range(0, len(keys), SPLIT_EVERY):
            k = (f"{prefix}-l{level}", j // SPLIT_EVERY)
            dsk[k] = (combine, keys[j:j + SPLIT_EVERY], *args)
            nxt.append(k)
        keys, level = nxt, level + 1
    dsk[final_key] = (final, keys, *args)


def in_shared_memory(x: Any) -> da.Array:
    """x with each block copied once into the shared-memory arena of the worker that computes it
    (where its server serves shared memory; elsewhere the block as it is): persist it
    (`x = gpuscan.dask.in_shared_memory(x).persist()`) and later scans, reductions and compactions
    of it send each block to the server with no copy. A block moved to another worker arrives as
    a plain array (copied into that worker's arena when a call needs it)."""
    refuse("in_shared_memory", x=x)
    dtype = check_x(x, "in_shared_memory")
    return x.map_blocks(to_shared_block, dtype=dtype, meta=np.empty(0, dtype),
                        name=f"gpuscan-in-shared-memory-{tokenize(x)}")


def scan(x: Any, op: str = "sum", exclusive: bool = False, *, algorithm: Optional[str] = None, keep: bool = False,
         ttl: Optional[float] = None, label: Optional[str] = None) -> Union[da.Array, PersistedArray]:
    """Prefix scan of a 1-D dask array on the gpuscan servers: a lazy dask array with x's chunks and
    dtype (integers wrap). op: sum, product, min, max, bit_and, bit_or, bit_xor (bitwise: integer
    dtypes only). exclusive=True: element i is op over x[:i] (the identity at 0). algorithm: a
    server scan algorithm (None: the server's default, deterministic for float sum/product).
    Float sum/product bits may change with the chunking (see gpuscan.dask's doc). Bad arguments
    raise TypeError/ValueError here, before anything runs. x persisted (persist()): each block
    scanned where it lies, the same bits.

    keep=True (x persisted): the result stays on the servers, a new PersistedArray of x's chunks
    whose blocks lie with x's, made now by one task: every block's total (its reduction: one value
    back), the carries in block order, then every block scanned where it lies with its carry (the
    server folds it in: scan's carry=) and kept; nothing else crosses the wire. The same bits as
    the lazy scan (an explicit float algorithm=: the totals are the default's). ttl=, label= as
    persist's (label default "gpuscan.dask.scan"); a failure drops what was kept. Release it as x."""
    if keep is not True and keep is not False:
        raise TypeError(f"gpuscan.dask.scan: keep must be True or False, got {keep!r}")
    if not keep and (ttl is not None or label is not None):
        raise ValueError("gpuscan.dask.scan: ttl= and label= describe a kept result: they need keep=True")
    if keep and not isinstance(x, PersistedArray):
        raise ValueError("gpuscan.dask.scan: keep=True keeps the result on the servers that keep x's blocks: x "
                         "must be persisted (gpuscan.dask.persist(x)); a dask array's scan is lazy (.persist() it)")
    persisted = x
    x, b = blocks_of(x, "scan")
    dtype = check_x(x, "scan")
    op = check_op(op, dtype, "scan")
    exclusive = check_bool(exclusive, "exclusive", "scan")
    if algorithm is not None:
        scan_algorithm(algorithm)  # an unknown name: ValueError now
    if keep:
        return scan_kept(persisted, op, exclusive, algorithm, ttl, label)
    token = tokenize(x, op, exclusive, algorithm)
    name = f"gpuscan-{'exclusive-' if exclusive else ''}scan-{op}-{token}"
    part, summ, carries = f"{name}-part", f"{name}-summary", f"{name}-carries"
    dsk: Dict[Any, Any] = {}
    keys = [k for k in x.__dask_keys__()]
    for i, k in enumerate(keys):
        dsk[(part, i)] = (b.scan_block, k, op, exclusive, algorithm)
        dsk[(summ, i)] = (operator.getitem, (part, i), 1)
    dsk[(carries, 0)] = (scan_carries, [(summ, i) for i in range(len(keys))], op)
    for i in range(len(keys)):
        dsk[(name, i)] = (finish_scan, (part, i), (carries, 0), i, op, exclusive)
    return _array(name, dsk, [x], x.chunks, dtype)


def cumsum(x: Any, exclusive: bool = False, **kw: Any) -> Union[da.Array, PersistedArray]:
    """scan(x, "sum", exclusive, **kw) (keep=True too): x's dtype, wrapping (numpy's cumsum widens int32:
    compare with np.cumsum(x, dtype=x.dtype)). Never dask's cumsum(axis=None), which rechunks (dask/dask#11872)."""
    return scan(x, "sum", exclusive, **kw)


def cumprod(x: Any, exclusive: bool = False, **kw: Any) -> Union[da.Array, PersistedArray]:
    """scan(x, "product", exclusive, **kw): np.cumprod of a 1-D dask array on the servers."""
    return scan(x, "product", exclusive, **kw)


def cummin(x: Any, exclusive: bool = False, **kw: Any) -> Union[da.Array, PersistedArray]:
    """scan(x, "min", exclusive, **kw): np.minimum.accumulate of a 1-D dask array on the servers."""
    return scan(x, "min", exclusive, **kw)


def cummax(x: Any, exclusive: bool = False, **kw: Any) -> Union[da.Array, PersistedArray]:
    """scan(x, "max", exclusive, **kw): np.maximum.accumulate of a 1-D dask array on the servers."""
    return scan(x, "max", exclusive, **kw)


def reduce(x: Any, op: str = "sum") -> da.Array:
    """Reduction of a 1-D dask array: a lazy 0-d dask array of x's dtype (compute() gives a numpy
    scalar; integers wrap; an empty array gives the operator's identity). Each block is reduced on
    its worker's server, the partials combined with numpy in block order (a tree of fan-in 32). A
    persisted x: one task reduces every block where it lies, at once, and folds the values as that
    tree does (the same bits)."""
    x, b = blocks_of(x, "reduce")
    dtype = check_x(x, "reduce")
    op = check_op(op, dtype, "reduce")
    name = f"gpuscan-reduce-{op}-{tokenize(x, op)}"
    part = f"{name}-part"
    dsk: Dict[Any, Any] = {}
    if b is _resident_blocks:
        dsk[(name,)] = (_resident_blocks.reduce_blocks, list(x.__dask_keys__()), op, dtype, SPLIT_EVERY)
        return _array(name, dsk, [x], (), dtype)
    keys = []
    for i, k in enumerate(x.__dask_keys__()):
        dsk[(part, i)] = (b.reduce_block, k, op)
        keys.append((part, i))
    _tree(dsk, f"{name}-tree", keys, reduce_combine, (name,), reduce_final, op, dtype)
    return _array(name, dsk, [x], (), dtype)


def histogram(x: Any, bins: Any = None, range: Optional[Tuple[float, float]] = None,
              density: Optional[bool] = None) -> Tuple[Any, Any]:
    """dask.array.histogram's semantics and return values, each block counted on its worker's
    server: `counts, edges = histogram(x, 256, range=(0, 1))`. bins: a count (range required, as
    dask requires it: finding the range would be a pass of its own) or a 1-D sequence of edges
    (increasing). counts: a lazy int64 dask array of one chunk; edges: np.linspace(lo, hi, bins +
    1) for a count, else what dask returns for those bins (the numpy array itself, or a dask
    array of a sequence). Bin i counts edges[i] <= v < edges[i+1], the last bin also v ==
    edges[-1], compared in float64 as dask's blocks do (NaN is not counted). density=True: counts
    / bin width / total, as dask. No weights (the server has none). x may be persisted."""
    x, b = blocks_of(x, "histogram")
    dtype = check_x(x, "histogram", "x")
    if density not in (None, True, False):
        raise TypeError(f"gpuscan.dask.histogram: density must be None, True or False, got {density!r}")
    spec, edges, e64 = histogram_spec(dtype, bins, range)
    nbins = len(e64) - 1
    name = f"gpuscan-histogram-{tokenize(x, spec)}"
    part = f"{name}-part"
    dsk: Dict[Any, Any] = {}
    keys = []
    for i, k in enumerate(x.__dask_keys__()):
        dsk[(part, i)] = (b.hist_block, k, spec, nbins)
        keys.append((part, i))
    _tree(dsk, f"{name}-tree", keys, hist_combine, (name, 0), hist_combine)
    counts = _array(name, dsk, [x], ((nbins,),), np.int64)
    if density:
        width = da.asarray(np.diff(e64), chunks=counts.chunks)
        return counts / width / counts.sum(), edges
    return counts, edges


def compact(x: Any, where: Any = None, *, predicate: Any = None, indices: bool = False) -> Any:
    """Stable stream compaction of a 1-D dask array: the elements where the mask `where` (a bool or
    integer dask array with x's chunks; nonzero keeps) is set, or where `predicate` holds (as
    gpuscan.Client.compact's: ("gt", 0), ("in_range", lo, hi), "nonzero", "not_nan", ...). Returns
    a lazy dask array of x's dtype whose chunks have unknown sizes (nan), as x[mask] does (use
    .compute_chunk_sizes() before indexing it); with indices=True (values, indices): the kept
    elements' int64 positions in x (x needs known chunk sizes). x persisted: where= persisted with it
    (x, m = persist(x, m): a bool, int8 or uint8 mask whose blocks lie with x's), or a predicate."""
    x, b = blocks_of(x, "compact")
    dtype = check_x(x, "compact")
    indices = check_bool(indices, "indices", "compact")
    if (where is None) == (predicate is None):
        raise ValueError("gpuscan.dask.compact needs exactly one of where= (a mask) or predicate= (e.g. ('gt', 0))")
    if where is not None:
        where, wb = blocks_of(where, "compact")
        same_kind(b, "where", wb, "compact")
        check_array(where, "where", "compact")
        if where.dtype.kind not in "biu":
            raise TypeError(f"gpuscan.dask.compact: where must be a bool or integer mask, got dtype {where.dtype}")
        check_same_chunks(x, where, "where", "compact")
        if b is _resident_blocks:
            check_mask_together(x, where, "compact")
    else:
        pname = predicate if isinstance(predicate, str) else predicate[0] if isinstance(predicate, (tuple, list)) \
            and predicate else None
        if pname is None or (pname not in PREDICATES and pname not in ("==", "!=", "<", "<=", ">", ">=", "range")):
            raise ValueError(f"gpuscan.dask.compact: predicate={predicate!r} is not a gpuscan predicate "
                             f"(one of {', '.join(PREDICATES)}, e.g. ('gt', 0))")
    starts = [0]
    for c in x.chunks[0]:
        starts.append(starts[-1] + c)
    if indices and any(isinstance(c, float) and math.isnan(c) for c in x.chunks[0]):
        raise ValueError("gpuscan.dask.compact: indices=True needs x's chunk sizes (x.compute_chunk_sizes())")
    token = tokenize(x, where, predicate, indices)
    name = f"gpuscan-compact-{token}"
    dsk: Dict[Any, Any] = {}
    wkeys = where.__dask_keys__() if where is not None else None
    pair = f"{name}-pair"
    for i, k in enumerate(x.__dask_keys__()):
        start = starts[i] if indices else 0
        task = (b.compact_block, k, wkeys[i] if wkeys is not None else None, predicate, indices, start)
        if indices:
            dsk[(pair, i)] = task
        else:
            dsk[(name, i)] = task
    deps = [x] + ([where] if where is not None else [])
    chunks = ((np.nan,) * x.numblocks[0],)
    if not indices:
        return _array(name, dsk, deps, chunks, dtype)
    vname, iname = f"{name}-values", f"{name}-indices"
    vdsk, idsk = dict(dsk), dict(dsk)
    for i in range(x.numblocks[0]):
        vdsk[(vname, i)] = (operator.getitem, (pair, i), 0)
        idsk[(iname, i)] = (operator.getitem, (pair, i), 1)
    return _array(vname, vdsk, deps, chunks, dtype), _array(iname, idsk, deps, chunks, np.int64)


def segmented_scan(x: Any, keys: Any = None, *, op: str = "sum", exclusive: bool = False) -> da.Array:
    """Segmented prefix scan of a 1-D dask array: each run of equal consecutive keys scanned on its
    own (inclusive unless exclusive=True: op's identity at each run's first element), runs going
    on across block boundaries. keys: an integer dask array with x's chunks. A lazy dask array with
    x's chunks and dtype; op and float bits as scan's. Not on persisted arrays (yet)."""
    refuse("segmented_scan", x=x, keys=keys)
    dtype = check_x(x, "segmented_scan")
    if keys is None:
        raise ValueError("gpuscan.dask.segmented_scan needs keys= (an integer dask array with x's chunks: each "
                         "run of equal consecutive keys is a segment)")
    check_array(keys, "keys", "segmented_scan")
    if keys.dtype.kind not in "iu":
        raise TypeError(f"gpuscan.dask.segmented_scan: keys must be an integer array, got dtype {keys.dtype}")
    check_same_chunks(x, keys, "keys", "segmented_scan")
    op = check_op(op, dtype, "segmented_scan")
    exclusive = check_bool(exclusive, "exclusive", "segmented_scan")
    token = tokenize(x, keys, op, exclusive)
    name = f"gpuscan-segmented-scan-{op}-{token}"
    part, summ, carries = f"{name}-part", f"{name}-summary", f"{name}-carries"
    dsk: Dict[Any, Any] = {}
    xkeys, kkeys = x.__dask_keys__(), keys.__dask_keys__()
    for i, (k, kk) in enumerate(zip(xkeys, kkeys)):
        dsk[(part, i)] = (segscan_block, k, kk, op, exclusive)
        dsk[(summ, i)] = (operator.getitem, (part, i), 2)
    dsk[(carries, 0)] = (segscan_carries, [(summ, i) for i in range(len(xkeys))], op)
    for i, kk in enumerate(kkeys):
        dsk[(name, i)] = (finish_segscan, (part, i), kk, (carries, 0), i, op, exclusive)
    return _array(name, dsk, [x, keys], x.chunks, dtype)
