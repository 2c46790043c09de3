"""Resident arrays (issue 56; Resident, PutArray, GetArray, DropArray and ListArrays in gpuscan.proto):
arrays the server keeps between calls, named by id, belonging to the caller's tenant. Here:
RemoteArray (the client's handle of one), ResidentArrays (arrays()'s answer), the argument checks,
and the programs of effects (_effects) of put, get, drop and arrays, which Client runs blocking and
AsyncClient awaits. The operations' prepared calls on resident inputs are _resident_ops's."""
from __future__ import annotations

import dataclasses
import inspect
import math
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import _chunking, _device, _types, _wire
from ._effects import Call, Program, Retry, Single
from .errors import Internal, NotFound
from .v1 import gpuscan_pb2 as pb

MAX_TENANT_BYTES = 128  # the server's cap on the gpuscan-tenant metadata
TENANT_METADATA = "gpuscan-tenant"


def info_dict(info: "pb.ArrayInfo") -> Dict[str, Any]:
    """An ArrayInfo as plain Python: its fields by name, dtype as a numpy dtype."""
    return {"id": bytes(info.id), "dtype": _types.any_dtype(info.dtype), "element_count": info.element_count,
            "bytes": info.bytes, "device": info.device, "ttl_ms": info.ttl_ms,
            "expires_unix_ms": info.expires_unix_ms, "label": info.label}


class RemoteArray:
    """A 1-D array kept on a gpuscan server (Client.put's, or a scan's with keep=True), named by its
    id; it holds the client that made it. Nothing is fetched until asked: r.get(offset, count) (or
    np.asarray(r)) reads its elements back; r.drop() frees it, as does leaving `with r:` (an array
    already gone, dropped or idle past its ttl, is no error there). Every operation runs on it where
    it lies (c.scan(r), c.sort(r, values=v), c.compact(r, where=m), ...: all of a call's inputs
    RemoteArrays, else TypeError); with keep=True the results stay there too, as new RemoteArrays.
    r.reshape(rows, cols): the same array as a row-major matrix, for scan2d and scan(axis=).

    Attributes (as the server last described it: put, get, a kept scan or arrays()): id (bytes,
    a capability: the server finds it only for the tenant that put it), dtype (numpy; a bool array
    is kept as uint8), size and shape (size,), nbytes, device (where it lies, as Timing.device),
    ttl (seconds it may stay unused before the server drops it; each call that uses it renews
    it), expires (Unix time in seconds when it would be dropped, as of that description), label,
    info (every ArrayInfo field as a dict). Of an AsyncClient's: `await r.get()`, `await r.drop()`,
    `async with r:`; np.asarray(r) is refused (it cannot await)."""

    __slots__ = ("_client", "_info", "_shape")

    def __init__(self, client, info: "pb.ArrayInfo", shape: Optional[Tuple[int, int]] = None):
        self._client = client
        self._info = info
        self._shape = shape  # a matrix view (reshape): (rows, cols); None: 1-D

    def reshape(self, *shape) -> "RemoteArray":
        """A handle of the same array seen as a row-major matrix (rows, cols), one of them -1 to
        infer it (reshape(-1): 1-D again), for scan2d and scan(axis=); get() of the whole of it
        answers that shape. Nothing is sent; dropping either handle drops the array."""
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if dims in ((-1,), (self.size,)):
            return RemoteArray(self._client, self._info)
        if len(dims) != 2 or not all(isinstance(d, int) for d in dims) or dims.count(-1) > 1:
            raise ValueError(f"gpuscan: a RemoteArray reshapes to (rows, cols) or (-1,), got {shape!r}")
        rows, cols = dims
        if -1 in dims:
            known = cols if rows == -1 else rows
            if known <= 0 or self.size % known:
                raise ValueError(f"gpuscan: cannot reshape {self.size} elements to {dims}")
            rows, cols = (self.size // known, known) if rows == -1 else (known, self.size // known)
        if rows < 0 or cols < 0 or rows * cols != self.size:
            raise ValueError(f"gpuscan: cannot reshape {self.size} elements to ({rows}, {cols})")
        return RemoteArray(self._client, self._info, (rows, cols))

    def _update(self, info: "pb.ArrayInfo") -> None:
        if info.id == self._info.id:
            self._info = info

    @property
    def client(self):
        """The Client or AsyncClient that made this handle (its calls go through it)."""
        return self._client

    @property
    def id(self) -> bytes:
        return bytes(self._info.id)

    @property
    def dtype(self) -> np.dtype:
        return _types.any_dtype(self._info.dtype)

    @property
    def size(self) -> int:
        return int(self._info.element_count)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape or (self.size,)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return int(self._info.bytes)

    @property
    def device(self) -> str:
        return self._info.device

    @property
    def ttl(self) -> float:
        return self._info.ttl_ms / 1000.0

    @property
    def expires(self) -> float:
        return self._info.expires_unix_ms / 1000.0

    @property
    def label(self) -> str:
        return self._info.label

    @property
    def info(self) -> Dict[str, Any]:
        return info_dict(self._info)

    def get(self, offset: int = 0, count: Optional[int] = None, **kw):
        """Its elements [offset, offset + count) (count None: to the end) as a new numpy array:
        client.get(self, ...), whose keywords (timeout=, retries=) it takes. A matrix handle's
        whole array comes back in its shape."""
        return self._client.get(self, offset, count, **kw)

    def drop(self, **kw):
        """Frees it on the server: client.drop(self) (gpuscan.NotFound when it is gone already)."""
        return self._client.drop(self, **kw)

    def __array__(self, dtype=None, copy=None):
        if self._client._awaits:
            raise TypeError("gpuscan: np.asarray of an AsyncClient's RemoteArray would block the event loop; "
                            "fetch it with `await r.get()`")
        a = self.get()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __enter__(self) -> "RemoteArray":
        if self._client._awaits:
            raise TypeError("gpuscan: an AsyncClient's RemoteArray is dropped by `async with`")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._client.drop(self)
        except NotFound:  # dropped already, or idle past its ttl: gone either way
            pass

    async def __aenter__(self) -> "RemoteArray":
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            done = self._client.drop(self)
            if inspect.isawaitable(done):
                await done
        except NotFound:
            pass

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label else ""
        return (f"RemoteArray(id={self.id.hex()[:12]}..., dtype={self.dtype}, size={self.size}, "
                f"device={self.device!r}, ttl={self.ttl:g}s{label})")


@dataclasses.dataclass
class ResidentArrays:
    """arrays()'s answer: the caller's tenant's arrays (RemoteArrays of this client, oldest first),
    the bytes they hold (tenant_bytes) against its quota (tenant_quota_bytes; 0: none), and the
    server's budget for every tenant's arrays together (budget_bytes) and what they hold now
    (used_bytes). Iterating it, len() and [i] go over `arrays`."""
    arrays: List[RemoteArray]
    tenant_bytes: int
    tenant_quota_bytes: int
    budget_bytes: int
    used_bytes: int

    def __iter__(self) -> Iterator[RemoteArray]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    def __getitem__(self, i):
        return self.arrays[i]


# -- checks
def check_tenant(tenant) -> Optional[tuple]:
    """tenant= of a client as its calls' metadata (None or "": the default tenant, no metadata);
    ValueError unless printable ASCII of at most 128 bytes (gRPC metadata, the server's cap)."""
    if tenant is None or tenant == "":
        return None
    if not isinstance(tenant, str) or not re.fullmatch(r"[\x20-\x7e]+", tenant) or len(tenant) > MAX_TENANT_BYTES:
        raise ValueError(f"gpuscan: tenant must be printable ASCII of at most {MAX_TENANT_BYTES} characters, "
                         f"got {tenant!r}")
    return ((TENANT_METADATA, tenant),)


def ttl_ms(ttl) -> int:
    """ttl= in seconds as the wire's milliseconds (None: 0, the server's --resident-ttl-ms, which
    also caps it); ValueError unless a finite number > 0."""
    if ttl is None:
        return 0
    try:
        if isinstance(ttl, (bool, str)):
            raise TypeError
        t = float(ttl)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"gpuscan: ttl must be seconds > 0 (None: the server's --resident-ttl-ms), got {ttl!r}")
    return max(1, int(round(t * 1000)))


def check_label(label) -> str:
    if label is None:
        return ""
    if not isinstance(label, str):
        raise ValueError(f"gpuscan: label must be a str, got {label!r}")
    return label


def array_id(r) -> bytes:
    """The id of a RemoteArray, or an id given as bytes (or its hex text)."""
    if isinstance(r, RemoteArray):
        return r.id
    if isinstance(r, (bytes, bytearray, memoryview)):
        return bytes(r)
    if isinstance(r, str):
        try:
            return bytes.fromhex(r)
        except ValueError:
            pass
    raise TypeError(f"gpuscan: expected a RemoteArray or its id (bytes), got {type(r).__name__}")


def refuse(op: str, **arrays) -> None:
    """TypeError when any of `arrays` is a RemoteArray: op does not take resident inputs (never a
    silent fetch)."""
    for name, a in arrays.items():
        if isinstance(a, RemoteArray):
            raise TypeError(f"gpuscan: {op} does not take resident arrays ({name} is a RemoteArray); fetch its "
                            f"values with {name}.get() to pass them")


# -- the programs
def _retried(retries: int, timeout: Optional[float], attempt) -> Program:
    return (yield Retry(retries, timeout, attempt))


def put(c, x, ttl, label, copy, retries, timeout) -> Program:
    """PutArray of a 1-D host array of any dtype the package takes (narrow ones as they are,
    bool as uint8): a RemoteArray. Not retried (retries= is checked): a try whose answer was lost
    may have made the array, and a retry would leave a second one behind until its ttl (the C++
    client does the same)."""
    refuse("put", x=x)
    if _device.is_device(x):
        return _put_device(c, x, ttl, label, timeout)
    x, wire = _types.check_array(x, copy=copy, narrow=True)
    header = pb.PutArrayHeader(dtype=wire, element_count=len(x), ttl_ms=ttl_ms(ttl), label=check_label(label))
    retries, timeout = c._call_options(retries, timeout)
    request, per = pb.PutArrayRequest(header=header), _chunking.chunk_elements(c.chunk_bytes, x.itemsize)

    def attempt(t):
        raws = [b""]
        yield Call("PutArray", _chunking.data_requests(request, _wire.PUT_DATA, x, per), t, raws.__setitem__)
        return RemoteArray(c, pb.ArrayInfo.FromString(raws[0]))
    return _retried(0, timeout, attempt)


def _put_device(c, x, ttl, label, timeout) -> Program:
    """PutArray of a 1-D CUDA array (CuPy, PyTorch, ...: __cuda_array_interface__) by its device
    memory (PutArrayHeader.device_memory): the header alone names the allocation by its CUDA IPC
    handle, and the server copies it device to device. For a caller on the server's host and GPU,
    with a server started with --allow-device-ipc and --resident-bytes; the device path's dtypes
    (4- and 8-byte ones). The checks come in _device's order: the interface, the server, the driver."""
    from . import _t_device  # (the device transport imports the client's modules)
    a = _device.array(x, "x")
    if len(a.shape) != 1:
        raise ValueError(f"gpuscan: put takes a 1-D array, x has shape {a.shape}; pass x.ravel()")
    header = pb.PutArrayHeader(dtype=_types.wire_dtype(a.dtype), element_count=a.n, ttl_ms=ttl_ms(ttl),
                               label=check_label(label))
    _, timeout = c._call_options(0, timeout)

    def program():
        info = yield from _t_device.server_info(c, timeout)
        _device.check_server(info, c.target)
        if a.n:  # an empty array names no memory: the header alone, as a streamed empty Put
            drv = _device.driver()
            at = drv.locate(a.ptr, "x")
            _device.check_device(info, at.device_uuid, c.target)
            if a.stream is not None:
                drv.synchronize(at.ordinal, a.stream)
            e = drv.export(a.ptr, a.nbytes, "x", at)
            dm = header.device_memory
            dm.device_uuid, dm.handle, dm.offset, dm.bytes = at.device_uuid, e.handle, e.offset, a.nbytes
        raws = [b""]
        yield Call("PutArray", [pb.PutArrayRequest(header=header).SerializeToString()], timeout, raws.__setitem__)
        return RemoteArray(c, pb.ArrayInfo.FromString(raws[0]))
    return program()


class _Fetched:
    """GetArray's responses placed into one new array: the first carries the ArrayInfo (dtype,
    count), each its data's element offset in the whole array."""

    def __init__(self, offset: int, count: Optional[int]):
        self.offset, self.count = offset, count
        self.info: Optional[pb.ArrayInfo] = None
        self.out: Optional[np.ndarray] = None
        self.received = 0

    def feed(self, lane: int, raw: bytes) -> None:
        f = _wire.parse(raw)
        if _wire.GET_INFO in f and self.info is None:
            s, e = f[_wire.GET_INFO]
            self.info = pb.ArrayInfo.FromString(raw[s:e])
            n = self.count if self.count is not None else self.info.element_count - self.offset
            self.out = np.empty(n, _types.any_dtype(self.info.dtype))
        if self.out is None:
            raise Internal("the server's first GetArray response carried no ArrayInfo")
        if _wire.GET_DATA in f:
            s, e = f[_wire.GET_DATA]
            at = (f.get(_wire.GET_OFFSET, 0) - self.offset) * self.out.itemsize
            if at < 0 or at + (e - s) > self.out.nbytes:
                raise Internal(f"the server sent elements outside the {len(self.out)} asked for")
            self.out.view(np.uint8)[at:at + e - s] = np.frombuffer(raw, np.uint8, e - s, s)
            self.received += e - s

    def finish(self) -> np.ndarray:
        if self.out is None or self.received != self.out.nbytes:
            raise Internal(f"the server sent {self.received} bytes of the "
                           f"{0 if self.out is None else self.out.nbytes} asked for")
        return self.out


def get(c, r, offset, count, retries, timeout) -> Program:
    ident = array_id(r)
    offset = _types.check_int(offset, "offset", 0)
    request = pb.GetArrayRequest(id=ident, offset=offset, chunk_bytes=c.chunk_bytes)
    if count is not None:
        request.count = count = _types.check_int(count, "count", 0)
    retries, timeout = c._call_options(retries, timeout)
    raw_request = request.SerializeToString()

    def attempt(t):
        fetched = _Fetched(offset, count)
        yield Single("GetArray", raw_request, t, fetched.feed)
        out = fetched.finish()
        if isinstance(r, RemoteArray) and fetched.info is not None:
            r._update(fetched.info)
            if r.ndim == 2 and offset == 0 and count is None:  # the whole matrix asked for
                out = out.reshape(r.shape)
        return out
    return _retried(retries, timeout, attempt)


def drop(c, r, timeout) -> Program:
    """DropArray: the dropped array's info (a dict, as RemoteArray.info). Not retried."""
    request, timeout = pb.DropArrayRequest(id=array_id(r)).SerializeToString(), c._call_timeout(timeout)

    def program():
        raws = [b""]
        yield Single("DropArray", request, timeout, raws.__setitem__)
        return info_dict(pb.DropArrayResponse.FromString(raws[0]).info)
    return program()


def arrays(c, timeout) -> Program:
    """ListArrays, page after page (next_page_token): a ResidentArrays of this client's
    RemoteArrays, with the last page's byte counts. Not retried."""
    timeout = c._call_timeout(timeout)

    def program():
        found, token = [], ""
        while True:
            raws = [b""]
            yield Single("ListArrays", pb.ListArraysRequest(page_token=token).SerializeToString(), timeout,
                         raws.__setitem__)
            m = pb.ListArraysResponse.FromString(raws[0])
            found.extend(m.arrays)
            token = m.next_page_token
            if not token:
                return ResidentArrays([RemoteArray(c, a) for a in found], m.tenant_bytes, m.tenant_quota_bytes,
                                      m.budget_bytes, m.used_bytes)
    return program()
