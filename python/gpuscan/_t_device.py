"""The device-memory transport (CUDA IPC; see _device): the call's arrays are exported for the
server's devices (its ServerInfo, asked once it serves device memory), then the call sends its
header alone, as a shared-memory one (_t_shared). Not retried."""
from __future__ import annotations

from . import _native, _t_shared
from ._effects import NATIVE_RESPONSE_BYTES, HeaderOnly, Info


def server_info(c, timeout):
    """The server's ServerInfo (the message: its devices' UUIDs), kept once it serves device memory."""
    info = c._device_server
    if info is None:
        info = yield Info(timeout, message=True)
        if info.limits.device_ipc:
            c._device_server = info
    return info


def run(c, p):
    """Through the C API a device call runs on the caller's thread (not interruptible: it ends in
    milliseconds, sparing a thread). A histogram with range=None first finds x's min and max by
    two reductions where x lies."""
    call = p.device
    call.export((yield from server_info(c, p.timeout)), c.target)
    with call:
        if call.needs_range:
            raws = []
            for request in call.range_requests():
                yield HeaderOnly(_native.RPC_REDUCE, "Reduce", request, p.timeout, lambda lane, raw: raws.append(raw),
                                 interruptible=False)
            call.set_range(*raws)
        return (yield from _t_shared.exchange(p, call, interruptible=False,
                                              room=max(NATIVE_RESPONSE_BYTES, call.response_bytes())))
