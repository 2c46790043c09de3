"""The request model: each data operation (scan, scan along an axis, scan2d, segmented_scan,
reduce, histogram, compact, reduce_by_key, sort, argsort; on resident inputs: _resident_ops)
checked and built once, for both clients,
as a Prepared call: its requests, how a try's responses become its result, and which transports
may run it (see _transport, which picks one). Every check runs here, before any call."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Iterator, Optional, Tuple

import numpy as np

from . import _chunking, _checks, _device, _resident, _resident_ops, _t_shared, _types, _wire
from . import shared as _shared
from ._effects import Feed
from ._types import Timing, check_array
from .errors import Internal
from .v1 import gpuscan_pb2 as pb


@dataclasses.dataclass
class Collector:
    """One try's (or one header-only call's) responses: feed(lane, raw) each, then finish() ->
    (the call's result, its Timing)."""
    feed: Feed
    finish: Callable[[], Tuple[Any, Timing]]


@dataclasses.dataclass
class Prepared:
    """One data call's checked arguments and first request (its header)."""
    method: str                         # the RPC: "Scan", "Reduce", "Compact", ...
    x: Any                              # the input, 1-D (scan2d: the matrix flattened; device: the caller's)
    request: Any                        # the first request (its header)
    retries: int                        # retries of the grpcio path (0 where a retry could not replay)
    timeout: Optional[float]            # this call's deadline in seconds (None: none)
    data_field: int                     # the requests' data field (_wire)
    per: int = 0                        # elements per request
    side: Optional[np.ndarray] = None   # compact's flags, the keys or heads, the values: beside x's chunks
    side_field: int = _wire.COMPACT_FLAGS
    out: Optional[np.ndarray] = None    # a scan's output (1-D)
    result: Any = None                  # what the call returns when not `out` (scan2d: the 2-D out)
    shared: Optional[_shared.Call] = None  # x lies in shared memory: this call, nothing streamed
    device: Optional[_device.Call] = None  # x lies in device memory: this call, nothing streamed
    narrow: bool = False                # x travels narrow (1-2 bytes an element): one stream, no lanes
    result_dtype: Optional[np.dtype] = None  # reduce's value, reduce_by_key's runs' values (a narrow x's accumulator)
    lanes: Any = 1                      # the call's lanes= (None: the client's), where striped
    striped: bool = False               # lanes apply: the array may be striped over several calls
    needs: Optional[str] = None         # an info()["operations"] entry the server must list first
    # The native path, where it serves the call: native(NativeClient, lanes) -> (result, Timing);
    # native_lanes: it stripes (lanes as the grpcio path's), else it gets 1.
    native: Optional[Callable[[Any, int], Tuple[Any, Timing]]] = None
    native_lanes: bool = False
    collect: Optional[Callable[["Prepared", int], Collector]] = None  # a streamed try's, over k lanes
    header_only: Optional[Callable[[Any], Collector]] = None  # the shared or device call's
    # A resident call answered by one message (a reduce, a kept result): its header sent as a
    # HeaderOnly effect (the C API's header call where the client has it), retried as a stream.
    one_answer: bool = False
    returns: Callable[[Any], Any] = lambda result: result  # the result as the method returns it

    def requests(self) -> Iterator[bytes]:
        """The whole array's serialized requests, for one call."""
        return _chunking.data_requests(self.request, self.data_field, self.x, self.per, self.side,
                                       flags_field=self.side_field)

    def lane_requests(self, k: int) -> tuple:
        """(each lane's request iterator, the lanes' call metadata) for the array striped over k
        lanes: the first request with the lanes header (a fresh random array id), then chunks lane,
        lane + k, ...; the metadata carries the same id for a balancer to hash on."""
        array_id = os.urandom(16)
        n = len(self.x)
        return [_chunking.data_requests(_chunking.lane_header(self.request, array_id, lane, k, self.per),
                                        self.data_field, self.x, self.per, self.side,
                                        ranges=_chunking.lane_chunks(n, self.per, lane, k))
                for lane in range(k)], _chunking.array_id_metadata(array_id)


# -- how responses become results: streamed tries (collect) and header-only calls (header_only)
def _scanned(p: Prepared, k: int) -> Collector:
    """Results land in p.out by offset, whichever lane brings them."""
    asm = _chunking.ScanAssembler(p.out, (p.per, k) if k > 1 else None)
    return Collector(lambda lane, raw: asm.feed(raw, lane),
                     lambda: (p.out if p.result is None else p.result, asm.finish()))


def _reduced(p: Prepared, k: int) -> Collector:
    raws = [b""] * k

    def finish():
        value, _, timing = (reduce_lanes_result(raws, p.result_dtype, len(p.x)) if k > 1 else
                            _chunking.reduce_value(raws[0], p.result_dtype))
        return value, timing
    return Collector(raws.__setitem__, finish)


def reduce_lanes_result(raws, dtype: np.dtype, n: int):
    """Every lane answers the whole array's value: they must agree (a server that did not join
    the lanes would answer each lane's part)."""
    responses = [pb.ReduceResponse.FromString(r) for r in raws]
    first = responses[0]
    for lane, r in enumerate(responses):  # compared as bytes: a NaN equals itself
        if r.element_count != n or r.raw_value != first.raw_value or \
                r.value.SerializeToString() != first.value.SerializeToString():
            raise Internal(f"server's lane {lane} answered {r.element_count} elements reduced (of {n}) or a "
                           "value that differs from lane 0's: it did not join the lanes of this array")
    return _chunking.reduce_value(raws[0], dtype)


def _histogrammed(p: Prepared, k: int) -> Collector:
    raws = [b""]
    return Collector(raws.__setitem__, lambda: _chunking.histogram_result(raws[0]))


def _assembled(asm) -> Collector:
    """An assembler of the whole answer (reduce_by_key's, sort's): its result at the end."""
    return Collector(lambda lane, raw: asm.feed(raw), lambda: (asm.result(), asm.timing or Timing()))


def _header_scan(call) -> Collector:
    return Collector(lambda lane, raw: call.feed_scan(raw), lambda: (call.result, call.finish()))


def _header_sort(call) -> Collector:
    return Collector(lambda lane, raw: call.feed_sort(raw),
                     lambda: ((call.keys, call.sorted_values, call.indices), call.finish()))


def _header_reduce(call) -> Collector:
    raws = [b""]
    return Collector(raws.__setitem__, lambda: (call.reduce_value(raws[0]), call.timing))


def _header_histogram(call) -> Collector:
    raws = [b""]
    return Collector(raws.__setitem__, lambda: (call.histogram_value(raws[0]), call.timing))


def _on_device(c, method: str, call: _device.Call, data_field: int, retries, timeout,
               header_only: Callable[[Any], Collector]) -> Prepared:
    """A device-memory call (retries= checked, but such a call sends its header alone and is not
    retried, as a shared-memory one)."""
    _, timeout = c._call_options(retries, timeout)
    return Prepared(method, call.x.obj, call.request, 0, timeout, data_field, device=call, header_only=header_only)


# -- the operations
def scan(c, x, op, exclusive, algorithm, out, axis, dtype, copy, lanes, retries, timeout, keep=False, ttl=None,
         label=None, carry=None) -> Prepared:
    """_scan's call; with a carry, from a server that lists "scan_carry" only (an older one would
    ignore the field and answer the scan without it)."""
    p = _scan(c, x, op, exclusive, algorithm, out, axis, dtype, copy, lanes, retries, timeout, keep, ttl, label, carry)
    if carry is not None:
        p.needs = "scan_carry"
    return p


def _scan(c, x, op, exclusive, algorithm, out, axis, dtype, copy, lanes, retries, timeout, keep, ttl, label,
          carry) -> Prepared:
    """x a RemoteArray: _resident_ops; x a CUDA array: .device; x in shared memory: .shared (its
    result where out is None); a matrix with axis 0 or 1: the scan along it; a narrow x:
    narrow_call(); else streamed into .out. carry=: header.carry (_checks.carry_bytes), whose
    streamed call runs on one stream through the full header (never lanes)."""
    if isinstance(x, _resident.RemoteArray):
        _resident.refuse("scan", out=out)
        return _resident_ops.scan(c, x, op, exclusive, algorithm, out, axis, dtype, retries, timeout, keep, ttl, label,
                                  carry)
    _resident_ops.no_keep("scan", keep, ttl, label)
    _resident.refuse("scan", out=out)
    x, axis = _checks.scan_axis(x, axis, algorithm, copy)
    if axis is not None:
        _checks.no_carry(carry)
        return scan2d(c, x, op, out, copy, retries, timeout, axis, exclusive, dtype)
    if carry is not None and lanes is not None and c._wanted_lanes(lanes) > 1:
        raise ValueError(f"gpuscan: carry= runs the scan on one stream: lanes={lanes} does not apply")
    x, accumulate = _checks.with_dtype(x, dtype, copy)
    if accumulate is not None:
        return narrow_call(c, "Scan", x, accumulate, op, exclusive, algorithm, out, copy, retries, timeout, carry)
    src = _device.source(x, out=out)
    if src is not None:
        request = pb.ScanRequest(header=_checks.scan_header(_types.wire_dtype(src.dtype), op, exclusive, algorithm,
                                                            src.n))
        _checks.set_carry(request.header, carry, src.dtype)
        return _on_device(c, "Scan", _device.Call.scan(request, src, out), _wire.SCAN_DATA, retries, timeout,
                          _header_scan)
    x, request, out = _checks.scan_args(x, op, exclusive, algorithm, out, copy)
    carried = _checks.set_carry(request.header, carry, x.dtype)
    retries, timeout = c._call_options(retries, timeout)
    p = Prepared("Scan", x, request, retries, timeout, _wire.SCAN_DATA, shared=_t_shared.place_scan(x, request, out),
                 header_only=_header_scan)
    if p.shared is None:
        p.out = _checks.scan_out(x, out)
        p.per = _chunking.chunk_elements(c.chunk_bytes, x.itemsize)
        p.retries = _checks.scan_retries(x, p.out, retries)  # in place: not retried
        p.collect = _scanned
        h = request.header
        if carried:  # one stream; natively the C API's call of the whole header
            p.native = lambda nc, k: (p.out, nc.scan_header(p.x, p.out, h.SerializeToString()))
        else:
            p.lanes, p.striped, p.native_lanes = lanes, True, True
            p.native = lambda nc, k: (p.out, nc.scan(p.x, p.out, h.dtype, h.op, h.kind == pb.SCAN_KIND_EXCLUSIVE,
                                                     h.algorithm, k))
    return p


def narrow_call(c, method: str, x, accumulate, op, exclusive, algorithm, out, copy, retries, timeout,
                carry=None) -> Prepared:
    """A narrow x's Scan or Reduce: the header with output_dtype (and a scan's carry=, in the
    result dtype), out of the result dtype (new if None); each chunk small enough that its
    results fit chunk_bytes."""
    wire, result = accumulate
    x, narrow_wire = check_array(x, copy=copy, narrow=True)
    retries, timeout = c._call_options(retries, timeout)
    per = _chunking.chunk_elements(c.chunk_bytes, max(x.itemsize, result.itemsize))
    if method == "Reduce":
        request = _checks.reduce_request(narrow_wire, op, len(x))
        request.header.output_dtype = wire
        return Prepared("Reduce", x, request, retries, timeout, _wire.REDUCE_DATA, per=per, narrow=True,
                        result_dtype=result, collect=_reduced)
    header = _checks.scan_header(narrow_wire, op, exclusive, algorithm, len(x))
    header.output_dtype = wire
    _checks.set_carry(header, carry, result)
    out = _checks.narrow_out(x, out, result)
    p = Prepared("Scan", x, pb.ScanRequest(header=header), _checks.scan_retries(x, out, retries), timeout,
                 _wire.SCAN_DATA, per=per, out=out, narrow=True, collect=_scanned)
    p.native = lambda nc, k: (p.out, nc.scan_header(p.x, p.out, p.request.header.SerializeToString()))
    return p


def reduce(c, x, op, dtype, copy, lanes, retries, timeout) -> Prepared:
    if isinstance(x, _resident.RemoteArray):
        return _resident_ops.reduce(c, x, op, dtype, retries, timeout)
    x = _checks.flattened(x, "reduce", copy)  # N-D: the whole array, as np.sum(x) (axis=None)
    x, accumulate = _checks.with_dtype(x, dtype, copy)
    if accumulate is not None:
        return narrow_call(c, "Reduce", x, accumulate, op, False, None, None, copy, retries, timeout)
    src = _device.source(x)
    if src is not None:
        request = _checks.reduce_request(_types.wire_dtype(src.dtype), op, src.n)
        return _on_device(c, "Reduce", _device.Call(request, src), _wire.REDUCE_DATA, retries, timeout,
                          _header_reduce)
    x, wire = check_array(x, copy=copy)
    request = _checks.reduce_request(wire, op, len(x))
    retries, timeout = c._call_options(retries, timeout)
    p = Prepared("Reduce", x, request, retries, timeout, _wire.REDUCE_DATA, shared=_t_shared.place_reduce(x, request),
                 per=_chunking.chunk_elements(c.chunk_bytes, x.itemsize), result_dtype=x.dtype, lanes=lanes,
                 striped=True, collect=_reduced, native_lanes=True, header_only=_header_reduce)
    h = request.header
    p.native = lambda nc, k: nc.reduce(p.x, h.dtype, h.op, k)
    return p


def compact(c, x, where, predicate, indices, values, copy, lanes, retries, timeout, keep=False, ttl=None,
            label=None) -> Prepared:
    """Natively the kept values and indices are written at their kept offsets, so a retried try
    writes every position again."""
    def outputs(call) -> Collector:  # a header-only call's outputs: their first `kept`
        def finish():
            kept = call.kept
            return _checks.compact_outputs(call.values[:kept] if values else None,
                                           call.indices[:kept] if indices else None, values, indices), call.finish()
        return Collector(lambda lane, raw: call.feed_compact(raw), finish)

    if _resident_ops.inputs("compact", x=x, where=where):
        return _resident_ops.compact(c, x, where, predicate, indices, values, retries, timeout, keep, ttl, label)
    _resident_ops.no_keep("compact", keep, ttl, label)
    src = _device.source(x, where=where)
    if src is not None:
        header = _checks.compact_header(_types.wire_dtype(src.dtype), src.dtype, src.n, where, predicate, indices,
                                        values)
        return _on_device(c, "Compact", _device.Call.compact(pb.CompactRequest(header=header), src, where, values,
                                                             indices), _wire.COMPACT_VALUES, retries, timeout, outputs)
    x, where = _checks.flat_compact(x, where, copy)
    x, flags, request = _checks.compact_args(x, where, predicate, indices, values, copy)
    retries, timeout = c._call_options(retries, timeout)
    # A narrow x streams on one call: the server takes it in the stream only (a shared one too).
    is_narrow = _types.narrow_wire(x) is not None

    def native(nc, k):
        v, i, timing = nc.compact(x, request.header.SerializeToString(), flags, values, indices, k)
        return _checks.compact_outputs(v, i, values, indices), timing
    return Prepared("Compact", x, request, retries, timeout, _wire.COMPACT_VALUES, side=flags,
                    per=_chunking.chunk_elements(c.chunk_bytes, x.itemsize), narrow=is_narrow,
                    shared=None if is_narrow else _t_shared.place_compact(x, where, flags, request, values, indices),
                    lanes=1 if is_narrow else lanes, striped=not is_narrow, collect=compacted(values, indices),
                    native=native,
                    native_lanes=True, header_only=outputs)


def compacted(values, indices) -> Callable[[Prepared, int], Collector]:
    """A streamed compact's collect (a resident one's too): each lane's kept pieces placed by their
    kept_offset, returned as compact returns them."""
    def collect(p: Prepared, k: int) -> Collector:
        asm = _chunking.CompactAssembler(p.x.dtype)
        return Collector(lambda lane, raw: asm.feed(raw, lane),
                         lambda: (_checks.compact_outputs(*asm.result(values, indices), values, indices),
                                  asm.timing or Timing()))
    return collect


def histogram(c, x, bins, range_, copy, retries, timeout) -> Prepared:
    if isinstance(x, _resident.RemoteArray):
        return _resident_ops.histogram(c, x, bins, range_, retries, timeout)
    src = _device.source(x)
    if src is not None:
        # The header the host path sends for an array of x's dtype: with range=None (even bins
        # over x's min and max) the bins are checked here on a stand-in and the range is found
        # once x is exported (see _device.Call.set_range).
        find_range = np.ndim(bins) == 0 and range_ is None and src.n > 0
        header = _types.histogram_header(np.zeros(2 if find_range else 0, src.dtype), _types.wire_dtype(src.dtype),
                                         bins, range_)
        header.element_count = src.n
        call = _device.Call.histogram(pb.HistogramRequest(header=header), src, bins if find_range else None)
        return _on_device(c, "Histogram", call, _wire.HISTOGRAM_DATA, retries, timeout, _header_histogram)
    x, request = _checks.histogram_args(x, bins, range_, copy)
    retries, timeout = c._call_options(retries, timeout)
    return Prepared("Histogram", x, request, retries, timeout, _wire.HISTOGRAM_DATA,
                    per=_chunking.chunk_elements(c.chunk_bytes, x.itemsize), collect=_histogrammed)


def segmented_scan(c, x, keys, heads, op, exclusive, out, copy, retries, timeout, dtype=None, keep=False, ttl=None,
                   label=None) -> Prepared:
    """x a CUDA array (keys or heads and out too): .device; else streamed into .out (dtype=: as
    scan's; a narrow x travels narrow, out of the accumulator's dtype)."""
    _resident.refuse("segmented_scan", out=out)
    if _resident_ops.inputs("segmented_scan", x=x, keys=keys, heads=heads):
        return _resident_ops.segmented_scan(c, x, keys, heads, op, exclusive, out, retries, timeout, dtype, keep, ttl,
                                            label)
    _resident_ops.no_keep("segmented_scan", keep, ttl, label)
    x, accumulate = _checks.with_dtype(x, dtype, copy)
    src = _device.source(x, keys=keys, heads=heads, out=out)
    if src is not None:
        _checks.one_segmentation(keys, heads)
        wire = _types.wire_dtype(src.dtype)
        header = pb.SegmentedScanHeader(dtype=wire, op=_types.operator(op, wire),
                                        kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                                        element_count=src.n)
        return _on_device(c, "SegmentedScan", _device.Call.segmented(pb.SegmentedScanRequest(header=header), src,
                                                                     keys, heads, out),
                          _wire.SEGMENTED_DATA, retries, timeout, _header_scan)
    x, side, request, out = _checks.segmented_args(x, keys, heads, op, exclusive, out, copy, accumulate)
    retries, timeout = c._call_options(retries, timeout)
    out = _checks.scan_out(x, out)
    # Each chunk small enough that its results (a narrow x's: wider) fit chunk_bytes too.
    return Prepared("SegmentedScan", x, request, _checks.segmented_retries(x, side, out, retries), timeout,
                    _wire.SEGMENTED_DATA,
                    per=_chunking.chunk_elements(c.chunk_bytes, max(x.itemsize, side.itemsize, out.itemsize)),
                    side=side, side_field=_wire.SEGMENTED_KEYS, out=out, narrow=accumulate is not None,
                    collect=_scanned)


def scan2d(c, x, op, out, copy, retries, timeout, axis: Optional[int] = None, exclusive: bool = False,
           dtype=None, keep=False, ttl=None, label=None) -> Prepared:
    """.out: the flat view of .result, the 2-D out. axis 0 or 1: the scan along that axis
    (scan's axis=, from a server that lists "scan_axis"), else the 2-D scan. dtype=: as scan's (a
    narrow matrix travels narrow, out of the accumulator's dtype)."""
    _resident.refuse("scan2d" if axis is None else "scan along an axis", out=out)
    if isinstance(x, _resident.RemoteArray):
        return _resident_ops.scan2d(c, x, op, out, retries, timeout, axis, exclusive, dtype, keep, ttl, label)
    _resident_ops.no_keep("scan2d", keep, ttl, label)
    _device.refuse("scan2d" if axis is None else "scan along an axis", x=x, out=out)
    x, accumulate = _checks.with_dtype(x, dtype, copy)
    flat, out, out_flat, request = _checks.scan2d_args(x, op, out, copy, "scan2d" if axis is None else "scan",
                                                       accumulate)
    if axis is not None:
        request.header.axis = pb.SCAN_AXIS_COLUMNS if axis == 0 else pb.SCAN_AXIS_ROWS
        request.header.kind = pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE
    retries, timeout = c._call_options(retries, timeout)
    # Chunks of whole elements of x's dtype (narrow ones too), cut anywhere in a row: the
    # server re-cuts them into rows of cols x x.itemsize bytes. Each chunk small enough that
    # its results (a narrow matrix's are wider) fit chunk_bytes, plus the one row the server
    # may complete beyond it.
    per = _chunking.chunk_elements(c.chunk_bytes, max(flat.itemsize, out_flat.itemsize))
    return Prepared("Scan2D", flat, request, _checks.scan_retries(flat, out_flat, retries), timeout, _wire.SCAN2D_DATA,
                    per=per, out=out_flat, result=out, narrow=accumulate is not None, collect=_scanned,
                    needs=None if axis is None else "scan_axis")


def reduce_by_key(c, x, keys, op, copy, retries, timeout, dtype=None, keep=False, ttl=None, label=None) -> Prepared:
    """.result_dtype: the runs' values' (dtype=: as scan's)."""
    if _resident_ops.inputs("reduce_by_key", x=x, keys=keys):
        return _resident_ops.reduce_by_key(c, x, keys, op, retries, timeout, dtype, keep, ttl, label)
    _resident_ops.no_keep("reduce_by_key", keep, ttl, label)
    _device.refuse("reduce_by_key", x=x, keys=keys)
    x, accumulate = _checks.with_dtype(x, dtype, copy)
    x, side, request = _checks.reduce_by_key_args(x, keys, op, copy, accumulate)
    retries, timeout = c._call_options(retries, timeout)
    result = x.dtype.newbyteorder("=") if accumulate is None else accumulate[1]
    widest = max(x.itemsize, side.itemsize, result.itemsize)  # a narrow x's runs are wider
    return Prepared("ReduceByKey", x, request, retries, timeout, _wire.REDUCE_BY_KEY_DATA,
                    per=_chunking.chunk_elements(c.chunk_bytes, widest),
                    side=side, side_field=_wire.REDUCE_BY_KEY_KEYS, narrow=accumulate is not None,
                    result_dtype=result,
                    collect=lambda p, k: _assembled(_chunking.ReduceByKeyAssembler(p.side.dtype, p.result_dtype,
                                                                                   len(p.x))))


def sort_per(chunk_bytes: int, x, side) -> int:
    """Elements a sort request carries: keys and values of the same elements travel together."""
    return _chunking.chunk_elements(chunk_bytes, max(x.itemsize, side.itemsize if side is not None else 0))


def sort(c, x, values, descending, copy, retries, timeout, keep=False, ttl=None, label=None) -> Prepared:
    """The sorted keys, or (keys, values) with values=."""
    p = _sorted(c, x, values, descending, pb.SORT_OUTPUT_KEYS, copy, retries, timeout, keep, ttl, label)
    p.returns = (lambda r: r[0]) if values is None else (lambda r: (r[0], r[1]))
    return p


def argsort(c, x, descending, return_keys, copy, retries, timeout, keep=False, ttl=None, label=None) -> Prepared:
    """The permutation, or (keys, permutation) with return_keys=True."""
    output = pb.SORT_OUTPUT_KEYS_AND_INDICES if return_keys else pb.SORT_OUTPUT_INDICES
    p = _sorted(c, x, None, descending, output, copy, retries, timeout, keep, ttl, label)
    p.returns = (lambda r: (r[0], r[2])) if return_keys else (lambda r: r[2])
    return p


def _sorted(c, x, values, descending, output: int, copy, retries, timeout, keep, ttl, label) -> Prepared:
    """A Sort call: its result (keys, values, indices), None where not asked."""
    what = "sort" if output == pb.SORT_OUTPUT_KEYS else "argsort"
    if _resident_ops.inputs(what, x=x, values=values):
        return _resident_ops.sort(c, x, values, descending, output, retries, timeout, keep, ttl, label)
    _resident_ops.no_keep(what, keep, ttl, label)
    src = _device.source(x, values=values)
    if src is not None:
        _checks.check_descending(descending)
        header = pb.SortHeader(dtype=_types.wire_dtype(src.dtype), descending=bool(descending), output=output,
                               element_count=src.n)
        return _on_device(c, "Sort", _device.Call.sort(pb.SortRequest(header=header), src, values), _wire.SORT_KEYS,
                          retries, timeout, _header_sort)
    x, side, request = _checks.sort_args(x, values, descending, output, copy)
    retries, timeout = c._call_options(retries, timeout)

    def assembled(p: Prepared, k: int) -> Collector:
        h = p.request.header
        return _assembled(_chunking.SortAssembler(p.x.dtype, p.side.dtype if p.side is not None else None, h.output,
                                                  h.descending, len(p.x)))
    return Prepared("Sort", x, request, retries, timeout, _wire.SORT_KEYS, per=sort_per(c.chunk_bytes, x, side),
                    side=side, side_field=_wire.SORT_VALUES, collect=assembled)
