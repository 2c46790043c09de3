"""gpuscan.dask: prefix scans, reductions, stream compaction, segmented scans and histograms of 1-D
dask arrays, each block computed by a gpuscan server next to the dask worker that holds it.

    import dask.array as da, distributed, gpuscan.dask
    dc = distributed.Client(cluster)
    gpuscan.dask.register(dc, ["127.0.0.1:50051", "127.0.0.1:50052"], timeout=60, retries=3)
    x = da.random.randint(-100, 100, 10_000_000, chunks=1_000_000).astype("int64")
    y = gpuscan.dask.cumsum(x)                          # lazy, x's chunks; y.compute()
    s = gpuscan.dask.reduce(x, op="max")                # lazy 0-d array
    counts, edges = gpuscan.dask.histogram(x, 256, range=(-100, 100))
    kept = gpuscan.dask.compact(x, where=x > 0)          # chunks of unknown size, as x[x > 0]
    z = gpuscan.dask.segmented_scan(x, keys=k)          # runs of equal keys, across blocks

dask (and distributed) are imported by this module alone: `import gpuscan` does not need them.

How: `register` installs a distributed WorkerPlugin that opens one gpuscan.Client per worker
(towards the worker's server) and closes it on teardown; clients do not pickle, so they live on
the workers. Each function builds its own graph (no map_blocks, no cumreduction) that keeps the
block index and reads each block once: the block's call on the worker's server, a small task
per block with its element count and total, one task that combines the totals in block order
(an exclusive scan of them with the operator; the operator's identity before the first block),
and a task per block that folds the carried prefix into the block's result with numpy on the
worker (the operator itself: np.add, np.multiply, IEEE 754-2019 minimum/maximum,
np.bitwise_*). Output chunks are the input's. Empty blocks make no call. A worker on the same
host as a server that serves shared memory (--shm-dir) passes scans, reductions and compactions
through shared-memory regions it reuses (one copy in, one copy out) instead of streaming them.

Semantics (docs/dask.md): results have x's dtype, integers wrap as the server's do (numpy's
cumsum/sum widen int32 to int64: compare with np.cumsum(x, dtype=x.dtype)); an exclusive scan's
first element is the identity; integer and min/max results are exact whatever the chunking;
float sum/product bits are reproducible for a given chunking but may change with it (each block
is the server's deterministic tree from the block's start, the blocks are then combined in
order); chunk-independent float bits are not offered. reduce of an empty array is the
operator's identity.
"""
from __future__ import annotations

import math
import numbers
import operator
import os
import threading
import zlib
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

import dask.array as da
import distributed
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from distributed.comm import get_address_host
from distributed.diagnostics.plugin import WorkerPlugin

from . import shared as _shared
from ._types import _OP_ALIASES, DTYPE_NAMES, OPERATORS, PREDICATES, scan_algorithm
from .client import Client
from .errors import Error, Unavailable

__all__ = ["register", "unregister", "worker_info", "GpuscanPlugin", "in_shared_memory", "scan", "cumsum",
           "cumprod", "cummin", "cummax", "reduce", "histogram", "compact", "segmented_scan", "PLUGIN_NAME"]

PLUGIN_NAME = "gpuscan"
SPLIT_EVERY = 32          # fan-in of the tree that combines reduce/histogram partials
_SERVED = {np.dtype(n) for n in DTYPE_NAMES}
Targets = Union[str, Sequence[str], Callable[[str], str]]


# -- arguments, checked on the client before any graph is built ------------------------------------
def _check_array(x, what: str, fn: str) -> None:
    if not isinstance(x, da.Array):
        raise TypeError(f"gpuscan.dask.{fn}: {what} must be a dask array, got {type(x).__name__}; "
                        f"wrap a numpy array with dask.array.from_array({what}, chunks=...)")
    if x.ndim != 1:
        raise ValueError(f"gpuscan.dask.{fn}: {what} must be a 1-D dask array, got shape {x.shape} "
                         f"({x.ndim}-D); pass {what}.ravel() (or one column) instead")


def _check_x(x, fn: str, what: str = "x") -> np.dtype:
    _check_array(x, what, fn)
    d = x.dtype
    if d.byteorder == ">" or d.newbyteorder("=") not in _SERVED or d.kind not in "iuf":
        raise TypeError(f"gpuscan.dask.{fn}: {what} has dtype {d}, which gpuscan does not serve (one of "
                        f"{', '.join(DTYPE_NAMES)}, native byte order); convert it with {what}.astype(...)")
    return np.dtype(d.newbyteorder("="))


def _check_op(op, dtype: np.dtype, fn: str) -> str:
    name = _OP_ALIASES.get(op, op) if isinstance(op, str) else None
    if name not in OPERATORS:
        raise ValueError(f"gpuscan.dask.{fn}: op={op!r} is not an operator gpuscan serves "
                         f"(one of {', '.join(OPERATORS)})")
    if name.startswith("bit_") and dtype.kind == "f":
        raise ValueError(f"gpuscan.dask.{fn}: op={op!r} is bitwise: it takes integer dtypes, and x has dtype {dtype}")
    return name


def _check_bool(value, what: str, fn: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"gpuscan.dask.{fn}: {what} must be True or False, got {value!r}")
    return bool(value)


def _check_same_chunks(x, other, what: str, fn: str) -> None:
    if other.chunks != x.chunks:
        raise ValueError(f"gpuscan.dask.{fn}: {what} must have x's chunks {x.chunks}, got {other.chunks}; "
                         f"pass {what}.rechunk(x.chunks) (known chunk sizes on both)")


# -- the operators, applied with numpy on the workers ----------------------------------------------
_UFUNCS = {"sum": np.add, "product": np.multiply, "bit_and": np.bitwise_and, "bit_or": np.bitwise_or,
           "bit_xor": np.bitwise_xor}


def identity(op: str, dtype) -> np.generic:
    """The operator's identity in dtype: what an exclusive scan starts from and an empty reduce
    gives (sum, bit_or, bit_xor: 0; product: 1; min: +inf or the largest integer; max: -inf or the
    smallest; bit_and: all bits set)."""
    dt = np.dtype(dtype)
    if op in ("sum", "bit_or", "bit_xor"):
        return dt.type(0)
    if op == "product":
        return dt.type(1)
    if op == "bit_and":
        return dt.type(np.iinfo(dt).max) if dt.kind == "u" else dt.type(-1)
    if dt.kind == "f":
        return dt.type(np.inf if op == "min" else -np.inf)
    return dt.type(np.iinfo(dt).max if op == "min" else np.iinfo(dt).min)


def _combine(op: str, a, b):
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


# -- targets: which server each worker calls ---------------------------------------------------------
def _multi_address(target: str) -> bool:
    """A target naming several servers (ipv4:a,b / ipv6:[a],[b]), or a dns: name, which may resolve to
    several."""
    return "," in target or target.startswith("dns:")


def _worker_index(name, address: str, assigned: Dict[str, int]) -> int:
    """Worker i: the worker named i (LocalCluster names its workers 0, 1, ...; `dask worker --name
    3`; a restarted worker keeps its name), else the worker's place among the workers known when
    register() ran (by address), else crc32 of its name (a worker that joined later)."""
    if isinstance(name, numbers.Integral) and not isinstance(name, bool):
        return int(name)
    if isinstance(name, str) and name.strip().lstrip("-").isdigit():
        return int(name)
    if address in assigned:
        return assigned[address]
    return zlib.crc32(str(name).encode())


def _pick_target(targets: Targets, name, address: str, assigned: Dict[str, int]) -> str:
    if isinstance(targets, str):
        return targets
    if callable(targets):
        target = targets(get_address_host(address))
        if not isinstance(target, str) or not target:
            raise ValueError(f"gpuscan.dask: targets({get_address_host(address)!r}) returned "
                             f"{target!r}, not a target string")
        return target
    return targets[_worker_index(name, address, assigned) % len(targets)]


def _check_targets(targets) -> Targets:
    if isinstance(targets, str):
        if not targets:
            raise ValueError("gpuscan.dask.register: targets is empty")
        return targets
    if callable(targets):
        return targets
    if isinstance(targets, (list, tuple)) and targets and all(isinstance(t, str) and t for t in targets):
        return list(targets)
    raise TypeError("gpuscan.dask.register: targets must be a target string (e.g. one multi-address "
                    "'ipv4:10.0.0.5:50051,10.0.0.6:50051'), a non-empty list of target strings (worker i -> "
                    f"targets[i % len(targets)]) or a function of the worker's host; got {targets!r}")


# -- the worker side ------------------------------------------------------------------------------------
class GpuscanPlugin(WorkerPlugin):
    """The worker plugin register() installs (name "gpuscan"): on each worker, one gpuscan.Client
    towards the worker's target, closed on teardown; calls that take shared memory copy their
    blocks into arrays carved from that client's arena (Client.shared_array), made once. The block tasks of this module find it with distributed.get_worker()."""

    name = PLUGIN_NAME

    def __init__(self, targets: Targets, client_options: Dict[str, Any], shared_memory: Optional[bool] = None,
                 assigned: Optional[Dict[str, int]] = None, shm_mode: int = _shared.DEFAULT_MODE):
        self.targets = targets
        self.client_options = dict(client_options)
        self.shared_memory = shared_memory
        self.shm_mode = shm_mode
        self.assigned = dict(assigned or {})

    # -- lifecycle (the worker's event loop thread)
    def setup(self, worker) -> None:
        self.worker_address = worker.address
        self.nthreads = max(1, int(getattr(getattr(worker, "state", worker), "nthreads", 1) or 1))
        self.target = _pick_target(self.targets, worker.name, worker.address, self.assigned)
        opts = dict(self.client_options)
        if _multi_address(self.target):
            opts.setdefault("load_balancing_policy", "round_robin")
        self.client = Client(self.target, **opts)
        self._lock = threading.Lock()
        self._shm: Optional[bool] = None  # decided by the first call that could take it
        self._shm_reason = "not decided yet: no call so far"
        self._shm_dir: Optional[str] = None
        self.calls = 0
        self.shared_calls = 0
        self.elements = 0
        self.copies = 0  # blocks copied into the arena (in_shared_memory's are not)

    def teardown(self, worker) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()  # and its arena's files

    def describe(self) -> Dict[str, Any]:
        return {"target": self.target, "shared_memory": self._shm, "shared_memory_reason": self._shm_reason,
                "data_path": self.client.data_path.name, "calls": self.calls, "shared_calls": self.shared_calls,
                "elements": self.elements, "copies": self.copies}

    # -- shared memory: on where the server serves it from a directory this worker sees
    def _shared_ready(self) -> bool:
        if self._shm is not None:
            return self._shm
        with self._lock:
            if self._shm is None:
                self._decide_shared()
            return bool(self._shm)

    def _decide_shared(self) -> None:
        if self.shared_memory is False:
            self._shm, self._shm_reason = False, "shared_memory=False"
            return
        if self.shared_memory is None and _multi_address(self.target):
            self._shm, self._shm_reason = False, ("the target names several servers (a call may land on any: "
                                                  "streamed, so retries can fail over); shared_memory=True insists")
            return
        try:
            limits = self.client.info()["limits"]
            if not limits.get("shared_memory"):
                reason = "the server serves no shared memory (no --shm-dir)"
            elif not os.path.isdir(limits.get("shm_dir", "")):
                reason = f"the server's --shm-dir {limits.get('shm_dir')} is not a directory here (another host?)"
            else:
                self._shm_dir = limits["shm_dir"]
                a = self._carve(4, np.int64)
                b = self._carve(4, np.int64)
                a[:] = [1, 2, 3, 4]
                self.client.scan(a, out=b)
                reason = "" if b.tolist() == [1, 3, 6, 10] else f"a probe scan answered {b.tolist()}"
        except Unavailable as e:  # undecided: this call streams (and retries); a later one asks again
            if self.shared_memory:
                raise self._named(e, "shared-memory probe") from None
            self._shm_reason = f"not decided: the server was unavailable ({e.message})"
            return
        except (Error, OSError) as e:
            reason = f"the probe failed: {e}"
        self._shm, self._shm_reason = not reason, reason or "on"
        if reason and self.shared_memory:
            raise RuntimeError(f"gpuscan.dask: shared_memory=True but on dask worker {self.worker_address} "
                               f"(server {self.target}): {reason}")

    def _named(self, e: Error, what: str) -> Error:
        """The same error class and code, its message naming the server and the worker."""
        return type(e)(f"gpuscan server {self.target} (dask worker {self.worker_address}, {what}): {e.message}",
                       e.code)

    def _run(self, what: str, n: int, call: Callable[[bool], Any], can_share: bool = True):
        shared = can_share and self._shared_ready()
        try:
            result = call(shared)
        except Error as e:
            raise self._named(e, what) from None
        with self._lock:
            self.calls += 1
            self.shared_calls += shared
            self.elements += n
        return result

    def _carve(self, n: int, dtype) -> _shared.SharedArray:
        """n elements out of the client's arena (old bytes left: they are overwritten)."""
        return self.client.shared_array(n, dtype, dir=self._shm_dir, mode=self.shm_mode, zero=False)

    def _in_region(self, x: np.ndarray, dtype=None) -> _shared.SharedArray:
        """x where the server reads it: as it is when it already lies in a region of the server's
        --shm-dir (a block of in_shared_memory), else copied into the arena (its piece goes back
        when the array is collected)."""
        at = _shared.place(x)
        if at is not None and at.mapping.dir == self._shm_dir and (dtype is None or np.dtype(dtype) == x.dtype):
            return x
        a = self._carve(len(x), dtype or x.dtype)
        np.copyto(a, x, casting="unsafe")
        with self._lock:
            self.copies += 1
        return a

    def to_shared(self, x: np.ndarray) -> np.ndarray:
        """x copied into the arena once (in_shared_memory's blocks), where shared memory is on."""
        if len(x) == 0 or not self._shared_ready():
            return x
        return self._in_region(x)

    # -- the calls (each on a non-empty block)
    def scan(self, x: np.ndarray, op: str, exclusive: bool, algorithm) -> np.ndarray:
        def call(shared: bool) -> np.ndarray:
            if not shared:
                return self.client.scan(x, op, exclusive, algorithm, copy=True)
            ys = self._carve(len(x), x.dtype)
            self.client.scan(self._in_region(x), op, exclusive, algorithm, out=ys)
            return ys  # in the arena: its piece goes back when dask lets go of it
        return self._run("scan", len(x), call)

    def reduce(self, x: np.ndarray, op: str):
        def call(shared: bool):
            if not shared:
                return self.client.reduce(x, op, copy=True)
            return self.client.reduce(self._in_region(x), op)
        return self._run("reduce", len(x), call)

    def compact(self, x: np.ndarray, mask: Optional[np.ndarray], predicate, indices: bool):
        def call(shared: bool):
            if not shared:
                return self.client.compact(x, where=mask, predicate=predicate, indices=indices, copy=True)
            ms = None if mask is None else self._in_region(mask != 0, np.uint8)
            out = self.client.compact(self._in_region(x), where=ms, predicate=predicate, indices=indices)
            return out  # views [:kept] of arena pieces, which go back when dask lets go of them
        return self._run("compact", len(x), call)

    def histogram(self, x: np.ndarray, spec) -> np.ndarray:
        def call(shared: bool) -> np.ndarray:  # streamed: the server has no shared-memory histogram
            if spec[0] == "even":
                return self.client.histogram(x, spec[1], range=spec[2], copy=True).counts
            return self.client.histogram(x, spec[1], copy=True).counts
        return self._run("histogram", len(x), call, can_share=False)

    def segmented_scan(self, x: np.ndarray, keys: np.ndarray, op: str, exclusive: bool) -> np.ndarray:
        def call(shared: bool) -> np.ndarray:  # streamed: no shared memory for segmented scans
            return self.client.segmented_scan(x, keys, op=op, exclusive=exclusive, copy=True)
        return self._run("segmented_scan", len(x), call, can_share=False)


def _plugin() -> GpuscanPlugin:
    """This worker's plugin (in a block task)."""
    try:
        worker = distributed.get_worker()
    except ValueError:
        raise RuntimeError("gpuscan.dask: a block ran outside a dask.distributed worker: compute on a "
                           "distributed.Client after gpuscan.dask.register(client, targets)") from None
    p = worker.plugins.get(PLUGIN_NAME)
    if p is None:
        raise RuntimeError(f"gpuscan.dask: dask worker {worker.address} has no gpuscan clients: call "
                           "gpuscan.dask.register(client, targets) first")
    return p


# -- registration (the driver) ---------------------------------------------------------------------
def register(dask_client=None, targets: Targets = None, *, shared_memory: Optional[bool] = None,
             shm_mode: int = _shared.DEFAULT_MODE, **client_options) -> Dict[str, str]:
    """Installs the gpuscan worker plugin on every worker of `dask_client` (None: the default
    distributed client), and on every worker that joins or restarts later; a second register()
    replaces the first (its clients are closed).

    targets: which server(s) each worker calls:
      - a list of targets: worker i calls targets[i % len(targets)] (i: the worker's name when it
        is an integer, as LocalCluster's 0, 1, ... and `dask worker --name 3`; else its place by
        address among the workers registered now);
      - a function of the worker's host (e.g. lambda host: f"{host}:50051"), run on the worker;
      - one target string for every worker, e.g. a multi-address "ipv4:10.0.0.5:50051,10.0.0.6:50051"
        (round_robin unless load_balancing_policy= says otherwise: calls fail over to a server
        that is up, with retries=).
    client_options: gpuscan.Client's keywords (timeout, retries, backoff, lanes, chunk_bytes,
    load_balancing_policy, tls, native, ...), checked here. shared_memory: None (the default) uses
    shared memory for scan/reduce/compact where the worker's server serves it from a directory
    the worker sees (single-server targets; probed by the first call); False never; True insists
    (a block fails where it cannot). shm_mode: the regions' file mode (0o600: this user; 0o660
    when the server runs as another user of the directory's group). Returns {worker address: its
    target}."""
    if dask_client is None:
        dask_client = distributed.get_client()
    targets = _check_targets(targets)
    if shared_memory not in (None, True, False):
        raise TypeError(f"gpuscan.dask.register: shared_memory must be None, True or False, got {shared_memory!r}")
    for t in ([targets] if isinstance(targets, str) else targets if isinstance(targets, list) else []):
        opts = dict(client_options)
        if _multi_address(t):
            opts.setdefault("load_balancing_policy", "round_robin")
        try:
            Client(t, **opts).close()  # unknown keywords, bad values, a target grpc refuses: here, not on a worker
        except TypeError as e:
            raise TypeError(f"gpuscan.dask.register: client option not taken by gpuscan.Client: {e}") from None
    workers = dask_client.scheduler_info()["workers"]
    assigned = {addr: i for i, addr in enumerate(sorted(workers))}
    if isinstance(shm_mode, bool) or not isinstance(shm_mode, int) or not 0 <= shm_mode <= 0o777:
        raise ValueError(f"gpuscan.dask.register: shm_mode must be a file mode such as 0o600, got {shm_mode!r}")
    plugin = GpuscanPlugin(targets, client_options, shared_memory, assigned, shm_mode)
    dask_client.register_worker_plugin(plugin, name=PLUGIN_NAME)
    return {addr: info["target"] for addr, info in worker_info(dask_client).items() if info}


def unregister(dask_client=None) -> None:
    """Removes the plugin from every worker (its clients are closed)."""
    if dask_client is None:
        dask_client = distributed.get_client()
    dask_client.unregister_worker_plugin(PLUGIN_NAME)


def _describe(dask_worker) -> Optional[Dict[str, Any]]:
    p = dask_worker.plugins.get(PLUGIN_NAME)
    return p.describe() if p is not None else None


def worker_info(dask_client=None) -> Dict[str, Optional[Dict[str, Any]]]:
    """{worker address: {"target", "shared_memory" (True, False, or None before a call decided it),
    "shared_memory_reason", "data_path", "calls", "shared_calls", "elements"}} (None for a worker
    without the plugin)."""
    if dask_client is None:
        dask_client = distributed.get_client()
    return dask_client.run(_describe)


# -- the block tasks (run on the workers) --------------------------------------------------------------
def _scan_block(x, op: str, exclusive: bool, algorithm):
    """(the block's scan, (element count, the block's total))."""
    x = np.asarray(x)
    if len(x) == 0:
        return x.copy(), (0, identity(op, x.dtype))
    y = _plugin().scan(x, op, exclusive, algorithm)
    return y, (len(x), _last_total(op, exclusive, x, y, len(x)))


def _last_total(op: str, exclusive: bool, x: np.ndarray, y: np.ndarray, run: int):
    """The fold of the last `run` elements of x (the block, or its last segment) from the scan y of
    them: an inclusive scan's last output; an exclusive one leaves the last element out, so its
    last output folded with x[-1], except for a run of one, whose output is the identity: x[-1]
    alone (identity op x[-1] could turn -0.0 into +0.0)."""
    if not exclusive:
        return y[-1]
    return x[-1] if run == 1 else _combine(op, y[-1], x[-1])


def _scan_carries(summaries, op: str):
    """Each block's carried prefix: None where no element comes before it, else op over every
    earlier block's total, in block order."""
    carries, acc = [], None
    for n, total in summaries:
        carries.append(acc)
        if n:
            acc = total if acc is None else _combine(op, acc, total)
    return carries


def _finish_scan(part, carries, i: int, op: str, exclusive: bool):
    y = part[0]
    c = carries[i]
    if c is None or len(y) == 0:
        return y
    r = _combine(op, c, y)
    if exclusive:
        r[0] = c  # the identity there: c exactly (op(c, identity) could turn -0.0 into +0.0)
    return r


def _reduce_block(x, op: str):
    x = np.asarray(x)
    if len(x) == 0:
        return 0, identity(op, x.dtype)
    return len(x), _plugin().reduce(x, op)


def _reduce_combine(parts, op: str, dtype):
    n, acc = 0, None
    for k, v in parts:
        if k:
            acc = v if acc is None else _combine(op, acc, v)
            n += k
    return n, (identity(op, dtype) if acc is None else acc)


def _reduce_final(parts, op: str, dtype):
    return np.dtype(dtype).type(_reduce_combine(parts, op, dtype)[1])


def _hist_block(x, spec, nbins: int):
    x = np.asarray(x)
    if len(x) == 0:
        return np.zeros(nbins, np.int64)
    return _plugin().histogram(x, spec).astype(np.int64)


def _hist_combine(parts):
    return np.sum(parts, axis=0, dtype=np.int64)


def _compact_block(x, mask, predicate, indices: bool, start: int):
    x = np.asarray(x)
    if len(x) == 0:
        v = x[:0].copy()
        return (v, np.zeros(0, np.int64)) if indices else v
    if mask is not None:
        mask = np.asarray(mask)
    out = _plugin().compact(x, mask, predicate, indices)
    if indices:
        return out[0], out[1] + np.int64(start)
    return out


def _segscan_block(x, keys, op: str, exclusive: bool):
    """(the block's segmented scan, the length of its first run, its summary: (element count,
    first key, last key, whether it is one run, the total of its last run))."""
    x, keys = np.asarray(x), np.asarray(keys)
    if len(x) == 0:
        return x.copy(), 0, (0, None, None, True, None)
    y = _plugin().segmented_scan(x, keys, op, exclusive)
    diff = np.flatnonzero(keys[1:] != keys[:-1])
    head = int(diff[0]) + 1 if len(diff) else len(x)
    last_run = len(x) - (int(diff[-1]) + 1) if len(diff) else len(x)
    tail = _last_total(op, exclusive, x, y, last_run)
    return y, head, (len(x), keys[0], keys[-1], head == len(x), tail)


def _segscan_carries(summaries, op: str):
    """Each block's carry: None, or (the key of the run the blocks before it end with, that run's
    total so far); a run goes on through a block that is one run of the same key."""
    carries, state = [], None
    for n, first, last, single, tail in summaries:
        carries.append(state)
        if not n:
            continue
        if state is not None and single and first == state[0]:
            state = (state[0], _combine(op, state[1], tail))
        else:
            state = (last, tail)
    return carries


def _finish_segscan(part, keys, carries, i: int, op: str, exclusive: bool):
    y, head = part[0], part[1]
    c = carries[i]
    if c is None or len(y) == 0 or np.asarray(keys)[0] != c[0]:
        return y
    r = y.copy()
    r[:head] = _combine(op, c[1], y[:head])
    if exclusive:
        r[0] = c[1]
    return r


# -- graphs ------------------------------------------------------------------------------------------------
def _array(name: str, dsk: dict, deps: list, chunks, dtype) -> da.Array:
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    ndim = len(chunks)
    return da.Array(graph, name, chunks, dtype=dtype, meta=np.empty((0,) * ndim, dtype))


def _tree(dsk: dict, prefix: str, keys: list, combine, final_key, final, *args) -> None:
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


def _to_shared_block(x):
    x = np.asarray(x)
    return _plugin().to_shared(x) if len(x) else x


def in_shared_memory(x) -> da.Array:
    """x with each block copied once into the shared-memory arena of the worker that computes it
    (where its server serves shared memory; elsewhere the block as it is): persist it
    (`x = gpuscan.dask.in_shared_memory(x).persist()`) and later scans, reductions and compactions
    of it send each block to the server with no copy. A block moved to another worker arrives as
    a plain array (copied into that worker's arena when a call needs it)."""
    dtype = _check_x(x, "in_shared_memory")
    return x.map_blocks(_to_shared_block, dtype=dtype, meta=np.empty(0, dtype),
                        name=f"gpuscan-in-shared-memory-{tokenize(x)}")


def scan(x, op: str = "sum", exclusive: bool = False, *, algorithm: Optional[str] = None) -> da.Array:
    """Prefix scan of a 1-D dask array on the gpuscan servers: a lazy dask array with x's chunks and
    dtype (integers wrap). op: sum, product, min, max, bit_and, bit_or, bit_xor (bitwise: integer
    dtypes only). exclusive=True: element i is op over x[:i] (the identity at 0). algorithm: a
    server scan algorithm (None: the server's default, deterministic for float sum/product).
    Float sum/product bits may change with the chunking (see the module's doc). Bad arguments
    raise TypeError/ValueError here, before anything runs."""
    dtype = _check_x(x, "scan")
    op = _check_op(op, dtype, "scan")
    exclusive = _check_bool(exclusive, "exclusive", "scan")
    if algorithm is not None:
        scan_algorithm(algorithm)  # an unknown name: ValueError now
    token = tokenize(x, op, exclusive, algorithm)
    name = f"gpuscan-{'exclusive-' if exclusive else ''}scan-{op}-{token}"
    part, summ, carries = f"{name}-part", f"{name}-summary", f"{name}-carries"
    dsk: Dict[Any, Any] = {}
    keys = [k for k in x.__dask_keys__()]
    for i, k in enumerate(keys):
        dsk[(part, i)] = (_scan_block, k, op, exclusive, algorithm)
        dsk[(summ, i)] = (operator.getitem, (part, i), 1)
    dsk[(carries, 0)] = (_scan_carries, [(summ, i) for i in range(len(keys))], op)
    for i in range(len(keys)):
        dsk[(name, i)] = (_finish_scan, (part, i), (carries, 0), i, op, exclusive)
    return _array(name, dsk, [x], x.chunks, dtype)


def cumsum(x, exclusive: bool = False, **kw) -> da.Array:
    """scan(x, "sum", exclusive): x's dtype, wrapping (numpy's cumsum widens int32: compare with
    np.cumsum(x, dtype=x.dtype)). Never dask's cumsum(axis=None), which rechunks (dask/dask#11872)."""
    return scan(x, "sum", exclusive, **kw)


def cumprod(x, exclusive: bool = False, **kw) -> da.Array:
    return scan(x, "product", exclusive, **kw)


def cummin(x, exclusive: bool = False, **kw) -> da.Array:
    return scan(x, "min", exclusive, **kw)


def cummax(x, exclusive: bool = False, **kw) -> da.Array:
    return scan(x, "max", exclusive, **kw)


def reduce(x, op: str = "sum") -> da.Array:
    """Reduction of a 1-D dask array: a lazy 0-d dask array of x's dtype (compute() gives a numpy
    scalar; integers wrap; an empty array gives the operator's identity). Each block is reduced on
    its worker's server, the partials combined with numpy in block order (a tree of fan-in 32)."""
    dtype = _check_x(x, "reduce")
    op = _check_op(op, dtype, "reduce")
    name = f"gpuscan-reduce-{op}-{tokenize(x, op)}"
    part = f"{name}-part"
    dsk: Dict[Any, Any] = {}
    keys = []
    for i, k in enumerate(x.__dask_keys__()):
        dsk[(part, i)] = (_reduce_block, k, op)
        keys.append((part, i))
    _tree(dsk, f"{name}-tree", keys, _reduce_combine, (name,), _reduce_final, op, dtype)
    return _array(name, dsk, [x], (), dtype)


def _histogram_spec(dtype: np.dtype, bins, range) -> Tuple[tuple, Any, np.ndarray]:
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


def histogram(x, bins=None, range=None, density: Optional[bool] = None):
    """dask.array.histogram's semantics and return values, each block counted on its worker's
    server: `counts, edges = histogram(x, 256, range=(0, 1))`. bins: a count (range required, as
    dask requires it: finding the range would be a pass of its own) or a 1-D sequence of edges
    (increasing). counts: a lazy int64 dask array of one chunk; edges: np.linspace(lo, hi, bins +
    1) for a count, else what dask returns for those bins (the numpy array itself, or a dask
    array of a sequence). Bin i counts edges[i] <= v < edges[i+1], the last bin also v ==
    edges[-1], compared in float64 as dask's blocks do (NaN is not counted). density=True: counts
    / bin width / total, as dask. No weights (the server has none)."""
    dtype = _check_x(x, "histogram", "x")
    if density not in (None, True, False):
        raise TypeError(f"gpuscan.dask.histogram: density must be None, True or False, got {density!r}")
    spec, edges, e64 = _histogram_spec(dtype, bins, range)
    nbins = len(e64) - 1
    name = f"gpuscan-histogram-{tokenize(x, spec)}"
    part = f"{name}-part"
    dsk: Dict[Any, Any] = {}
    keys = []
    for i, k in enumerate(x.__dask_keys__()):
        dsk[(part, i)] = (_hist_block, k, spec, nbins)
        keys.append((part, i))
    _tree(dsk, f"{name}-tree", keys, _hist_combine, (name, 0), _hist_combine)
    counts = _array(name, dsk, [x], ((nbins,),), np.int64)
    if density:
        width = da.asarray(np.diff(e64), chunks=counts.chunks)
        return counts / width / counts.sum(), edges
    return counts, edges


def compact(x, where=None, *, predicate=None, indices: bool = False):
    """Stable stream compaction of a 1-D dask array: the elements where the mask `where` (a bool or
    integer dask array with x's chunks; nonzero keeps) is set, or where `predicate` holds (as
    gpuscan.Client.compact's: ("gt", 0), ("in_range", lo, hi), "nonzero", "not_nan", ...). Returns
    a lazy dask array of x's dtype whose chunks have unknown sizes (nan), as x[mask] does (use
    .compute_chunk_sizes() before indexing it); with indices=True (values, indices): the kept
    elements' int64 positions in x (x needs known chunk sizes)."""
    dtype = _check_x(x, "compact")
    indices = _check_bool(indices, "indices", "compact")
    if (where is None) == (predicate is None):
        raise ValueError("gpuscan.dask.compact needs exactly one of where= (a mask) or predicate= (e.g. ('gt', 0))")
    if where is not None:
        _check_array(where, "where", "compact")
        if where.dtype.kind not in "biu":
            raise TypeError(f"gpuscan.dask.compact: where must be a bool or integer mask, got dtype {where.dtype}")
        _check_same_chunks(x, where, "where", "compact")
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
        task = (_compact_block, k, wkeys[i] if wkeys is not None else None, predicate, indices, start)
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


def segmented_scan(x, keys=None, *, op: str = "sum", exclusive: bool = False) -> da.Array:
    """Segmented prefix scan of a 1-D dask array: each run of equal consecutive keys scanned on its
    own (inclusive unless exclusive=True: op's identity at each run's first element), runs going
    on across block boundaries. keys: an integer dask array with x's chunks. A lazy dask array with
    x's chunks and dtype; op and float bits as scan's."""
    dtype = _check_x(x, "segmented_scan")
    if keys is None:
        raise ValueError("gpuscan.dask.segmented_scan needs keys= (an integer dask array with x's chunks: each "
                         "run of equal consecutive keys is a segment)")
    _check_array(keys, "keys", "segmented_scan")
    if keys.dtype.kind not in "iu":
        raise TypeError(f"gpuscan.dask.segmented_scan: keys must be an integer array, got dtype {keys.dtype}")
    _check_same_chunks(x, keys, "keys", "segmented_scan")
    op = _check_op(op, dtype, "segmented_scan")
    exclusive = _check_bool(exclusive, "exclusive", "segmented_scan")
    token = tokenize(x, keys, op, exclusive)
    name = f"gpuscan-segmented-scan-{op}-{token}"
    part, summ, carries = f"{name}-part", f"{name}-summary", f"{name}-carries"
    dsk: Dict[Any, Any] = {}
    xkeys, kkeys = x.__dask_keys__(), keys.__dask_keys__()
    for i, (k, kk) in enumerate(zip(xkeys, kkeys)):
        dsk[(part, i)] = (_segscan_block, k, kk, op, exclusive)
        dsk[(summ, i)] = (operator.getitem, (part, i), 2)
    dsk[(carries, 0)] = (_segscan_carries, [(summ, i) for i in range(len(xkeys))], op)
    for i, kk in enumerate(kkeys):
        dsk[(name, i)] = (_finish_segscan, (part, i), kk, (carries, 0), i, op, exclusive)
    return _array(name, dsk, [x, keys], x.chunks, dtype)
