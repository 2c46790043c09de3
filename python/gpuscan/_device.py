"""Device memory (header field 22, see DeviceMemory in gpuscan.proto): arrays already on the GPU, for
clients on the server's host and GPU. No array crosses the connection or the host: a call sends its
header alone, naming each array by the CUDA IPC handle of the allocation that holds it and its byte
offset there, and the server runs its kernels on that memory.

Any object with __cuda_array_interface__ (CuPy, PyTorch, Numba, ...) travels this way, for scan,
reduce, compact, histogram, sort and segmented scan. Nothing here imports CuPy or PyTorch: the handles come from the
CUDA driver (libcuda.so.1) through ctypes, loaded on the first exported array. Only allocating a
result (scan without out=, compact, sort) uses the array's own library, CuPy's or PyTorch's.

The order of the checks is the callers' to keep (_ops, then _t_device): the arrays' interfaces first (shape,
strides, dtype: no driver), then the server's ServerInfo (device_ipc), then the driver (the device's
UUID against the server's, the streams, the handles), so that every mistake that needs no GPU is
reported where there is none.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import uuid as _uuid
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._chunking import histogram_result, reduce_value
# The driver's names, here where the device path (and its tests, which stand in for driver and
# empty) reach them.
from ._cuda import ALL_STREAMS, HANDLE_BYTES, UUID_BYTES, Driver, Exported, Location, driver  # noqa: F401
from ._types import DTYPE_NAMES, KEY_DTYPE_NAMES, HistogramResult, Timing, histogram_header, wire_dtype
from .errors import FailedPrecondition, Internal, Unimplemented
from .v1 import gpuscan_pb2 as pb


def is_device(obj) -> bool:
    """obj exposes __cuda_array_interface__ (a numpy array never does: numba's mapped host arrays
    are host memory, streamed as any ndarray). A CPU torch tensor raises AttributeError there: False."""
    return obj is not None and not isinstance(obj, np.ndarray) and hasattr(obj, "__cuda_array_interface__")


@dataclasses.dataclass(frozen=True)
class Array:
    """A checked __cuda_array_interface__: a C-contiguous array of n elements at ptr."""
    obj: Any
    ptr: int
    shape: Tuple[int, ...]
    dtype: np.dtype          # native byte order
    readonly: bool
    stream: Optional[int]    # to synchronize before the call (None: nothing; ALL_STREAMS: the device)

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.n * self.dtype.itemsize


def array(obj, what: str, *, flags: bool = False, output: bool = False) -> Array:
    """obj's __cuda_array_interface__, checked without the driver: any shape, C-contiguous (strides
    None or C's), no mask, a served dtype (flags: one byte, bool/int8/uint8), a non-null pointer
    aligned to its element, writable when an output. ValueError naming `what` otherwise."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"gpuscan: {what} is not a CUDA array (no __cuda_array_interface__): "
                        f"{type(obj).__name__}") from None
    shape = tuple(int(s) for s in cai["shape"])
    ptr, readonly = cai["data"]
    if cai.get("mask") is not None:
        raise ValueError(f"gpuscan: {what} is a masked CUDA array: the device path takes plain arrays")
    if not shape:
        raise ValueError(f"gpuscan: {what} must be an array, got a 0-d CUDA array")
    dtype = _dtype_of(cai["typestr"], flags, what)
    strides = cai.get("strides")
    if strides is not None and not _c_contiguous(shape, tuple(strides), dtype.itemsize):
        raise ValueError(f"gpuscan: {what} is not C-contiguous (shape {shape}, strides {tuple(strides)}): the device "
                         f"path reads memory in place; pass a contiguous copy (cupy.ascontiguousarray({what}), "
                         f"{what}.contiguous() in PyTorch)")
    a = Array(obj, int(ptr or 0), shape, dtype, bool(readonly), _stream(cai))
    if a.n and (a.ptr == 0 or a.ptr % dtype.itemsize):
        raise ValueError(f"gpuscan: {what}'s data pointer {a.ptr:#x} is null or not aligned to its {dtype} elements")
    if output and readonly:
        raise ValueError(f"gpuscan: {what} is read-only (its __cuda_array_interface__ says so): results are "
                         "written there")
    return a


@functools.lru_cache(maxsize=64)
def _checked_dtype(typestr: str, flags: bool) -> Tuple[Optional[np.dtype], str]:
    """(the native dtype, "") of a served typestr (flags: a one-byte one), else (None, what is wrong)."""
    dtype = np.dtype(typestr)
    if dtype.byteorder == ">":
        return None, f"has big-endian dtype {dtype.str}: the device path takes little-endian arrays"
    dtype = dtype.newbyteorder("=")
    if flags:
        if dtype.itemsize != 1 or dtype.kind not in "biu":
            return None, (f"must be a bool, int8 or uint8 CUDA array (one byte per element, nonzero: true), got "
                          f"dtype {dtype}")
    elif dtype.kind not in "iuf" or dtype.name not in DTYPE_NAMES:
        return None, f"has dtype {dtype}, which is not served (supported: {', '.join(DTYPE_NAMES)})"
    return dtype, ""


def _dtype_of(typestr: str, flags: bool, what: str) -> np.dtype:
    dtype, wrong = _checked_dtype(typestr, flags)
    if dtype is None:
        raise ValueError(f"gpuscan: {what} {wrong}")
    return dtype


def _c_contiguous(shape, strides, itemsize: int) -> bool:
    """As numpy judges: the strides of dimensions of extent 1 do not matter, nor any of an empty array."""
    if len(strides) != len(shape):
        return False
    if 0 in shape:
        return True
    want = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != want:
            return False
        want *= extent
    return True


def _stream(cai) -> Optional[int]:
    if "stream" not in cai:  # an interface before v3 (PyTorch's): its producer's stream is unknown
        return ALL_STREAMS
    s = cai["stream"]
    return None if s is None else int(s)  # 1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD: the driver's own values


def source(x, **other) -> Optional[Array]:
    """x checked (see array) when x or `other` (out= or where=; None is left out) is a CUDA array,
    else None: the host path. TypeError when one is a CUDA array and the other is not."""
    given = {"x": x, **{k: v for k, v in other.items() if v is not None}}
    on_device = [name for name, v in given.items() if is_device(v)]
    if not on_device:
        return None
    if len(on_device) < len(given):
        host = next(name for name in given if name not in on_device)
        raise TypeError(f"gpuscan: {on_device[0]} is a CUDA array but {host} is not ({type(given[host]).__name__}): "
                        "pass both on the device (the device path) or both on the host (streamed)")
    return array(x, "x")


def refuse(op: str, **arrays) -> None:
    """TypeError when any of `arrays` is a CUDA array: op has no device path (never a silent copy)."""
    for name, a in arrays.items():
        if is_device(a):
            raise TypeError(f"gpuscan: {op} takes host arrays, and {name} is a CUDA array (__cuda_array_interface__): "
                            "the device path serves scan, reduce, compact, histogram, sort and segmented scan only; "
                            f"copy it to the host first (cupy.asnumpy({name}), {name}.cpu().numpy())")


def empty(like, shape: Tuple[int, ...], dtype) -> Any:
    """A new C-contiguous CUDA array on `like`'s device, of `like`'s library (CuPy or PyTorch)."""
    lib = type(like).__module__.split(".")[0]
    dtype = np.dtype(dtype)
    if lib == "cupy":
        import cupy
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype)
    if lib == "torch":
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype.name), device=like.device)
    raise TypeError(f"gpuscan: results of a {type(like).__module__}.{type(like).__name__} are allocated with CuPy or "
                    "PyTorch only: pass out= (scan), or x as a CuPy array or PyTorch tensor (compact, sort)")


def uuid_text(raw: bytes) -> str:
    """A device UUID as nvidia-smi prints it (GPU-xxxxxxxx-...)."""
    return f"GPU-{_uuid.UUID(bytes=raw)}" if len(raw) == UUID_BYTES else f"(a {len(raw)}-byte uuid)"


def check_server(info: "pb.ServerInfo", target: str) -> None:
    """FailedPrecondition unless the server serves device memory (Limits.device_ipc)."""
    if info.limits.device_ipc:
        return
    why = (f"it runs the {info.engine or 'unknown'} engine (device memory needs the cuda engine and --allow-device-ipc)"
           if info.engine != "cuda" else "it was started without --allow-device-ipc (or predates device memory)")
    raise FailedPrecondition(f"gpuscan: the server at {target} does not serve device memory: {why}; pass host "
                             "arrays to stream them (cupy.asnumpy(x))")


def check_device(info: "pb.ServerInfo", device_uuid: bytes, target: str) -> None:
    """FailedPrecondition unless the server serves the device of this UUID."""
    if any(d.uuid == device_uuid for d in info.devices):
        return
    served = ", ".join(f"{d.ordinal}: {d.name} {uuid_text(d.uuid)}" for d in info.devices) or "none"
    raise FailedPrecondition(f"gpuscan: x is on {uuid_text(device_uuid)}, which the server at {target} does not serve "
                             f"(its devices: {served}): it runs on another GPU of this host (its --devices or "
                             "CUDA_VISIBLE_DEVICES), or on another host; call the server of that GPU")


# DeviceMemory's fields for the arrays a call names besides its input (each <field>_handle and
# <field>_offset), and how errors call them.
_FIELD_WORDS = {"output": "output", "indices": "indices", "flags": "flags", "values": "values",
                "values_output": "sorted values", "keys": "keys"}
_INEXACT_SEGMENTED = (pb.OPERATOR_SUM, pb.OPERATOR_PRODUCT)  # on floats: not served on device memory yet
_SORT_KEYS = (pb.SORT_OUTPUT_KEYS, pb.SORT_OUTPUT_KEYS_AND_VALUES, pb.SORT_OUTPUT_KEYS_AND_INDICES)
_SORT_INDICES = (pb.SORT_OUTPUT_INDICES, pb.SORT_OUTPUT_KEYS_AND_INDICES)
RESPONSE_SLACK = 4096  # a bound on a final response's bytes besides a histogram's bins (Timing, counts)


class Call:
    """One device-memory call (a shared.Call's protocol: serialized, feed_scan, feed_compact,
    reduce_value, finish, `with`; and feed_sort, histogram_value): its single request, the arrays
    it names, the checks of the final response. Built by the client from checked arrays (scan,
    reduce, compact, histogram, sort, segmented scan: feed_scan); export() fills header.device_memory once the server's
    ServerInfo is known. Results: `result` (a scan's output), `values`/`indices` (a compact's, of
    n elements; `kept` of them written), `keys`/`sorted_values`/`indices` (a sort's, n elements
    each, None where its output has none), histogram_value()'s HistogramResult."""

    def __init__(self, request, x: Array):
        self.request = request
        self.x = x
        self.n = x.n
        self.dtype = x.dtype
        self.timing: Optional[Timing] = None
        self.kept: Optional[int] = None
        self.result: Any = None    # scan: what the call returns
        self.values: Any = None    # compact: the kept values' array
        self.indices: Any = None   # compact: the kept indices' array; sort: the permutation (int64)
        self.keys: Any = None           # sort: the sorted keys
        self.sorted_values: Any = None  # sort: the values moved with them
        self._scan = False
        self._bins: Any = None     # histogram: its bins= while its range (x's min and max) is still to find
        # The arrays named besides x, by DeviceMemory field ("output": a scan's output (x: in place),
        # compact's values, sort's keys; "indices", "flags", "values", "values_output").
        self._named: Dict[str, Array] = {}
        # Results to allocate once the server is known: (attribute, shape, dtype, field).
        self._new: List[Tuple[str, tuple, np.dtype, str]] = []
        self._words = _FIELD_WORDS  # how errors call each field's array (a segmented scan's heads: "heads")

    @classmethod
    def scan(cls, request, x: Array, out) -> "Call":
        """Into out (a CUDA array of x's dtype and size; x itself: in place), or a new array like x."""
        call = cls(request, x)
        call._scan = True
        if out is None:
            call._new.append(("result", x.shape, x.dtype, "output"))
            return call
        call.result = out
        call._named["output"] = _output(x, out, "out") if out is not x.obj else x
        if call._named["output"].readonly:
            raise ValueError("gpuscan: x is read-only (its __cuda_array_interface__ says so): it cannot be scanned "
                             "in place")
        return call

    @classmethod
    def segmented(cls, request, x: Array, keys, heads, out) -> "Call":
        """A SegmentedScan: x, 1-D, its values; exactly one of keys (a 1-D CUDA array of x's length,
        int32/int64/uint32/uint64: header.key_dtype) or heads (one byte per element, nonzero begins
        a segment: header.heads), read in place (keys_handle/keys_offset); out as scan's. A float
        sum or product: Unimplemented, before any call (the server does not serve them on device
        memory yet; the host path does)."""
        what = "keys" if heads is None else "heads"
        if len(x.shape) != 1:
            raise ValueError(f"gpuscan: segmented_scan takes a 1-D CUDA array, x has shape {x.shape}; pass x.ravel()")
        h = request.header
        s = array(keys if heads is None else heads, what, flags=heads is not None)
        if heads is None:
            if s.dtype.name not in KEY_DTYPE_NAMES:
                raise ValueError(f"gpuscan: keys must be a CUDA array of {', '.join(KEY_DTYPE_NAMES)}, got dtype "
                                 f"{s.dtype}: the device path reads them in place, never widened; pass "
                                 "keys.astype('int32') (a copy)")
            h.key_dtype = wire_dtype(s.dtype)
        else:
            h.heads = True
        if len(s.shape) != 1:
            raise ValueError(f"gpuscan: {what} must be 1-D, got shape {s.shape}; pass {what}.ravel()")
        if s.n != x.n:
            raise ValueError(f"gpuscan: {what} has {s.n} elements but x has {x.n}: they must match")
        if x.dtype.kind == "f" and h.op in _INEXACT_SEGMENTED:
            raise Unimplemented(
                f"gpuscan: a {x.dtype} {pb.Operator.Name(h.op).replace('OPERATOR_', '').lower()} segmented scan of "
                "device memory is not served yet (float sums and products, segmented, on device memory: the "
                "server answers UNIMPLEMENTED; min and max, and every integer operator, are served); the host "
                f"path serves them: pass host arrays (cupy.asnumpy(x), cupy.asnumpy({what}))")
        call = cls.scan(request, x, out)
        call._named["keys"] = s
        call._words = {**_FIELD_WORDS, "keys": what}
        return call

    @classmethod
    def compact(cls, request, x: Array, where, want_values: bool, want_indices: bool) -> "Call":
        """Kept values and indices into new arrays of n elements beside x's; where= (use_flags): a
        one-byte CUDA mask of x's size, read in place."""
        call = cls(request, x)
        if want_values:
            call._new.append(("values", (x.n,), x.dtype, "output"))
        if want_indices:
            call._new.append(("indices", (x.n,), np.dtype(np.int64), "indices"))
        if request.header.use_flags:
            flags = call._named["flags"] = array(where, "where", flags=True)
            if flags.n != x.n:
                raise ValueError(f"gpuscan: where has {flags.n} elements but x has {x.n}: they must match")
        return call

    @classmethod
    def histogram(cls, request, x: Array, bins=None) -> "Call":
        """x read in place (any shape: all its elements, as numpy.histogram's). bins: even bins
        whose range is still to find, x's min and max (range_requests, set_range: after export);
        None: the header is complete."""
        call = cls(request, x)
        call._bins = bins if x.n else None  # (an empty x's range is numpy's (0, 1), known already)
        return call

    @classmethod
    def sort(cls, request, x: Array, values) -> "Call":
        """x, the keys, 1-D; values= None or a 1-D CUDA array of x's length (any served dtype: the
        header's output becomes KEYS_AND_VALUES, its values_dtype set), read in place. The outputs
        the header's output asks for go into new arrays of n elements like x: `keys`,
        `sorted_values`, `indices` (int64)."""
        if len(x.shape) != 1:
            raise ValueError(f"gpuscan: sort takes a 1-D CUDA array, x has shape {x.shape}; pass x.ravel()")
        call = cls(request, x)
        h = request.header
        if values is not None:
            v = call._named["values"] = array(values, "values")
            if len(v.shape) != 1:
                raise ValueError(f"gpuscan: values must be 1-D, got shape {v.shape}; pass values.ravel()")
            if v.n != x.n:
                raise ValueError(f"gpuscan: values has {v.n} elements but x has {x.n}: they must match")
            h.output, h.values_dtype = pb.SORT_OUTPUT_KEYS_AND_VALUES, wire_dtype(v.dtype)
        if h.output in _SORT_KEYS:
            call._new.append(("keys", (x.n,), x.dtype, "output"))
        if h.output == pb.SORT_OUTPUT_KEYS_AND_VALUES:
            call._new.append(("sorted_values", (x.n,), call._named["values"].dtype, "values_output"))
        if h.output in _SORT_INDICES:
            call._new.append(("indices", (x.n,), np.dtype(np.int64), "indices"))
        return call

    def export(self, info: "pb.ServerInfo", target: str) -> None:
        """Checks the server (device_ipc, then x's device among its own), allocates the results,
        waits for the arrays' streams and fills header.device_memory. An empty x names no memory:
        its header goes without device_memory, a streamed call of no elements."""
        check_server(info, target)
        for attr, shape, dtype, field in self._new:
            setattr(self, attr, empty(self.x.obj, shape, dtype))
            self._named[field] = array(getattr(self, attr), attr, output=True)
        self._new = []
        if self.n == 0:
            return
        drv = driver()
        at = drv.locate(self.x.ptr, "x")
        check_device(info, at.device_uuid, target)
        named = [(field, a, at if a is self.x else drv.locate(a.ptr, self._words[field]))
                 for field, a in self._named.items()]
        for field, _, other in named:
            if other.device_uuid != at.device_uuid:
                raise ValueError(f"gpuscan: the {self._words[field]} array is on another GPU than x "
                                 f"({uuid_text(at.device_uuid)})")
        for stream in {a.stream for a in (self.x, *(a for _, a, _ in named))} - {None}:
            drv.synchronize(at.ordinal, stream)
        dm = self.request.header.device_memory
        src = drv.export(self.x.ptr, self.x.nbytes, "x", at)
        dm.device_uuid, dm.handle, dm.offset, dm.bytes = at.device_uuid, src.handle, src.offset, self.x.nbytes
        for field, a, other in named:
            if self._scan and field == "output" and a.ptr == self.x.ptr:
                continue  # out is x's memory: in place (output_handle empty)
            e = drv.export(a.ptr, a.nbytes, self._words[field], other)
            setattr(dm, f"{field}_handle", e.handle)
            setattr(dm, f"{field}_offset", e.offset)

    def serialized(self) -> List[bytes]:
        return [self.request.SerializeToString()]

    def response_bytes(self) -> int:
        """A bound on the final response's size: a histogram's holds 16 bytes a bin."""
        h = self.request.header
        if isinstance(h, pb.HistogramHeader):
            return 16 * (max(h.bins, len(h.edges)) + 1) + RESPONSE_SLACK
        return RESPONSE_SLACK

    def __enter__(self) -> "Call":
        return self

    def __exit__(self, *exc) -> None:
        pass  # nothing to release: results made for a failed call are collected with it

    def _counted(self, kind: str, element_count: int, timing) -> None:
        if element_count != self.n:
            raise Internal(f"server's {kind} counted {element_count} elements of a {self.n}-element device array")
        self.timing = Timing.from_proto(timing)

    def feed_scan(self, raw: bytes) -> None:
        r = pb.ScanResponse.FromString(raw)
        if r.data:
            raise Internal("server streamed scan data back on a device-memory call")
        if r.HasField("timing"):
            self._counted("scan", r.element_count, r.timing)

    def feed_compact(self, raw: bytes) -> None:
        r = pb.CompactResponse.FromString(raw)
        if r.values or r.indices:
            raise Internal("server streamed kept elements back on a device-memory call")
        if r.HasField("timing"):
            self._counted("compact", r.element_count, r.timing)
            if r.kept_count > self.n:
                raise Internal(f"server kept {r.kept_count} of {self.n} elements")
            self.kept = r.kept_count

    def feed_sort(self, raw: bytes) -> None:
        r = pb.SortResponse.FromString(raw)
        if r.keys or r.values or r.indices:
            raise Internal("server streamed sorted elements back on a device-memory call")
        if r.HasField("timing"):
            self._counted("sort", r.element_count, r.timing)

    def reduce_value(self, raw: bytes):
        """The ReduceResponse's value (a numpy scalar); keeps its Timing."""
        value, element_count, timing = reduce_value(raw, self.dtype)
        if element_count != self.n:
            raise Internal(f"server's reduce counted {element_count} elements of a {self.n}-element device array")
        self.timing = timing
        return value

    @property
    def needs_range(self) -> bool:
        """A histogram whose even bins' range is x's min and max, not found yet (see set_range)."""
        return self._bins is not None

    def range_requests(self) -> List[bytes]:
        """The two reductions of x where it lies (after export), MIN then MAX, that give a
        histogram's range as numpy finds it (x.min(), x.max()): serialized ReduceRequests."""
        h = self.request.header
        return [pb.ReduceRequest(header=pb.ReduceHeader(dtype=h.dtype, op=op, element_count=self.n,
                                                        device_memory=h.device_memory)).SerializeToString()
                for op in (pb.OPERATOR_MIN, pb.OPERATOR_MAX)]

    def set_range(self, lo_response: bytes, hi_response: bytes) -> None:
        """The histogram's header from the range_requests' ReduceResponses: the bins numpy makes of
        an array whose min and max these are (so the header is the host path's, even edges or
        numpy's own; a NaN or an infinity there: ValueError, as numpy's autodetected range)."""
        lo, hi = self.reduce_value(lo_response), self.reduce_value(hi_response)
        h = self.request.header
        fresh = histogram_header(np.array([lo, hi], self.dtype), h.dtype, self._bins, None)
        fresh.element_count = self.n
        fresh.device_memory.CopyFrom(h.device_memory)
        h.CopyFrom(fresh)
        self._bins = None

    def histogram_value(self, raw: bytes) -> HistogramResult:
        """The HistogramResponse as a HistogramResult; keeps its Timing."""
        if self.needs_range:
            raise Internal("histogram of a device array called before its range was found")
        result, timing = histogram_result(raw)
        if result.element_count != self.n:
            raise Internal(f"server's histogram counted {result.element_count} elements of a {self.n}-element "
                           "device array")
        self.timing = timing
        return result

    def finish(self) -> Timing:
        if self.timing is None:
            raise Internal("server ended a device-memory call without its final response")
        return self.timing


def _output(x: Array, out, what: str) -> Array:
    """A caller's output for x: a writable CUDA array of x's dtype and size."""
    a = array(out, what, output=True)
    if a.dtype != x.dtype or a.n != x.n:
        raise ValueError(f"gpuscan: {what} must be a CUDA array of {x.n} {x.dtype} elements like x, got "
                         f"{a.n} {a.dtype}")
    return a
