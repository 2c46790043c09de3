"""The shared-memory transport (header field 20; see shared.py): a call whose input lies in an open
region sends its header alone and the server reads and writes the regions itself; lanes and
retries do not apply. place_*: an operation's regions (None: the input is not shared, stream it);
run: the call. The device transport (_t_device) runs its calls here too, once exported."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _native, shared
from ._effects import NATIVE_RESPONSE_BYTES, HeaderOnly

# The C API's number of each RPC a header-only call may be.
RPCS = {"Scan": _native.RPC_SCAN, "Reduce": _native.RPC_REDUCE, "Compact": _native.RPC_COMPACT,
        "Histogram": _native.RPC_HISTOGRAM, "Sort": _native.RPC_SORT, "SegmentedScan": _native.RPC_SEGMENTED_SCAN}


def place_scan(x, request, out) -> Optional[shared.Call]:
    """Scan: into out when it is shared (in place when it is x itself); into a new region next
    to x's when out is None (returned); into a temporary region copied into out when out is a
    plain array."""
    src = shared.place(x)
    if src is None:
        return None
    call = shared.Call(request, src, len(x), x.dtype)
    dst = shared.place(out) if out is not None else None
    if out is None:
        call.result, dst = call.region(len(x), x.dtype.newbyteorder("="))
    else:
        call.result = out
        if dst is None:
            tmp, dst = call.region(len(x), x.dtype.newbyteorder("="), temporary=True)
            call.copy_back = (tmp, out)
    if not dst.same_as(src):  # else in place: output_region stays empty
        call.sm.output_region, call.sm.output_offset = dst.name, dst.offset
    return call


def place_reduce(x, request) -> Optional[shared.Call]:
    src = shared.place(x)
    return None if src is None else shared.Call(request, src, len(x), x.dtype)


def place_compact(x, where, flags, request, want_values, want_indices) -> Optional[shared.Call]:
    """Compact: kept values and indices into new regions of capacity len(x) next to x's
    (sparse: only the kept part takes memory), returned as views [:kept]; a where= mask that
    lies in a region (bool, int8 or uint8: nonzero keeps) is read there, any other is copied
    (as `flags`, from _checks.compact_args) into a temporary region."""
    src = shared.place(x)
    if src is None:
        return None
    n = len(x)
    call = shared.Call(request, src, n, x.dtype)
    if want_values:
        call.values, dst = call.region(n, x.dtype.newbyteorder("="), reserve=False)
        call.sm.output_region, call.sm.output_offset = dst.name, dst.offset
    if want_indices:
        call.indices, dst = call.region(n, np.int64, reserve=False)
        call.sm.indices_region, call.sm.indices_offset = dst.name, dst.offset
    if request.header.use_flags:
        mask = np.asarray(where)
        at = shared.place(mask) if mask.dtype.itemsize == 1 and mask.dtype.kind in "biu" else None
        if at is None:
            tmp, at = call.region(n, np.uint8, temporary=True)
            tmp[:] = flags
        call.sm.flags_region, call.sm.flags_offset = at.name, at.offset
    return call


def exchange(p, call, interruptible: bool = True, room: int = NATIVE_RESPONSE_BYTES):
    """p's header-only call (shared.Call or _device.Call), inside its `with`: (result, Timing)."""
    collector = p.header_only(call)
    yield HeaderOnly(RPCS[p.method], p.method, call.serialized()[0], p.timeout, collector.feed, interruptible, room)
    return collector.finish()


def run(c, p):
    """Never retried: an in-place scan may have written over its input. A failure closes the
    call's new regions."""
    with p.shared as call:
        return (yield from exchange(p, call))
