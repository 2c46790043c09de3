"""Registration, on the driver: installs the worker plugin on a dask cluster, removes it, and
reports what each worker's plugin did."""
from __future__ import annotations

from typing import Any, Dict, Optional, cast

import distributed

from .. import shared as _shared
from ..client import Client
from . import _driver
from ._targets import Targets, check_targets, multi_address
from ._worker import PLUGIN_NAME, GpuscanPlugin


def register(dask_client: Any = None, targets: Optional[Targets] = None, *, shared_memory: Optional[bool] = None,
             shm_mode: int = _shared.DEFAULT_MODE, **client_options: Any) -> Dict[str, str]:
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
    targets = check_targets(targets)
    if shared_memory not in (None, True, False):
        raise TypeError(f"gpuscan.dask.register: shared_memory must be None, True or False, got {shared_memory!r}")
    for t in ([targets] if isinstance(targets, str) else targets if isinstance(targets, list) else []):
        opts = dict(client_options)
        if multi_address(t):
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
    _driver.remember(dask_client, client_options)  # PersistedArray.reduce calls the servers from here
    return {addr: info["target"] for addr, info in worker_info(dask_client).items() if info}


def unregister(dask_client: Any = None) -> None:
    """Removes the plugin from every worker (its clients are closed)."""
    if dask_client is None:
        dask_client = distributed.get_client()
    dask_client.unregister_worker_plugin(PLUGIN_NAME)
    _driver.forget(dask_client)


def _describe(dask_worker: Any) -> Optional[Dict[str, Any]]:
    p = dask_worker.plugins.get(PLUGIN_NAME)
    return cast(Optional[Dict[str, Any]], p.describe() if p is not None else None)


def worker_info(dask_client: Any = None) -> Dict[str, Optional[Dict[str, Any]]]:
    """{worker address: {"target", "shared_memory" (True, False, or None before a call decided it),
    "shared_memory_reason", "data_path", "calls", "shared_calls", "elements"}} (None for a worker
    without the plugin)."""
    if dask_client is None:
        dask_client = distributed.get_client()
    return cast(Dict[str, Optional[Dict[str, Any]]], dask_client.run(_describe))
