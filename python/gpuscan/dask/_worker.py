"""The worker side: the plugin that holds each worker's gpuscan.Client (and decides whether its
calls pass shared memory), and the lookup the block tasks use to find it."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Optional, TypeVar, cast

import numpy as np
import numpy.typing as npt

import distributed
from distributed.diagnostics.plugin import WorkerPlugin

from .. import shared as _shared
from ..client import Client
from ..errors import Error, Unavailable
from ._targets import Targets, multi_address, pick_target

PLUGIN_NAME = "gpuscan"
_T = TypeVar("_T")


def named(e: Error, target: str, where: str, what: str) -> Error:
    """e's class and code, its message naming the server and where the call was made from."""
    return type(e)(f"gpuscan server {target} ({where}, {what}): {e.message}", e.code)


class ClientCache:
    """Clients of servers opened at first use (once a target, with register()'s options), closed
    together: a worker's clients of other workers' servers, the driver's (_driver)."""

    def __init__(self, client_options: Dict[str, Any]) -> None:
        self.client_options = dict(client_options)
        self._clients: Dict[str, Client] = {}
        self._lock = threading.Lock()

    def get(self, target: str) -> Client:
        with self._lock:
            c = self._clients.get(target)
            if c is None:
                c = self._clients[target] = Client(target, **self.client_options)
            return c

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()


class GpuscanPlugin(WorkerPlugin):  # type: ignore[misc]  # (distributed is not followed: Any)
    """The worker plugin register() installs (name "gpuscan"): on each worker, one gpuscan.Client
    towards the worker's target, closed on teardown; calls that take shared memory copy their
    blocks into arrays carved from that client's arena (Client.shared_array), made once. A task
    on a block persisted on another worker's server calls it through a client opened for that
    server (client_for, closed on teardown too). The block tasks find the plugin with plugin()
    (distributed.get_worker())."""

    name = PLUGIN_NAME

    def __init__(self, targets: Targets, client_options: Dict[str, Any], shared_memory: Optional[bool] = None,
                 assigned: Optional[Dict[str, int]] = None, shm_mode: int = _shared.DEFAULT_MODE) -> None:
        self.targets = targets
        self.client_options = dict(client_options)
        self.shared_memory = shared_memory
        self.shm_mode = shm_mode
        self.assigned = dict(assigned or {})

    # -- lifecycle (the worker's event loop thread)
    def setup(self, worker: Any) -> None:
        """Opens the worker's client (distributed calls this when the plugin is installed or the worker starts)."""
        self.worker_address = worker.address
        self.nthreads = max(1, int(getattr(getattr(worker, "state", worker), "nthreads", 1) or 1))
        self.target = pick_target(self.targets, worker.name, worker.address, self.assigned)
        opts = dict(self.client_options)
        if multi_address(self.target):
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
        self._others = ClientCache(self.client_options)  # other workers' servers (persisted blocks)

    def teardown(self, worker: Any) -> None:
        """Closes the worker's clients (and its arena's files)."""
        client = getattr(self, "client", None)
        if client is not None:
            client.close()  # and its arena's files
        others = getattr(self, "_others", None)
        if others is not None:
            others.close()

    def describe(self) -> Dict[str, Any]:
        """What this worker's plugin did: worker_info()'s entry for it."""
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
        if self.shared_memory is None and multi_address(self.target):
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
        return named(e, self.target, f"dask worker {self.worker_address}", what)

    def _run(self, what: str, n: int, call: Callable[[bool], _T], can_share: bool = True) -> _T:
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

    def client_for(self, target: str) -> Client:
        """The client of `target`: this worker's own, or one opened (once, with register's options)
        for a block persisted on another worker's server, which a task moved here must call."""
        return self.client if target == self.target else self._others.get(target)

    def on_server(self, target: str, what: str, n: int, call: Callable[[Client], _T]) -> _T:
        """call(target's client), counted as a call of n elements; a gpuscan.Error comes back as
        the same class and code, its message naming the server and this worker."""
        try:
            result = call(self.client_for(target))
        except Error as e:
            raise named(e, target, f"dask worker {self.worker_address}", what) from None
        with self._lock:
            self.calls += 1
            self.elements += n
        return result

    def _carve(self, n: int, dtype: npt.DTypeLike) -> _shared.SharedArray:
        """n elements out of the client's arena (old bytes left: they are overwritten)."""
        return self.client.shared_array(n, dtype, dir=self._shm_dir, mode=self.shm_mode, zero=False)

    def _in_region(self, x: npt.NDArray[Any], dtype: npt.DTypeLike = None) -> npt.NDArray[Any]:
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

    def to_shared(self, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """x copied into the arena once (in_shared_memory's blocks), where shared memory is on."""
        if len(x) == 0 or not self._shared_ready():
            return x
        return self._in_region(x)

    # -- the calls (each on a non-empty block)
    def scan(self, x: npt.NDArray[Any], op: str, exclusive: bool, algorithm: Optional[str]) -> npt.NDArray[Any]:
        """The block's scan on the worker's server."""
        def call(shared: bool) -> npt.NDArray[Any]:
            if not shared:
                return cast(npt.NDArray[Any], self.client.scan(x, op, exclusive, algorithm, copy=True))
            ys = self._carve(len(x), x.dtype)
            self.client.scan(self._in_region(x), op, exclusive, algorithm, out=ys)
            return ys  # in the arena: its piece goes back when dask lets go of it
        return self._run("scan", len(x), call)

    def reduce(self, x: npt.NDArray[Any], op: str) -> Any:
        """The block's reduction (a numpy scalar) on the worker's server."""
        def call(shared: bool) -> Any:
            if not shared:
                return self.client.reduce(x, op, copy=True)
            return self.client.reduce(self._in_region(x), op)
        return self._run("reduce", len(x), call)

    def compact(self, x: npt.NDArray[Any], mask: Optional[npt.NDArray[Any]], predicate: Any, indices: bool) -> Any:
        """The block's kept values, or (values, indices), on the worker's server."""
        def call(shared: bool) -> Any:
            if not shared:
                return self.client.compact(x, where=mask, predicate=predicate, indices=indices, copy=True)
            ms = None if mask is None else self._in_region(mask != 0, np.uint8)
            out = self.client.compact(self._in_region(x), where=ms, predicate=predicate, indices=indices)
            return out  # views [:kept] of arena pieces, which go back when dask lets go of them
        return self._run("compact", len(x), call)

    def histogram(self, x: npt.NDArray[Any], spec: Any) -> npt.NDArray[Any]:
        """The block's histogram counts on the worker's server (spec: histogram_spec's first item)."""
        def call(shared: bool) -> npt.NDArray[Any]:  # streamed: the server has no shared-memory histogram
            if spec[0] == "even":
                return self.client.histogram(x, spec[1], range=spec[2], copy=True).counts
            return self.client.histogram(x, spec[1], copy=True).counts
        return self._run("histogram", len(x), call, can_share=False)

    def segmented_scan(self, x: npt.NDArray[Any], keys: npt.NDArray[Any], op: str, exclusive: bool
                       ) -> npt.NDArray[Any]:
        """The block's segmented scan on the worker's server."""
        def call(shared: bool) -> npt.NDArray[Any]:  # streamed: no shared memory for segmented scans
            return cast(npt.NDArray[Any], self.client.segmented_scan(x, keys, op=op, exclusive=exclusive, copy=True))
        return self._run("segmented_scan", len(x), call, can_share=False)

    def sort(self, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The block sorted on the worker's server."""
        def call(shared: bool) -> npt.NDArray[Any]:  # streamed: no shared memory for sorts
            return cast(npt.NDArray[Any], self.client.sort(x, copy=True))
        return self._run("sort", len(x), call, can_share=False)


def plugin() -> GpuscanPlugin:
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
    return cast(GpuscanPlugin, p)
