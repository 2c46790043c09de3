"""persist() and PersistedArray, on the driver: a dask array's blocks put on the gpuscan servers of
the workers that hold them and kept there (resident arrays, docs/resident.md), named by small
handles (BlockRef); the functions of gpuscan.dask then run each block's call where it lies
(blocks_of picks the block tasks), and release() drops them."""
from __future__ import annotations

import uuid
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

import dask.array as da
import distributed
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from .. import _resident
from ..errors import Unavailable
from . import _blocks, _driver, _resident_blocks
from ._checks import check_array, check_op, check_x
from ._ops import SPLIT_EVERY
from ._resident_blocks import BlockRef, drop_blocks, fetch_block, put_blocks, renew_blocks, scan_kept_blocks

_MASKS = {np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8)}  # one byte an element: compact's where=


class PersistedArray:
    """A 1-D array whose blocks are kept on gpuscan servers (gpuscan.dask.persist's): block i lies
    on the server of the worker that put it, as a resident array. Not a dask array (its blocks are
    handles, not data); gpuscan.dask's scan/cumsum/..., reduce, histogram, compact and sort take it
    in place of one and run each block's call on its server (only carries and results cross the
    wire); scan(p, keep=True) leaves its result there too, a new PersistedArray. to_dask() (or
    compute()) reads the data back. release() (or drop(), or leaving `with
    p:`) drops every block; so does nothing else: unused for their ttl the server drops them
    (renew() restarts it). Attributes as a dask array's: dtype, shape, size, ndim, chunks,
    numblocks, nbytes; blocks: the BlockRefs; targets: {server: blocks it keeps}."""

    def __init__(self, refs: Sequence[BlockRef], dtype: npt.DTypeLike, dask_client: Any, name: str) -> None:
        self._refs: Tuple[BlockRef, ...] = tuple(refs)
        self._dtype = np.dtype(dtype)
        self._dask_client = dask_client
        self._name = name
        self._released = False
        self._array = _refs_array(name, self._refs, self._dtype)

    # -- description
    @property
    def dtype(self) -> np.dtype[Any]:
        """The persisted array's dtype (a bool mask's too, though its blocks are kept as uint8)."""
        return self._dtype

    @property
    def chunks(self) -> Tuple[Tuple[int, ...]]:
        """The blocks' sizes, as a dask array's chunks."""
        return (tuple(r.size for r in self._refs),)

    @property
    def shape(self) -> Tuple[int]:
        """(element count,)."""
        return (sum(r.size for r in self._refs),)

    @property
    def size(self) -> int:
        """The element count."""
        return self.shape[0]

    @property
    def ndim(self) -> int:
        """1: persisted arrays are 1-D."""
        return 1

    @property
    def numblocks(self) -> Tuple[int]:
        """(block count,)."""
        return (len(self._refs),)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements, over every block."""
        return self.size * self._dtype.itemsize

    @property
    def blocks(self) -> Tuple[BlockRef, ...]:
        """The blocks' handles, in order."""
        return self._refs

    @property
    def targets(self) -> Dict[str, int]:
        """{server target: how many non-empty blocks it keeps}."""
        out: Dict[str, int] = {}
        for r in self._refs:
            if r.size:
                out[r.target] = out.get(r.target, 0) + 1
        return out

    @property
    def released(self) -> bool:
        """release() was called."""
        return self._released

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        state = "released" if self._released else f"on {len(self.targets)} server(s)"
        return (f"PersistedArray(shape={self.shape}, dtype={self._dtype}, numblocks={self.numblocks[0]}, "
                f"{state})")

    # -- use
    def blocks_array(self, fn: str) -> da.Array:
        """The graphs' input: a dask array whose block i is BlockRef i (never data: internal)."""
        if self._released:
            raise ValueError(f"gpuscan.dask.{fn}: the persisted array was released (its blocks are dropped)")
        return self._array

    def to_dask(self) -> da.Array:
        """A lazy dask array of the data, x's chunks: each block read back from its server on
        compute (the whole array crosses the wire)."""
        src = self.blocks_array("to_dask")
        name = f"gpuscan-fetch-{tokenize(src)}"
        dsk = {(name, i): (fetch_block, k) for i, k in enumerate(src.__dask_keys__())}
        graph = HighLevelGraph.from_collections(name, dsk, dependencies=[src])
        return da.Array(graph, name, src.chunks, dtype=self._dtype, meta=np.empty(0, self._dtype))

    def reduce(self, op: str = "sum") -> Any:
        """The array's reduction now, a numpy scalar of its dtype with the bits of
        gpuscan.dask.reduce(self).compute(). From the process that ran register(), the blocks'
        servers are called from here, every block at once, without a dask task (a task costs the
        scheduler's round trip); where register() ran in another process, or this one cannot reach
        a server (then remembered), one task on a worker computes it, as reduce(self)."""
        self.blocks_array("reduce")  # released: ValueError
        op = check_op(op, self._dtype, "reduce")
        dc = self._client()
        servers = _driver.servers(dc)
        live = {r.target for r in self._refs if r.size}
        if servers is not None and not live & servers.unreachable:
            try:
                return _resident_blocks.reduce_blocks(list(self._refs), op, self._dtype, SPLIT_EVERY, servers)
            except Unavailable:
                servers.unreachable |= live  # from here; the task below says whether the servers are up
        from ._graphs import reduce  # (_graphs imports this module)
        return dc.compute(reduce(self, op), sync=True)

    def sum(self) -> Any:
        """reduce("sum"): np.sum of the array with its dtype (integers wrap)."""
        return self.reduce("sum")

    def compute(self) -> npt.NDArray[Any]:
        """The data as one numpy array (to_dask() computed on this array's dask client)."""
        return cast(npt.NDArray[Any], self._client().compute(self.to_dask(), sync=True))

    def renew(self) -> int:
        """Restarts every block's ttl (one element read from each; any call on a block does as
        much): how many blocks were renewed. gpuscan.NotFound when one is gone already."""
        self.blocks_array("renew")
        return sum(self._on_servers(renew_blocks, "renew"))

    def release(self) -> int:
        """Drops every block on its server (a task per server, on the workers): how many were
        there. A second release does nothing (0). A block gone already (its ttl) is no error;
        a server that cannot be reached raises once the others are dropped (its blocks stay there
        until their ttl)."""
        if self._released:
            return 0
        self._released = True
        return sum(self._on_servers(drop_blocks, "release"))

    drop = release

    def __enter__(self) -> "PersistedArray":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _client(self) -> Any:
        return self._dask_client if self._dask_client is not None else distributed.get_client()

    def _on_servers(self, fn: Callable[[List[BlockRef]], int], what: str) -> List[int]:
        """fn(the blocks of one server) as a task per server; every task runs, then the first error raises."""
        groups: Dict[str, List[BlockRef]] = {}
        for r in self._refs:
            if r.size:
                groups.setdefault(r.target, []).append(r)
        if not groups:
            return []
        dc = self._client()
        futures = [dc.submit(fn, refs, pure=False, key=f"gpuscan-{what}-{uuid.uuid4().hex}")
                   for refs in groups.values()]
        distributed.wait(futures)
        errors = [f.exception() for f in futures if f.status == "error"]
        if errors:
            raise errors[0]
        return [f.result() for f in futures]


def scan_kept(x: PersistedArray, op: str, exclusive: bool, algorithm: Optional[str], ttl: Optional[float],
              label: Optional[str]) -> PersistedArray:
    """scan(x, keep=True) of a PersistedArray x (the arguments checked): its blocks scanned where
    they lie and kept there, by one task on a worker (_resident_blocks.scan_kept_blocks); the new
    PersistedArray."""
    x.blocks_array("scan")  # released: ValueError
    _resident.ttl_ms(ttl)
    base = _resident.check_label(label) or "gpuscan.dask.scan"
    refs = x.blocks
    dc = x._client()
    key = f"gpuscan-scan-keep-{uuid.uuid4().hex}"
    labels = [f"{base} block {i}" for i in range(len(refs))]
    future = dc.submit(scan_kept_blocks, list(refs), op, exclusive, algorithm, ttl, labels, pure=False, key=key)
    kept = future.result()
    return PersistedArray(kept, x.dtype, dc, key)


class PersistedArrays(tuple):  # type: ignore[type-arg]  # (of PersistedArray)
    """persist()'s answer for several arrays: a tuple of PersistedArrays that releases them all
    (release(), or leaving `with gpuscan.dask.persist(x, m) as (p, pm):`)."""

    def release(self) -> int:
        """Releases each (see PersistedArray.release): how many blocks were dropped."""
        return sum(p.release() for p in self)

    drop = release

    def __enter__(self) -> "PersistedArrays":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _refs_array(name: str, refs: Sequence[BlockRef], dtype: np.dtype[Any]) -> da.Array:
    dsk = {(name, i): r for i, r in enumerate(refs)}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[])
    return da.Array(graph, name, (tuple(r.size for r in refs),), dtype=dtype, meta=np.empty(0, dtype))


def blocks_of(x: Any, fn: str) -> Tuple[Any, ModuleType]:
    """(what the graph reads: x, or a PersistedArray's array of BlockRefs; the module of the block
    tasks for it: _blocks or _resident_blocks)."""
    if isinstance(x, PersistedArray):
        return x.blocks_array(fn), _resident_blocks
    return x, _blocks


def refuse(fn: str, **arrays: Any) -> None:
    """TypeError for a PersistedArray given to fn, which has no path on persisted blocks."""
    for what, a in arrays.items():
        if isinstance(a, PersistedArray):
            raise TypeError(f"gpuscan.dask.{fn} does not take persisted arrays ({what}); pass {what}.to_dask() "
                            "(the data read back) instead")


def same_kind(x_module: ModuleType, what: str, other_module: ModuleType, fn: str) -> None:
    """x and a second input both persisted or neither (never a silent upload or fetch)."""
    if x_module is not other_module:
        persisted = "x" if x_module is _resident_blocks else what
        plain = what if persisted == "x" else "x"
        raise TypeError(f"gpuscan.dask.{fn}: {persisted} is persisted but {plain} is not: persist them together "
                        f"(x, {what} = gpuscan.dask.persist(x, {what})) or pass neither persisted")


def check_mask_together(x: da.Array, mask: da.Array, fn: str) -> None:
    """A persisted mask of compact: one byte an element, each block on its x block's server."""
    if np.dtype(mask.dtype) not in _MASKS:
        raise TypeError(f"gpuscan.dask.{fn}: a persisted where= must be bool, int8 or uint8 (one byte an element, "
                        f"as the server reads it), got {mask.dtype}; persist(x, where != 0)")
    for i, (a, b) in enumerate(zip(_refs_of(x), _refs_of(mask))):
        if a.size and b.size and a.target != b.target:
            raise ValueError(f"gpuscan.dask.{fn}: block {i} of x lies on {a.target} but where's on {b.target}: "
                             "persist them together (x, where = gpuscan.dask.persist(x, where))")


def _refs_of(a: da.Array) -> List[BlockRef]:
    graph = a.__dask_graph__()
    return [graph[k] for k in a.__dask_keys__()]


def persist(*arrays: Any, ttl: Optional[float] = None, label: Optional[str] = None,
            dask_client: Any = None) -> Union[PersistedArray, PersistedArrays]:
    """Puts each block of each 1-D dask array on the gpuscan server of the worker that computes
    it and keeps it there: a PersistedArray; for several arrays a PersistedArrays (a tuple of them
    that releases them all), whose blocks i all lie on one server (x and a mask, for compact).
    Blocks are put as they are computed, in parallel; persist returns once every block is kept
    (so the chunks are known, even of an array of unknown chunk sizes), or raises the first
    failure after dropping what was put.

    dtypes: those gpuscan.dask serves (int32, int64, uint32, uint64, float32, float64), and bool,
    int8 or uint8 for a compact mask. ttl: seconds a block may go unused before its server drops
    it (None: the server's --resident-ttl-ms, one hour by default, which also caps it); each call
    on a block renews it, as does PersistedArray.renew(). label: shown by the servers' ListArrays
    (each block's label adds its index). dask_client: None for the default distributed client;
    register() must have run on it. Each worker's target must name one server (a multi-address
    target could not say which server took a block), which keeps resident arrays
    (--resident-bytes): else a ValueError or gpuscan.Unimplemented saying so."""
    if not arrays:
        raise TypeError("gpuscan.dask.persist needs at least one dask array")
    for j, a in enumerate(arrays):
        what = "x" if len(arrays) == 1 else f"arrays[{j}]"
        check_array(a, what, "persist")
        if np.dtype(a.dtype) not in _MASKS:
            check_x(a, "persist", what)
        if a.numblocks != arrays[0].numblocks:
            raise ValueError(f"gpuscan.dask.persist: {what} has {a.numblocks[0]} blocks but arrays[0] has "
                             f"{arrays[0].numblocks[0]}: arrays persisted together need the same chunks")
    _resident.ttl_ms(ttl)  # a bad ttl: ValueError here
    base = _resident.check_label(label) or "gpuscan.dask.persist"
    dc = dask_client if dask_client is not None else distributed.get_client()
    n = arrays[0].numblocks[0]
    # Puts have effects: a key of their own, never one dask could share with another persist's.
    name = f"gpuscan-persist-{tokenize(*arrays, ttl, base)}-{uuid.uuid4().hex[:12]}"
    keys = [a.__dask_keys__() for a in arrays]
    dsk: Dict[Any, Any] = {}
    for i in range(n):
        labels = [f"{base}{'' if len(arrays) == 1 else f'[{j}]'} block {i}" for j in range(len(arrays))]
        dsk[(name, i)] = (put_blocks, [k[i] for k in keys], ttl, labels)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=list(arrays))
    futures = dc.compute([Delayed((name, i), graph, layer=name) for i in range(n)])
    distributed.wait(futures)
    put = dc.gather([f for f in futures if f.status == "finished"])
    errors = [f.exception() for f in futures if f.status != "finished"]
    del futures
    if not errors:
        sizes = [{r.size for r in refs} for refs in put]
        if any(len(s) > 1 for s in sizes):
            errors.append(ValueError("gpuscan.dask.persist: the arrays' blocks have different sizes: arrays "
                                     "persisted together need the same chunks"))
    if errors:
        _drop_put(dc, [r for refs in put for r in refs])
        raise errors[0]
    out = PersistedArrays(PersistedArray([put[i][j] for i in range(n)], arrays[j].dtype, dc, f"{name}-{j}")
                          for j in range(len(arrays)))
    return out[0] if len(arrays) == 1 else out


def _drop_put(dc: Any, refs: List[BlockRef]) -> None:
    if any(r.size for r in refs):
        PersistedArray(refs, np.int8, dc, "gpuscan-persist-failed").release()
