"""The CUDA driver (libcuda.so.1) through ctypes: the few calls the device path (_device) makes to
locate an array's memory, wait for its stream and export its allocation's IPC handle. Loaded
on the first exported array; nothing here knows gRPC or the request model."""
from __future__ import annotations

import collections
import contextlib
import ctypes
import dataclasses
import threading
from typing import Iterator, Optional, Tuple

from .errors import FailedPrecondition

HANDLE_BYTES = 64      # sizeof(CUipcMemHandle)
UUID_BYTES = 16        # sizeof(CUuuid)
HANDLE_CACHE_SIZE = 256  # allocations whose handles are kept (least recently used dropped first)
# Array.stream for an interface without a "stream" key (before v3): the producer's stream is
# unknown, so all work queued on the array's device is waited for.
ALL_STREAMS = -1


@dataclasses.dataclass(frozen=True)
class Location:
    """Where a pointer's memory lies (Driver.locate)."""
    ordinal: int        # the device's CUDA ordinal in this process
    device_uuid: bytes  # UUID_BYTES: what the server's Device.uuid names
    allocation: int     # CU_POINTER_ATTRIBUTE_BUFFER_ID: unique to the allocation in this process


@dataclasses.dataclass(frozen=True)
class Exported:
    """An array as the server names it: its allocation's IPC handle and its byte offset there."""
    handle: bytes     # HANDLE_BYTES
    offset: int


# -- the CUDA driver (libcuda.so.1) through ctypes
# CU_POINTER_ATTRIBUTE_ (cuda.h): MEMORY_TYPE, IS_MANAGED, DEVICE_ORDINAL, BUFFER_ID (a process-wide
# unique id of the allocation).
_POINTER_ATTRIBUTES = (2, 8, 9, 7)
_MEMORYTYPE_HOST, _MEMORYTYPE_DEVICE = 1, 2
_NOT_EXPORTABLE = ("only memory from cudaMalloc/cuMemAlloc (CuPy's and PyTorch's default allocators) has a CUDA IPC "
                   "handle, not managed memory, virtual memory management (cuMemCreate: PyTorch's "
                   "expandable_segments), or stream-ordered pools (cudaMallocAsync: CuPy's MemoryAsyncPool, "
                   "PyTorch's cudaMallocAsync backend)")

_c = ctypes
_SIGNATURES = {
    "cuInit": (_c.c_uint,),
    "cuGetErrorName": (_c.c_int, _c.POINTER(_c.c_char_p)),
    "cuCtxGetCurrent": (_c.POINTER(_c.c_void_p),),
    "cuCtxGetDevice": (_c.POINTER(_c.c_int),),
    "cuCtxPushCurrent_v2": (_c.c_void_p,),
    "cuCtxPopCurrent_v2": (_c.POINTER(_c.c_void_p),),
    "cuCtxSynchronize": (),
    "cuDevicePrimaryCtxRetain": (_c.POINTER(_c.c_void_p), _c.c_int),
    "cuDeviceGet": (_c.POINTER(_c.c_int), _c.c_int),
    "cuPointerGetAttributes": (_c.c_uint, _c.POINTER(_c.c_int), _c.POINTER(_c.c_void_p), _c.c_uint64),
    "cuMemGetAddressRange_v2": (_c.POINTER(_c.c_uint64), _c.POINTER(_c.c_size_t), _c.c_uint64),
    "cuIpcGetMemHandle": (_c.c_char_p, _c.c_uint64),
    "cuStreamSynchronize": (_c.c_void_p,),
}


class Driver:
    """The few driver calls the device path makes. Those that need a context run in one of the
    array's device: the caller's current context when it is on that device (as CuPy and PyTorch
    leave it), else that device's primary context, retained once and pushed for the call (pointer
    attributes need none). Handles are kept per allocation, keyed by its buffer id (process-wide
    unique: memory freed and allocated again at the same address is another allocation, whose
    handle is taken anew). Thread-safe."""

    def __init__(self):
        try:
            self._lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise FailedPrecondition(f"gpuscan: device arrays need the CUDA driver, and libcuda.so.1 does not load "
                                     f"here ({e})") from None
        for name, args in _SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        # The MIG-aware UUID (CUDA 11.4+), as cudaDeviceProp.uuid reports it; else the GPU's.
        self._get_uuid = getattr(self._lib, "cuDeviceGetUuid_v2", None) or self._lib.cuDeviceGetUuid
        self._get_uuid.argtypes, self._get_uuid.restype = (ctypes.c_char_p, ctypes.c_int), ctypes.c_int
        self._lock = threading.Lock()
        self._buffers = threading.local()  # each thread's cuPointerGetAttributes buffers, made once
        self._devices: dict = {}   # ordinal -> (CUdevice, UUID bytes)
        self._contexts: dict = {}  # ordinal -> its retained primary CUcontext
        self._handles: "collections.OrderedDict[int, Tuple[int, int, bytes]]" = collections.OrderedDict()
        self._call("cuInit", 0)

    def _call(self, name: str, *args) -> None:
        rc = getattr(self._lib, name)(*args)
        if rc:
            raise FailedPrecondition(f"gpuscan: the CUDA driver's {name} failed: {self._error(rc)}")

    def _error(self, rc: int) -> str:
        s = ctypes.c_char_p()
        self._lib.cuGetErrorName(rc, ctypes.byref(s))
        return s.value.decode() if s.value else f"CUresult {rc}"

    def _device(self, ordinal: int) -> Tuple[int, bytes]:
        with self._lock:
            known = self._devices.get(ordinal)
        if known is None:
            dev, raw = ctypes.c_int(), ctypes.create_string_buffer(UUID_BYTES)
            self._call("cuDeviceGet", ctypes.byref(dev), ordinal)
            rc = self._get_uuid(raw, dev)
            if rc:
                raise FailedPrecondition(f"gpuscan: the CUDA driver's cuDeviceGetUuid failed: {self._error(rc)}")
            known = (dev.value, raw.raw[:UUID_BYTES])
            with self._lock:
                self._devices[ordinal] = known
        return known

    @contextlib.contextmanager
    def _on(self, ordinal: int) -> Iterator[None]:
        """A context of device `ordinal` current on this thread meanwhile."""
        cur, dev = ctypes.c_void_p(), ctypes.c_int()
        device = self._device(ordinal)[0]
        self._call("cuCtxGetCurrent", ctypes.byref(cur))
        if cur.value:
            self._call("cuCtxGetDevice", ctypes.byref(dev))
            if dev.value == device:
                yield
                return
        with self._lock:
            ctx = self._contexts.get(ordinal)
            if ctx is None:
                ctx = ctypes.c_void_p()
                self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), device)
                self._contexts[ordinal] = ctx  # kept for the process's life, as CuPy's and PyTorch's
        self._call("cuCtxPushCurrent_v2", ctx)
        try:
            yield
        finally:
            self._lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def locate(self, ptr: int, what: str) -> Location:
        """Where ptr's memory lies; ValueError for memory that is not plain device memory."""
        n = len(_POINTER_ATTRIBUTES)
        b = self._buffers
        if not hasattr(b, "values"):
            b.values = (ctypes.c_uint64 * n)()
            b.slots = (ctypes.c_void_p * n)(*(ctypes.addressof(b.values) + 8 * i for i in range(n)))
            b.attributes = (ctypes.c_int * n)(*_POINTER_ATTRIBUTES)
        ctypes.memset(b.values, 0, ctypes.sizeof(b.values))  # (a value narrower than 8 bytes fills the low ones)
        self._call("cuPointerGetAttributes", n, b.attributes, b.slots, ptr)
        memory_type, managed, ordinal, buffer_id = b.values
        if managed:
            raise ValueError(f"gpuscan: {what} is in managed memory (cudaMallocManaged): {_NOT_EXPORTABLE}")
        if memory_type != _MEMORYTYPE_DEVICE:
            kind = "pinned host memory" if memory_type == _MEMORYTYPE_HOST else "no memory CUDA knows (freed?)"
            raise ValueError(f"gpuscan: {what}'s pointer {ptr:#x} is {kind}, not device memory")
        ordinal = ctypes.c_int32(ordinal & 0xFFFFFFFF).value
        return Location(ordinal, self._device(ordinal)[1], int(buffer_id))

    def synchronize(self, ordinal: int, stream: int) -> None:
        """Waits for `stream` (a __cuda_array_interface__ stream; ALL_STREAMS: the whole device)."""
        with self._on(ordinal):
            if stream == ALL_STREAMS:
                self._call("cuCtxSynchronize")
            else:
                self._call("cuStreamSynchronize", ctypes.c_void_p(stream))

    def export(self, ptr: int, nbytes: int, what: str, at: Location) -> Exported:
        """The IPC handle of ptr's allocation (cached) and ptr's offset in it; at: locate(ptr)."""
        buffer_id = at.allocation
        with self._lock:
            known = self._handles.get(buffer_id) if buffer_id else None
            if known is not None:
                self._handles.move_to_end(buffer_id)
        if known is None:
            base, size, handle = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.create_string_buffer(HANDLE_BYTES)
            with self._on(at.ordinal):
                self._call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), ptr)
                rc = self._lib.cuIpcGetMemHandle(handle, base)
            if rc:
                raise ValueError(f"gpuscan: {what}'s memory cannot be shared with the server (cuIpcGetMemHandle: "
                                 f"{self._error(rc)}): {_NOT_EXPORTABLE}")
            known = (base.value, size.value, handle.raw[:HANDLE_BYTES])
            if buffer_id:  # (0: a driver without buffer ids, nothing to key on)
                with self._lock:
                    self._handles[buffer_id] = known
                    while len(self._handles) > HANDLE_CACHE_SIZE:
                        self._handles.popitem(last=False)
        base, size, handle = known
        if ptr + nbytes > base + size:
            raise ValueError(f"gpuscan: {what} ({nbytes} bytes at offset {ptr - base}) extends past its "
                             f"{size}-byte allocation")
        return Exported(handle, ptr - base)


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    """The process's Driver, made (libcuda loaded, cuInit) on first use."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver()
        return _driver
