"""Shared memory (header field 20, see SharedMemory in gpuscan.proto): numpy arrays in a region the
server maps, for clients on the server's host. No array crosses the connection: a call sends its
header alone, the server reads the input from the region file and writes the results into one.

A region is a file made here, in a directory the server reads as its --shm-dir (usually a
directory of /dev/shm), named gpuscan-<32 hex digits>, created exclusively (O_EXCL, O_NOFOLLOW),
mode 0600 unless asked otherwise, its size reserved up front (posix_fallocate: a full /dev/shm
fails here with OSError rather than with SIGBUS on the first write), and mapped MAP_SHARED. A
SharedArray is an ndarray over such a mapping. Whether an array travels by shared memory is
decided by where its memory lies, not by its type: `place` walks the array's .base chain (views,
slices, np.asarray, memoryviews) to the region's mapping and takes the byte offset from the data
pointers, so a contiguous slice of a shared array is shared too, and a copy is not.

Lifetime: close() (or leaving `with`) unlinks the file at once; the mapping stays valid while any
array still refers to it (numpy holds a buffer export of the mapping) and the kernel frees the
pages when the last one is collected. A region nobody closed is unlinked when its last array is
collected, and at interpreter exit. Regions made for results (scan without out=, compact) are such
regions: they live as long as the returned arrays.
"""
from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import secrets
import tempfile
import weakref
from typing import List, Optional, Tuple

import numpy as np

from ._chunking import reduce_value
from ._types import Timing, check_int
from .errors import Internal
from .v1 import gpuscan_pb2 as pb

# Where regions go when neither the caller nor the server names a directory: /dev/shm, or the
# temporary directory on a system (or container) without one.
DEFAULT_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_MODE = 0o600
REGION_PREFIX = "gpuscan-"


class _Mapping(mmap.mmap):
    """The MAP_SHARED mapping of one region file (an anonymous byte for an empty region: numpy
    needs a buffer, the file stays empty), with what names it on the wire. Every array of the
    region reaches it through .base; the file is unlinked when it is collected, or by close()."""

    def _setup(self, dir: str, name: str, nbytes: int, mode: int) -> None:
        self.dir = dir
        self.name = name
        self.path = os.path.join(dir, name)
        self.nbytes = nbytes
        self.mode = mode
        view = np.frombuffer(self, np.uint8)  # a transient export, for the address
        self.address = view.__array_interface__["data"][0]
        del view
        self._unlink = weakref.finalize(self, _unlink, self.path, os.getpid())

    @property
    def linked(self) -> bool:
        """The file has not been unlinked by close() (or collection)."""
        return self._unlink.alive

    def release(self) -> None:
        """Unlinks the file now (idempotent); the pages go with the last array of the mapping."""
        self._unlink()


def _unlink(path: str, pid: int) -> None:
    if os.getpid() != pid:  # a forked child exiting must not remove its parent's regions
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@dataclasses.dataclass(frozen=True)
class Place:
    """Where an array lies: its region and the byte offset of its first element there."""
    mapping: _Mapping
    offset: int

    @property
    def name(self) -> str:
        return self.mapping.name

    def same_as(self, other: "Place") -> bool:
        return self.mapping is other.mapping and self.offset == other.offset


def _mapping_of(x) -> Optional[_Mapping]:
    obj = x
    for _ in range(64):  # numpy collapses view chains; this only bounds a pathological one
        if isinstance(obj, _Mapping):
            return obj
        if isinstance(obj, np.ndarray):
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        else:
            return None
    return None


def place(x) -> Optional[Place]:
    """The region and byte offset of a C-contiguous array that lies in an open shared region, else
    None (then it is streamed like any array): a copy, a closed region, memory outside the file,
    an offset that is not a whole number of elements."""
    if not isinstance(x, np.ndarray) or not x.flags.c_contiguous:
        return None
    m = _mapping_of(x)
    if m is None or not m.linked:
        return None
    offset = x.__array_interface__["data"][0] - m.address
    if offset < 0 or offset + x.nbytes > m.nbytes or offset % max(x.itemsize, 1):
        return None
    return Place(m, offset)


class SharedArray(np.ndarray):
    """A numpy array in a shared-memory region (see the module's doc): made by
    Client.shared_array(n, dtype) or gpuscan.shared_array(n, dtype, dir=...). A context manager:
    leaving `with` closes the region. Views and slices are SharedArrays of the same region; arrays
    computed from it (a + 1, a.copy()) are plain ndarrays or, as with np.memmap, SharedArrays that
    lie in no region (`region` None), which calls stream."""

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        # As np.memmap: a ufunc's new result is a plain ndarray (a scalar for 0-d); out=self stays.
        arr = super().__array_wrap__(arr, context)
        if self is arr or type(self) is not SharedArray:
            return arr
        if return_scalar or arr.shape == ():
            return arr[()]
        return arr.view(np.ndarray)

    def __getitem__(self, index):
        res = super().__getitem__(index)
        if type(res) is SharedArray and _mapping_of(res) is None:
            return res.view(np.ndarray)  # fancy indexing: a copy
        return res

    @property
    def region(self) -> Optional[str]:
        """The region file's name (under its directory), or None when this array is not in an
        open region."""
        p = place(self)
        return p.name if p else None

    @property
    def path(self) -> Optional[str]:
        """The region file's path here, or None (see region)."""
        p = place(self)
        return p.mapping.path if p else None

    @property
    def offset(self) -> Optional[int]:
        """Byte offset of this array's first element in its region, or None (see region)."""
        p = place(self)
        return p.offset if p else None

    def close(self) -> None:
        """Closes the region this array lies in: the file is unlinked now (later calls with its
        arrays stream them), the memory is freed when the last array of the region is collected.
        Idempotent; nothing for an array in no region."""
        m = _mapping_of(self)
        if m is not None:
            m.release()

    def __enter__(self) -> "SharedArray":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create(n: int, dtype="int32", dir: str = DEFAULT_DIR, mode: int = DEFAULT_MODE, *,
           reserve: bool = True) -> SharedArray:
    """A new region of n elements of dtype in directory `dir` (file mode `mode`, set exactly,
    whatever the umask), as a SharedArray. reserve: allocate the pages now (posix_fallocate), so a
    full filesystem fails here with OSError; False leaves the file sparse (pages come as they are
    written: compaction's outputs, of which only the kept part is touched). Its contents start
    zeroed."""
    n = check_int(n, "a shared array's length", 0)
    dt = np.dtype(dtype)
    if dt.hasobject or dt.itemsize == 0:
        raise ValueError(f"gpuscan: dtype {dt} cannot live in shared memory")
    nbytes = n * dt.itemsize
    name = REGION_PREFIX + secrets.token_hex(16)
    path = os.path.join(dir, name)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise OSError(e.errno, f"gpuscan: cannot create a shared-memory region in {dir}: {e.strerror}",
                      path) from None
    try:
        os.fchmod(fd, mode)
        if nbytes:
            _size(fd, nbytes, reserve, dir)
            m = _Mapping(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        else:
            m = _Mapping(-1, 1)
        m._setup(dir, name, nbytes, mode)
    except BaseException:
        _unlink(path, os.getpid())
        raise
    finally:
        os.close(fd)
    return np.frombuffer(m, dt, count=n).view(SharedArray)


def _size(fd: int, nbytes: int, reserve: bool, dir: str) -> None:
    if reserve and hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, nbytes)
            return
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EFBIG):
                raise OSError(e.errno, f"gpuscan: no room for a {nbytes}-byte shared-memory region in {dir} "
                                       f"({e.strerror}; docker's default /dev/shm is 64 MiB: --shm-size)") from None
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
    os.ftruncate(fd, nbytes)


def default_dir(limits: dict) -> str:
    """Where Client.shared_array makes regions: the server's --shm-dir (ServerInfo.limits.shm_dir)
    when it serves shared memory, else DEFAULT_DIR (its calls then fail with FailedPrecondition)."""
    d = limits.get("shm_dir", "") if limits.get("shared_memory") else ""
    if not d:
        return DEFAULT_DIR
    if not os.path.isdir(d):
        raise ValueError(f"gpuscan: the server's --shm-dir {d} is not a directory here (another container?): "
                         "pass dir= where that directory is mounted in this one")
    return d


class Call:
    """One shared-memory call: its single request (the header alone), the checks of the final
    response, the regions it makes for its results (closed if the call fails) and its temporary
    regions (closed when it ends, whichever way). Use as a context manager around the call."""

    def __init__(self, request, src: Place, n: int, dtype: np.dtype):
        self.request = request
        self.sm = request.header.shared_memory
        self.sm.region = src.name
        self.sm.offset = src.offset
        self.sm.bytes = n * dtype.itemsize
        self.src = src
        self.n = n
        self.dtype = dtype
        self.timing: Optional[Timing] = None
        self.kept: Optional[int] = None
        self.result: Optional[np.ndarray] = None    # scan: the array returned
        self.values: Optional[SharedArray] = None   # compact: the kept values' region
        self.indices: Optional[SharedArray] = None  # compact: the kept indices' region
        self._outputs: List[SharedArray] = []
        self._temporaries: List[SharedArray] = []
        self.copy_back: Optional[Tuple[SharedArray, np.ndarray]] = None

    def region(self, n: int, dtype, temporary: bool = False, reserve: bool = True) -> Tuple[SharedArray, Place]:
        """A new region next to the input's (same directory and mode)."""
        m = self.src.mapping
        a = create(n, dtype, m.dir, m.mode, reserve=reserve)
        (self._temporaries if temporary else self._outputs).append(a)
        return a, place(a)

    def serialized(self) -> List[bytes]:
        return [self.request.SerializeToString()]

    def __enter__(self) -> "Call":
        return self

    def __exit__(self, et, ev, tb) -> None:
        for a in self._temporaries + (self._outputs if et is not None else []):
            a.close()

    def _counted(self, kind: str, element_count: int, timing) -> None:
        if element_count != self.n:
            raise Internal(f"server's {kind} counted {element_count} elements of a {self.n}-element shared array")
        self.timing = Timing.from_proto(timing)

    # -- the responses
    def feed_scan(self, raw: bytes) -> None:
        r = pb.ScanResponse.FromString(raw)
        if r.data:
            raise Internal("server streamed scan data back on a shared-memory call")
        if r.HasField("timing"):
            self._counted("scan", r.element_count, r.timing)

    def feed_compact(self, raw: bytes) -> None:
        r = pb.CompactResponse.FromString(raw)
        if r.values or r.indices:
            raise Internal("server streamed kept elements back on a shared-memory call")
        if r.HasField("timing"):
            self._counted("compact", r.element_count, r.timing)
            if r.kept_count > self.n:
                raise Internal(f"server kept {r.kept_count} of {self.n} elements")
            self.kept = r.kept_count

    def reduce_value(self, raw: bytes):
        """The ReduceResponse's value (a numpy scalar); keeps its Timing."""
        value, element_count, timing = reduce_value(raw, self.dtype)
        if element_count != self.n:
            raise Internal(f"server's reduce counted {element_count} elements of a {self.n}-element shared array")
        self.timing = timing
        return value

    def finish(self) -> Timing:
        """The final response's Timing (after the copy into a plain out=, if any)."""
        if self.timing is None:
            raise Internal("server ended a shared-memory call without its final response")
        if self.copy_back is not None:
            tmp, out = self.copy_back
            np.copyto(out, tmp, casting="equiv")
        return self.timing
