"""The operations on resident inputs (Resident in gpuscan.proto): each op's request built once for
both clients, as _ops's Prepared, naming its inputs by id (header.resident) so no data crosses the
wire. A call's inputs are all RemoteArrays or none (inputs() says which, TypeError on a mix); with
keep=True the results stay on the server and come back as new RemoteArrays, in the shape the call
returns without keep. A call that keeps is not retried: a try whose answer was lost may have kept
its results, and a retry would keep them twice (as put). _ops calls in here when inputs() says so."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _checks, _chunking, _ops, _resident, _t_shared, _types, _wire
from ._resident import RemoteArray
from ._types import Timing
from .errors import Internal
from .v1 import gpuscan_pb2 as pb


# -- the checks every call on resident inputs shares
def inputs(op: str, **arrays) -> bool:
    """True when the given (not None) inputs are all RemoteArrays, False when none is; a mix is a
    TypeError naming both (never a silent upload or fetch)."""
    given = {k: a for k, a in arrays.items() if a is not None}
    remote = [k for k, a in given.items() if isinstance(a, RemoteArray)]
    host = [k for k in given if k not in remote]
    if remote and host:
        raise TypeError(f"gpuscan: {op}: {remote[0]} is a RemoteArray but {host[0]} is not: a call's inputs are all "
                        f"RemoteArrays or none (c.put({host[0]}) first, or pass {remote[0]}.get())")
    return bool(remote)


def no_keep(op: str, keep, ttl, label) -> None:
    """keep=, ttl= and label= of a call whose inputs are not resident: ValueError."""
    if keep or ttl is not None or label is not None:
        raise ValueError(f"gpuscan: {op}: keep=, ttl= and label= take RemoteArray inputs (c.put(x) first): the "
                         "server keeps no streamed input's result")


def _keep(resident: "pb.Resident", keep, ttl, label, out=None) -> bool:
    """Sets resident's keep, ttl_ms and label; ValueError for ttl=/label= without keep, or keep with out=."""
    if keep:
        if out is not None:
            raise ValueError("gpuscan: out= and keep=True: a kept result stays on the server")
        resident.keep = True
        resident.ttl_ms = _resident.ttl_ms(ttl)
        resident.label = _resident.check_label(label)
    elif ttl is not None or label is not None:
        raise ValueError("gpuscan: ttl= and label= describe a kept result: they need keep=True")
    return bool(keep)


def _same_length(op: str, x: RemoteArray, **others) -> None:
    for name, a in others.items():
        if a is not None and a.size != x.size:
            raise ValueError(f"gpuscan: {op}: {name} has {a.size} elements but x has {x.size}: they must match")


def _one_byte(op: str, name: str, a: RemoteArray) -> None:
    """A resident flags/heads array: one byte an element (bool arrays are kept as uint8)."""
    if a.dtype.itemsize != 1 or a.dtype.kind not in "iub":
        raise ValueError(f"gpuscan: {op}: {name} must be a resident uint8 or int8 array (a byte an element), "
                         f"got {a.dtype}")


def accumulation(r: RemoteArray, dtype) -> Tuple[int, Optional[int], np.dtype]:
    """(the array's wire dtype, the header's output_dtype or None, the result's dtype): a narrow
    array's as a streamed one's (numpy's defaults; the server widens it), a wide one's its own
    (another dtype= would need a conversion the server does not do)."""
    wire = _types.wire_dtype(r.dtype, narrow=True)
    if _types.narrow_wire(np.empty(0, r.dtype)) is not None:
        _, output, result = _types.accumulation(np.empty(0, r.dtype), dtype, "the resident array")
        return wire, output, result
    if dtype is not None and np.dtype(dtype).newbyteorder("=") != r.dtype:
        raise ValueError(f"gpuscan: dtype={np.dtype(dtype)} for a resident array of {r.dtype}: the server computes "
                         "it in its own dtype (put a converted copy instead)")
    return wire, None, r.dtype


def _prepared(c, method: str, request, r: RemoteArray, data_field: int, retries, timeout, keep: bool,
              **kw) -> "_ops.Prepared":
    """The call: its header alone (an empty x, one request), on one call (no lanes); a reduce or a
    kept result, answered by one message, as a header-only call (see _t_stream)."""
    retries, timeout = c._call_options(retries, timeout)
    return _ops.Prepared(method, np.empty(0, r.dtype), request, 0 if keep else retries, timeout, data_field, per=1,
                         one_answer=(keep or method == "Reduce") and method in _t_shared.RPCS, **kw)


# -- kept results: the final response's ArrayInfo fields as RemoteArrays
def _kept(c, response, fields: Tuple[str, ...], shape=None) -> "_ops.Collector":
    """A keeping call's responses (no data): the final one's `fields` (ArrayInfos; None where the
    call kept no such array) and Timing."""
    got: dict = {}

    def feed(lane: int, raw: bytes) -> None:
        m = response.FromString(raw)
        for f in fields + ("timing",):
            if m.HasField(f):
                got[f] = getattr(m, f)
        if any(getattr(m, d, b"") for d in ("data", "values", "indices", "keys")):
            raise Internal(f"the server sent results of a {response.__name__[:-8]} with keep=True")

    def finish():
        if not any(f in got for f in fields):
            raise Internal(f"the server's last response to a call with keep=True named no kept array "
                           f"({response.__name__}.{'/'.join(fields)})")
        timing = Timing.from_proto(got["timing"]) if "timing" in got else Timing()
        arrays = tuple(RemoteArray(c, got[f], shape) if f in got else None for f in fields)
        return (arrays[0] if len(fields) == 1 else arrays), timing
    return _ops.Collector(feed, finish)


# -- the operations
def scan(c, r, op, exclusive, algorithm, out, axis, dtype, retries, timeout, keep, ttl, label,
         carry=None) -> "_ops.Prepared":
    """header.resident.values = r.id: the result streams back into .out, or with keep stays on the
    server (a new RemoteArray); carry= as a streamed scan's. axis 0 or 1: the scan along it of r's
    matrix (r.reshape)."""
    if axis is not None:
        _checks.no_carry(carry)
        return scan2d(c, r, op, out, retries, timeout, axis, exclusive, dtype, keep, ttl, label)
    if r.ndim != 1:
        raise ValueError("gpuscan: scan of a matrix RemoteArray scans along axis= 0 or 1 (r.reshape(-1): flat)")
    wire, output, result = accumulation(r, dtype)
    header = _checks.scan_header(wire, op, exclusive, algorithm, r.size)
    if output is not None:
        header.output_dtype = output
    _checks.set_carry(header, carry, result)
    header.resident.values = r.id
    keep = _keep(header.resident, keep, ttl, label, out)
    return _scanned(c, _prepared(c, "Scan", pb.ScanRequest(header=header), r, _wire.SCAN_DATA, retries, timeout, keep),
                    r, out, result, keep)


def _scanned(c, p: "_ops.Prepared", r: RemoteArray, out, result: np.dtype, keep: bool,
             shape=None) -> "_ops.Prepared":
    """A scan-like call's results (Scan, SegmentedScan, Scan2D): into out (new if None; 1-D, of the
    result dtype), or kept: ScanResponse.array as a RemoteArray (of `shape`)."""
    if keep:
        p.collect = lambda p, k: _kept(c, pb.ScanResponse, ("array",), shape)
    else:
        p.out = _checks.narrow_out(np.empty(r.size, r.dtype), out, result)
        p.collect = _ops._scanned
    return p


def reduce(c, r, op, dtype, retries, timeout) -> "_ops.Prepared":
    """header.resident.values = r.id: the value as a streamed reduce's (nothing to keep)."""
    wire, output, result = accumulation(r, dtype)
    request = _checks.reduce_request(wire, op, r.size)
    if output is not None:
        request.header.output_dtype = output
    request.header.resident.values = r.id
    return _prepared(c, "Reduce", request, r, _wire.REDUCE_DATA, retries, timeout, False, result_dtype=result,
                     collect=_ops._reduced)


def histogram(c, r, bins, range_, retries, timeout) -> "_ops.Prepared":
    """numpy's bins over range_ or explicit edges; range=None would need a pass over r here."""
    if np.ndim(bins) == 0 and range_ is None and r.size > 0:
        raise ValueError("gpuscan: histogram of a RemoteArray needs range=(lo, hi) or explicit edges (its min and "
                         "max: range=(c.reduce(r, 'min'), c.reduce(r, 'max')))")
    header = _types.histogram_header(np.empty(0, r.dtype), _types.wire_dtype(r.dtype, narrow=True), bins, range_)
    header.element_count = r.size
    header.resident.values = r.id
    return _prepared(c, "Histogram", pb.HistogramRequest(header=header), r, _wire.HISTOGRAM_DATA, retries, timeout,
                     False, collect=_ops._histogrammed)


def compact(c, r, where, predicate, indices, values, retries, timeout, keep, ttl, label) -> "_ops.Prepared":
    """where= a resident mask (uint8/int8), or a predicate; the kept values and indices (or with
    keep their RemoteArrays) in compact's shape."""
    header = _checks.compact_header(_types.wire_dtype(r.dtype, narrow=True), r.dtype, r.size, where, predicate,
                                    indices, values)
    header.resident.values = r.id
    if where is not None:
        _one_byte("compact", "where", where)
        _same_length("compact", r, where=where)
        header.resident.flags = where.id
    keep = _keep(header.resident, keep, ttl, label)
    p = _prepared(c, "Compact", pb.CompactRequest(header=header), r, _wire.COMPACT_VALUES, retries, timeout, keep)
    if not keep:
        p.collect = _ops.compacted(values, indices)
        return p
    p.collect = lambda p, k: _kept(c, pb.CompactResponse, ("values_array", "indices_array"))
    p.returns = lambda kept: _checks.compact_outputs(kept[0], kept[1], values, indices)
    return p


def segmented_scan(c, r, keys, heads, op, exclusive, out, retries, timeout, dtype, keep, ttl,
                   label) -> "_ops.Prepared":
    """Segments by resident keys (an integer array) or heads (uint8/int8: nonzero begins one)."""
    _checks.one_segmentation(keys, heads)
    wire, output, result = accumulation(r, dtype)
    header = pb.SegmentedScanHeader(dtype=wire, op=_types.operator(op, output or wire),
                                    kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                                    element_count=r.size)
    if output is not None:
        header.output_dtype = output
    header.resident.values = r.id
    if keys is not None:
        header.key_dtype = _key_wire("segmented_scan", keys)
        header.resident.keys = keys.id
    else:
        _one_byte("segmented_scan", "heads", heads)
        header.heads = True
        header.resident.flags = heads.id
    _same_length("segmented_scan", r, keys=keys, heads=heads)
    keep = _keep(header.resident, keep, ttl, label, out)
    p = _prepared(c, "SegmentedScan", pb.SegmentedScanRequest(header=header), r, _wire.SEGMENTED_DATA, retries,
                  timeout, keep)
    return _scanned(c, p, r, out, result, keep)


def _key_wire(op: str, keys: RemoteArray) -> int:
    """Resident keys of 4 or 8 bytes: a streamed call widens narrower ones here, which a resident
    array cannot be (the server refuses them too)."""
    if keys.dtype.kind not in "iu" or keys.dtype.itemsize < 4:
        raise ValueError(f"gpuscan: {op}: keys must be a resident int32, int64, uint32 or uint64 array, got "
                         f"{keys.dtype} (put keys.astype(np.int32) instead)")
    return _types.wire_dtype(keys.dtype)


def scan2d(c, r, op, out, retries, timeout, axis: Optional[int], exclusive, dtype, keep, ttl,
           label) -> "_ops.Prepared":
    """r a matrix handle (r.reshape(rows, cols)): the 2-D scan, or along axis 0 or 1. Kept: a
    RemoteArray of the same shape."""
    what = "scan2d" if axis is None else "scan along an axis"
    if r.ndim != 2:
        raise ValueError(f"gpuscan: {what} of a RemoteArray needs its matrix shape: pass r.reshape(rows, cols)")
    rows, cols = r.shape
    if cols == 0:
        raise ValueError(f"gpuscan: {what} needs at least one column, got shape {r.shape}")
    wire, output, result = accumulation(r, dtype)
    header = pb.Scan2DHeader(dtype=wire, op=_types.operator(op, output or wire), cols=cols, rows=rows)
    if output is not None:
        header.output_dtype = output
    if axis is not None:
        header.axis = pb.SCAN_AXIS_COLUMNS if axis == 0 else pb.SCAN_AXIS_ROWS
        header.kind = pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE
    header.resident.values = r.id
    keep = _keep(header.resident, keep, ttl, label, out)
    p = _prepared(c, "Scan2D", pb.Scan2DRequest(header=header), r, _wire.SCAN2D_DATA, retries, timeout, keep,
                  needs=None if axis is None else "scan_axis")
    if not keep:  # the 2-D out, whose flat view the results land in
        if out is None:
            out = np.empty(r.shape, result)
        elif not isinstance(out, np.ndarray) or out.shape != r.shape or not out.flags.c_contiguous:
            raise ValueError(f"gpuscan: out must be a writable contiguous {result} array of shape {r.shape}")
        p.result = out
    return _scanned(c, p, r, None if out is None else out.reshape(-1), result, keep, (rows, cols))


def reduce_by_key(c, r, keys, op, retries, timeout, dtype, keep, ttl, label) -> "_ops.Prepared":
    """(unique keys, values) of the runs, or with keep their RemoteArrays."""
    if keys is None:
        raise ValueError("gpuscan: reduce_by_key needs keys (a resident integer array of len(x))")
    wire, output, result = accumulation(r, dtype)
    header = pb.ReduceByKeyHeader(dtype=wire, op=_types.operator(op, output or wire), element_count=r.size,
                                  key_dtype=_key_wire("reduce_by_key", keys))
    if output is not None:
        header.output_dtype = output
    _same_length("reduce_by_key", r, keys=keys)
    header.resident.values, header.resident.keys = r.id, keys.id
    keep = _keep(header.resident, keep, ttl, label)
    p = _prepared(c, "ReduceByKey", pb.ReduceByKeyRequest(header=header), r, _wire.REDUCE_BY_KEY_DATA, retries,
                  timeout, keep, result_dtype=result)
    if keep:
        p.collect = lambda p, k: _kept(c, pb.ReduceByKeyResponse, ("keys_array", "values_array"))
    else:
        p.collect = lambda p, k: _ops._assembled(_chunking.ReduceByKeyAssembler(keys.dtype, result,
                                                                                r.size))
    return p


def sort(c, r, values, descending, output: int, retries, timeout, keep, ttl, label) -> "_ops.Prepared":
    """Sort's result (keys, values, indices), None where not asked; with keep their RemoteArrays
    (the caller's p.returns picks what sort or argsort returns)."""
    _checks.check_descending(descending)
    header = pb.SortHeader(dtype=_types.wire_dtype(r.dtype, narrow=True), descending=bool(descending), output=output,
                           element_count=r.size)
    header.resident.values = r.id
    if values is not None:
        _same_length("sort", r, values=values)
        header.values_dtype = _types.wire_dtype(values.dtype, narrow=True)
        header.output = pb.SORT_OUTPUT_KEYS_AND_VALUES
        header.resident.sort_values = values.id
    keep = _keep(header.resident, keep, ttl, label)
    p = _prepared(c, "Sort", pb.SortRequest(header=header), r, _wire.SORT_KEYS, retries, timeout, keep)
    if keep:
        p.collect = lambda p, k: _kept(c, pb.SortResponse, ("keys_array", "values_array", "indices_array"))
    else:
        p.collect = lambda p, k: _ops._assembled(_chunking.SortAssembler(
            r.dtype, values.dtype if values is not None else None, header.output, header.descending, r.size))
    return p

