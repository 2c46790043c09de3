"""Persisted blocks on the workers: BlockRef (the handle of one block kept on a gpuscan server) and
the tasks that put, fetch, renew and drop blocks, and run each operation on a block where it lies.
The operations' tasks have _blocks' names and results, so _graphs builds the same graph over
either: only a block's call differs (a resident call here, whose input never crosses the wire),
and an exclusive scan's total, which needs the block's last element (one element fetched). Two
tasks take every block at once instead: reduce's (reduce_blocks: one Pipeline call of reduce stages
a server) and the kept scan's (scan_kept_blocks: those totals, then a call a block, concurrent),
whose results stay on the servers. reduce_blocks runs in the driver too (_driver)."""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt

from .._resident import RemoteArray
from ..client import Client
from ..errors import Error, NotFound, Unimplemented
from ..v1 import gpuscan_pb2 as pb
from ._blocks import _last_total, reduce_combine, reduce_final, scan_carries
from ._ops import identity
from ._targets import multi_address
from ._worker import GpuscanPlugin, plugin


MAX_STAGES = 64  # a Pipeline's stages at most (the server's Limits.max_pipeline_stages)


@dataclasses.dataclass(frozen=True)
class BlockRef:
    """One persisted block: the server that keeps it (target, as register mapped the worker that
    put it), its ArrayInfo as the server answered the put (serialized: id, dtype, count, ttl, label),
    its element count and the dtype of the array persisted (a bool mask is kept as uint8). An empty
    block is never put: target "" and info b"". Small and picklable: the graphs carry BlockRefs,
    never the data."""
    target: str
    info: bytes
    size: int
    dtype: str

    def __repr__(self) -> str:
        where = f"{self.target}, id={self.id.hex()[:12]}..." if self.size else "empty"
        return f"BlockRef({where}, size={self.size}, dtype={np.dtype(self.dtype)})"

    @property
    def id(self) -> bytes:
        """The resident array's id on its server (b"" for an empty block)."""
        return bytes(pb.ArrayInfo.FromString(self.info).id) if self.info else b""

    def remote(self, client: Client) -> RemoteArray:
        """The block as a RemoteArray of `client` (a client of self.target)."""
        return RemoteArray(client, pb.ArrayInfo.FromString(self.info))


def _gone(e: Error) -> Error:
    """A block's NOT_FOUND, saying why a persisted block goes."""
    return NotFound(f"{e.message} (a persisted block of gpuscan.dask.persist: gone once the persisted array "
                    "is released, or after its ttl unused; renew() restarts the ttl)", e.code)


def _call(ref: BlockRef, what: str, n: int, call: Callable[[RemoteArray], Any],
          worker: Optional[GpuscanPlugin] = None) -> Any:
    """call(the block as a RemoteArray) on the block's server, whichever worker runs the task
    (worker: its plugin, for a thread of the task's own); a block gone from the server (released,
    or idle past its ttl) says so."""
    def run(client: Client) -> Any:
        return call(ref.remote(client))
    try:
        return (worker or plugin()).on_server(ref.target, what, n, run)
    except NotFound as e:
        raise _gone(e) from None


# -- persist, fetch, renew, release
def put_blocks(blocks: Sequence[Any], ttl: Optional[float], labels: Sequence[str]) -> Tuple[BlockRef, ...]:
    """Block i of each array persist() was given, put on this worker's server (so they lie
    together); an empty block is not put. On a failure the blocks put so far are dropped."""
    p = plugin()
    if multi_address(p.target):
        raise ValueError(f"gpuscan.dask.persist: dask worker {p.worker_address} calls {p.target!r}, which names "
                         "several servers: a persisted block lives on the one server that took it, so each "
                         "worker's target must name one server (register a list of single targets)")
    refs: List[BlockRef] = []
    try:
        for x, label in zip(blocks, labels):
            x = np.asarray(x)
            if len(x) == 0:
                refs.append(BlockRef("", b"", 0, x.dtype.str))
                continue
            try:
                r = p.on_server(p.target, "persist", len(x), lambda c: c.put(x, ttl=ttl, label=label))
            except Unimplemented as e:
                raise Unimplemented(f"{e.message} (gpuscan.dask.persist keeps each block on its worker's server: "
                                    "every server register() names needs --resident-bytes)", e.code) from None
            # The ArrayInfo as the put answered it (RemoteArray keeps it): the handle is rebuilt from it.
            refs.append(BlockRef(p.target, r._info.SerializeToString(), r.size, x.dtype.str))
    except BaseException:
        drop_blocks(refs)
        raise
    return tuple(refs)


def _by_target(refs: Sequence[BlockRef]) -> Dict[str, List[BlockRef]]:
    groups: Dict[str, List[BlockRef]] = {}
    for ref in refs:
        if ref.size:
            groups.setdefault(ref.target, []).append(ref)
    return groups


def drop_blocks(refs: Sequence[BlockRef]) -> int:
    """Drops the blocks on their servers: how many were there (a block gone already is no error)."""
    dropped = 0
    for target, group in _by_target(refs).items():
        for ref in group:
            try:
                plugin().on_server(target, "release", 0, lambda c: c.drop(ref.remote(c)))
                dropped += 1
            except NotFound:
                pass
    return dropped


def renew_blocks(refs: Sequence[BlockRef]) -> int:
    """Reads each block's first element, a use that restarts its ttl: how many were renewed."""
    for ref in refs:
        if ref.size:
            _call(ref, "renew", 0, lambda r: r.get(0, 1))
    return sum(1 for ref in refs if ref.size)


def fetch_block(ref: BlockRef) -> npt.NDArray[Any]:
    """The block's elements (a bool array was kept as uint8: viewed as bool again)."""
    dtype = _dtype(ref)
    if not ref.size:
        return np.empty(0, dtype)
    out: npt.NDArray[Any] = _call(ref, "get", ref.size, lambda r: r.get())
    return out.view(dtype) if out.dtype != dtype else out


# -- the operations: _blocks' tasks on a persisted block
def scan_block(ref: BlockRef, op: str, exclusive: bool, algorithm: Optional[str]) -> Tuple[Any, Tuple[int, Any]]:
    """(the block's scan, (element count, the block's total)), as _blocks.scan_block."""
    if not ref.size:
        dtype = _dtype(ref)
        return np.empty(0, dtype), (0, identity(op, dtype))
    y = _call(ref, "scan", ref.size, lambda r: r.client.scan(r, op, exclusive, algorithm))
    last = _call(ref, "scan", 0, lambda r: r.get(ref.size - 1, 1)) if exclusive else y[-1:]
    return y, (ref.size, _last_total(op, exclusive, last, y, ref.size))


def reduce_block(ref: BlockRef, op: str) -> Tuple[int, Any]:
    """(element count, the block's reduction), as _blocks.reduce_block."""
    if not ref.size:
        return 0, identity(op, _dtype(ref))
    return ref.size, _call(ref, "reduce", ref.size, lambda r: r.client.reduce(r, op))


def hist_block(ref: BlockRef, spec: Any, nbins: int) -> npt.NDArray[Any]:
    """The block's counts (int64), as _blocks.hist_block."""
    if not ref.size:
        return np.zeros(nbins, np.int64)

    def call(r: RemoteArray) -> Any:
        if spec[0] == "even":
            return r.client.histogram(r, spec[1], range=spec[2]).counts
        return r.client.histogram(r, spec[1]).counts
    return cast(npt.NDArray[Any], _call(ref, "histogram", ref.size, call).astype(np.int64))


def compact_block(ref: BlockRef, mask: Optional[BlockRef], predicate: Any, indices: bool, start: int) -> Any:
    """As _blocks.compact_block; mask: a persisted one-byte mask's block on the same server."""
    if not ref.size:
        v = np.empty(0, _dtype(ref))
        return (v, np.zeros(0, np.int64)) if indices else v

    def call(r: RemoteArray) -> Any:
        m = mask.remote(r.client) if mask is not None else None
        return r.client.compact(r, where=m, predicate=predicate, indices=indices)
    out = _call(ref, "compact", ref.size, call)
    if indices:
        return out[0], out[1] + np.int64(start)
    return out


def sort_block(ref: BlockRef) -> npt.NDArray[Any]:
    """The block sorted by its server (ascending, floats in total order), streamed back."""
    if not ref.size:
        return np.empty(0, _dtype(ref))
    return cast(npt.NDArray[Any], _call(ref, "sort", ref.size, lambda r: r.client.sort(r)))


def _dtype(ref: BlockRef) -> np.dtype[Any]:
    return np.dtype(ref.dtype)


# -- every block in one task: the calls of a round run at once (a thread pool), none streams a block
CALLS_PER_SERVER = 16  # threads of a round's pool per server (a server admits 64 calls at once by default)


def _each(refs: Sequence[BlockRef], call: Callable[[int, BlockRef], Any]) -> List[Any]:
    """call(i, ref) for each non-empty block at once (a pool of CALLS_PER_SERVER threads a server,
    the servers' blocks interleaved): the results in block order (None for an empty block). Every
    call ends before the first error, in block order, raises."""
    queues: Dict[str, List[int]] = {}
    for i, ref in enumerate(refs):
        if ref.size:
            queues.setdefault(ref.target, []).append(i)
    order: List[int] = []  # the servers' blocks interleaved: a bounded pool keeps every server busy
    for k in range(max((len(q) for q in queues.values()), default=0)):
        order += [q[k] for q in queues.values() if k < len(q)]
    out: List[Any] = [None] * len(refs)
    if not order:
        return out
    with ThreadPoolExecutor(max_workers=min(len(order), CALLS_PER_SERVER * len(queues))) as pool:
        futures = {i: pool.submit(call, i, refs[i]) for i in order}
        wait(list(futures.values()))
    errors = [futures[i].exception() for i in sorted(futures) if futures[i].exception() is not None]
    if errors:
        raise cast(BaseException, errors[0])
    for i, f in futures.items():
        out[i] = f.result()
    return out


def _totals(worker: Any, refs: Sequence[BlockRef], op: str) -> List[Any]:
    """Each block's reduction where it lies (None for an empty block): a Pipeline of reduce stages
    a server (at most MAX_STAGES a call), the servers at once. One call a server instead of one a
    block: a persisted sum of 64 blocks from one process took 30 ms with a call a block, 22 ms
    with this (one H200). A server without the Pipeline RPC (an older one): a call a block."""
    groups: Dict[str, List[int]] = {}
    for i, ref in enumerate(refs):
        if ref.size:
            groups.setdefault(ref.target, []).append(i)
    batches = [(t, idx[j:j + MAX_STAGES]) for t, idx in groups.items() for j in range(0, len(idx), MAX_STAGES)]
    out: List[Any] = [None] * len(refs)

    def reduce_batch(target: str, idx: List[int]) -> None:
        def call(client: Client) -> List[Any]:
            try:
                pipeline = client.pipeline()
                stages = [pipeline.reduce(refs[i].remote(client), op) for i in idx]
                res = pipeline.run()
                return [res[s] for s in stages]
            except Unimplemented:
                return [client.reduce(refs[i].remote(client), op) for i in idx]
        try:
            values = worker.on_server(target, "reduce", sum(refs[i].size for i in idx), call)
        except NotFound as e:
            raise _gone(e) from None
        for i, v in zip(idx, values):
            out[i] = v
    # _each runs the batches at once (each stands for the first block of its batch: same server).
    _each([refs[idx[0]] for _, idx in batches], lambda k, _: reduce_batch(*batches[k]))
    return out


def reduce_blocks(refs: Sequence[BlockRef], op: str, dtype: npt.DTypeLike, split_every: int,
                  servers: Optional[Any] = None) -> Any:
    """reduce of a persisted array as one task: every block reduced at once, the values folded
    in block order as the graph of per-block tasks folds them (groups of split_every, level by
    level: reduce_combine, then reduce_final), so the same bits. servers: whose clients call
    (on_server): the worker's plugin (None), or the driver's (_driver.DriverServers)."""
    totals = _totals(servers or plugin(), refs, op)
    parts: List[Any] = [(ref.size, v) if ref.size else (0, identity(op, dtype)) for ref, v in zip(refs, totals)]
    while len(parts) > split_every:
        parts = [reduce_combine(parts[j:j + split_every], op, dtype) for j in range(0, len(parts), split_every)]
    return reduce_final(parts, op, dtype)


def scan_kept_blocks(refs: Sequence[BlockRef], op: str, exclusive: bool, algorithm: Optional[str],
                     ttl: Optional[float], labels: Sequence[str]) -> Tuple[BlockRef, ...]:
    """scan(p, keep=True) as one task: every block's total (its reduction, which equals its
    inclusive scan's last element bit for bit: an exclusive block's total too), the carries in
    block order (scan_carries), then every block scanned where it lies with its carry folded in
    by the server (carry=; none before the first element) and kept (keep=True): the new blocks'
    handles, on the same servers. Each round's calls run at once; a failure drops the blocks kept
    so far."""
    worker = plugin()
    totals = _totals(worker, refs, op)
    carries = scan_carries([(ref.size, t) for ref, t in zip(refs, totals)], op)
    kept: List[Optional[BlockRef]] = [None] * len(refs)

    def scan(i: int, ref: BlockRef) -> None:
        def call(r: RemoteArray) -> Any:
            return r.client.scan(r, op, exclusive, algorithm, keep=True, ttl=ttl, label=labels[i], carry=carries[i])
        y = _call(ref, "scan", ref.size, call, worker)
        kept[i] = BlockRef(ref.target, y._info.SerializeToString(), y.size, ref.dtype)
    try:
        _each(refs, scan)
    except BaseException:
        drop_blocks([k for k in kept if k is not None])
        raise
    return tuple(k if k is not None else BlockRef("", b"", 0, ref.dtype) for k, ref in zip(kept, refs))
