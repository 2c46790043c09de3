"""Targets: which gpuscan server each dask worker calls (register's `targets`)."""
from __future__ import annotations

import numbers
import zlib
from typing import Any, Callable, Dict, Sequence, Union, cast

from distributed.comm import get_address_host

Targets = Union[str, Sequence[str], Callable[[str], str]]


def multi_address(target: str) -> bool:
    """A target naming several servers (ipv4:a,b / ipv6:[a],[b]), or a dns: name, which may resolve to
    several."""
    return "," in target or target.startswith("dns:")


def _worker_index(name: Any, address: str, assigned: Dict[str, int]) -> int:
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


def pick_target(targets: Targets, name: Any, address: str, assigned: Dict[str, int]) -> str:
    """The target of the worker named `name` at `address` (see register's targets)."""
    if isinstance(targets, str):
        return targets
    if callable(targets):
        target = targets(get_address_host(address))
        if not isinstance(target, str) or not target:
            raise ValueError(f"gpuscan.dask: targets({get_address_host(address)!r}) returned "
                             f"{target!r}, not a target string")
        return target
    return targets[_worker_index(name, address, assigned) % len(targets)]


def check_targets(targets: Any) -> Targets:
    """targets checked (a list of strings copied), else ValueError or TypeError."""
    if isinstance(targets, str):
        if not targets:
            raise ValueError("gpuscan.dask.register: targets is empty")
        return targets
    if callable(targets):
        return cast(Callable[[str], str], targets)
    if isinstance(targets, (list, tuple)) and targets and all(isinstance(t, str) and t for t in targets):
        return list(targets)
    raise TypeError("gpuscan.dask.register: targets must be a target string (e.g. one multi-address "
                    "'ipv4:10.0.0.5:50051,10.0.0.6:50051'), a non-empty list of target strings (worker i -> "
                    f"targets[i % len(targets)]) or a function of the worker's host; got {targets!r}")
