"""The native transport: the call through the C++ client (its C API, _native), outside the GIL,
where it serves the call as the client is configured. Client only (AsyncClient has no native path)."""
from __future__ import annotations

import numpy as np

from . import _chunking, _t_lanes
from ._effects import Native


def takes(c, p) -> bool:
    """The native path serves p: it is on, p has a native form, keeps the client's retries with no
    on_retry to call back (the handle's), and a scan is not in place. p's timeout goes with the
    call (NativeClient.timed)."""
    return (c._native is not None and p.native is not None and p.retries == c.retries and c.on_retry is None and
            (p.out is None or not np.may_share_memory(p.x, p.out)))


def lanes(c, p):
    """As the grpcio path's: one call where the server does not join lanes (max_lanes 0, an older
    server; the C++ client would refuse it), else the wanted count, which the C++ client caps."""
    if not p.native_lanes:
        return 1
    wanted = c._wanted_lanes(p.lanes)
    if wanted <= 1:
        return wanted
    per = _chunking.chunk_elements(c.chunk_bytes, p.x.itemsize)
    return (yield from _t_lanes.usable(c, p.lanes, p.x.size, per, c.timeout))


def run(c, p):
    k = yield from lanes(c, p)
    return (yield Native(lambda native: p.native(native.timed(p.timeout), k)))
