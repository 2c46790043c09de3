"""Calls from the dask client's own process (the driver) straight to the servers that keep persisted
blocks, without a task: register() remembers its client options here, and a PersistedArray's
reduce() opens clients of the blocks' servers with them. Why: a task costs dask's scheduler round
trip, which was most of a persisted sum's time (one task: 0.064 s for 64 blocks of 128 MiB on an
H200, where the servers' reductions take ~3 ms)."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Set, TypeVar

from ..client import Client
from ..errors import Error

_T = TypeVar("_T")

_lock = threading.Lock()
_options: Dict[str, Dict[str, Any]] = {}  # register()'s client options, by the dask client's id
_servers: Dict[str, "DriverServers"] = {}  # the driver's clients, by the dask client's id


class DriverServers:
    """The driver's clients of the servers that keep blocks (one a server, opened at first use with
    register()'s options), with GpuscanPlugin's on_server: the blocks' calls take either. A server
    this process cannot reach is remembered (unreachable), so later calls go to a task at once."""

    def __init__(self, client_options: Dict[str, Any]) -> None:
        self.client_options = dict(client_options)
        self.worker_address = "the dask client's process"
        self.unreachable: Set[str] = set()
        self._clients: Dict[str, Client] = {}
        self._lock = threading.Lock()

    def client_for(self, target: str) -> Client:
        with self._lock:
            c = self._clients.get(target)
            if c is None:
                c = self._clients[target] = Client(target, **self.client_options)
            return c

    def on_server(self, target: str, what: str, n: int, call: Callable[[Client], _T]) -> _T:
        """call(target's client); a gpuscan.Error comes back as the same class and code, its message
        naming the server and this process (as on a worker)."""
        try:
            return call(self.client_for(target))
        except Error as e:
            raise type(e)(f"gpuscan server {target} ({self.worker_address}, {what}): {e.message}", e.code) from None

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()


def remember(dask_client: Any, client_options: Dict[str, Any]) -> None:
    """register()'s options for this dask client; the clients opened with earlier ones are closed."""
    with _lock:
        _options[dask_client.id] = dict(client_options)
        old = _servers.pop(dask_client.id, None)
    if old is not None:
        old.close()


def forget(dask_client: Any) -> None:
    """unregister(): no more direct calls for this dask client."""
    with _lock:
        _options.pop(dask_client.id, None)
        old = _servers.pop(dask_client.id, None)
    if old is not None:
        old.close()


def servers(dask_client: Any) -> Optional[DriverServers]:
    """This process's clients for the servers of dask_client's workers, or None when register() ran
    in another process (its options are not known here)."""
    with _lock:
        opts = _options.get(dask_client.id)
        if opts is None:
            return None
        s = _servers.get(dask_client.id)
        if s is None:
            s = _servers[dask_client.id] = DriverServers(opts)
        return s
