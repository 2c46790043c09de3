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

import collections
import ctypes
import dataclasses
import errno
import mmap
import os
import secrets
import tempfile
import threading
import weakref
from typing import Any, Deque, Dict, List, Optional, Tuple, cast

import numpy as np
import numpy.typing as npt

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
        self.arena: Optional["weakref.ref[Arena]"] = None  # set on an arena's regions

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
        """The region file's name."""
        return self.mapping.name

    def same_as(self, other: "Place") -> bool:
        """The same region and offset."""
        return self.mapping is other.mapping and self.offset == other.offset


def _mapping_of(x: Any) -> Optional[_Mapping]:
    obj = x
    for _ in range(64):  # numpy collapses view chains; this only bounds a pathological one
        if isinstance(obj, _Mapping):
            return obj
        if isinstance(obj, np.ndarray):
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        elif isinstance(obj, ctypes.Array):  # an arena's piece (Arena.carve)
            obj = getattr(obj, "gpuscan_mapping", None)
        else:
            return None
    return None


def place(x: Any) -> Optional[Place]:
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


class SharedArray(np.ndarray):  # type: ignore[type-arg]
    """A numpy array in a shared-memory region (see the module's doc): made by
    Client.shared_array(n, dtype) or gpuscan.shared_array(n, dtype, dir=...). A context manager:
    leaving `with` closes the region. Views and slices are SharedArrays of the same region; arrays
    computed from it (a + 1, a.copy()) are plain ndarrays or, as with np.memmap, SharedArrays that
    lie in no region (`region` None), which calls stream."""

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        # As np.memmap: a ufunc's new result is a plain ndarray (a scalar for 0-d); out=self stays.
        arr = super().__array_wrap__(arr, context)
        if self is arr or type(self) is not SharedArray:
            return arr
        if return_scalar or arr.shape == ():
            return arr[()]
        return arr.view(np.ndarray)

    def __getitem__(self, index: Any) -> Any:
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
        Idempotent; nothing for an array in no region. An array carved from a client's arena
        (Client.shared_array) shares its region with others: closing it does nothing, its piece
        goes back to the arena when its last view is collected."""
        m = _mapping_of(self)
        if m is not None and m.arena is None:
            m.release()

    def __enter__(self) -> "SharedArray":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def create(n: int, dtype: npt.DTypeLike = "int32", dir: str = DEFAULT_DIR, mode: int = DEFAULT_MODE, *,
           reserve: bool = True) -> SharedArray:
    """A new region of n elements of dtype in directory `dir` (file mode `mode`, set exactly,
    whatever the umask), as a SharedArray. reserve: allocate the pages now (posix_fallocate), so a
    full filesystem fails here with OSError; False leaves the file sparse (pages come as they are
    written: compaction's outputs, of which only the kept part is touched). Its contents start
    zeroed."""
    n = check_int(n, "a shared array's length", 0)
    dt = _element_type(dtype)
    m = _new_region(n * dt.itemsize, dir, mode, reserve)
    return np.frombuffer(m, dt, count=n).view(SharedArray)


def _element_type(dtype: npt.DTypeLike) -> np.dtype[Any]:
    dt = np.dtype(dtype)
    if dt.hasobject or dt.itemsize == 0:
        raise ValueError(f"gpuscan: dtype {dt} cannot live in shared memory")
    return dt


def _new_region(nbytes: int, dir: str, mode: int, reserve: bool, populate: bool = False) -> _Mapping:
    """A new region file of nbytes in dir, mapped (populate: its pages faulted in now)."""
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
            flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
            m = _Mapping(fd, nbytes, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        else:
            m = _Mapping(-1, 1)
        m._setup(dir, name, nbytes, mode)
    except BaseException:
        _unlink(path, os.getpid())
        raise
    finally:
        os.close(fd)
    return m


class Arena:
    """A client's shared-memory arena: a few regions made once, out of which arrays are carved
    (Client.shared_array, and the results of shared-memory calls on them) and to which each array
    returns when its last view is collected. Calls on arena arrays say so (SharedMemory.arena):
    the server maps and registers each region for DMA on its first call and keeps it, so a fresh
    array costs no mapping, no registration and no page faults there, and here its pages were
    faulted in when its region was made (MAP_POPULATE). The first region holds initial_bytes, or
    four times the first array (an input, its result and compaction's int64 indices); each later
    one as much as all before it, or the array if larger. Pieces start on 4 KiB pages.
    Thread-safe. close() unlinks the regions: their arrays stay valid memory but calls stream them."""

    ALIGN = 1 << 12

    def __init__(self, dir: str = DEFAULT_DIR, mode: int = DEFAULT_MODE, initial_bytes: Optional[int] = None):
        self.dir, self.mode = dir, mode
        self.initial_bytes = None if initial_bytes is None else check_int(initial_bytes, "initial_bytes", 1)
        self._lock = threading.Lock()
        self._regions: List[_ArenaRegion] = []
        # Pieces come back through finalizers, which may run inside carve (a collection there):
        # they only append here, and carve takes them under its lock.
        self._returned: Deque[Tuple[_ArenaRegion, int, int]] = collections.deque()
        self._closed = False

    @property
    def nbytes(self) -> int:
        """Bytes of the arena's regions."""
        return sum(r.mapping.nbytes for r in self._regions)

    @property
    def regions(self) -> List[str]:
        """The region files' names."""
        return [r.mapping.name for r in self._regions]

    def free_bytes(self) -> int:
        """Bytes not carved out now (collected pieces counted once taken back)."""
        with self._lock:
            self._take_back()
            return sum(size for r in self._regions for _, size in r.free)

    def carve(self, n: int, dtype: npt.DTypeLike = "int32", zero: bool = True) -> SharedArray:
        """n elements of dtype out of the arena (a new region when no free piece fits). zero: the
        contents start zeroed (a reused piece is cleared; memory never handed out is zero already);
        False leaves a reused piece's old bytes, for arrays about to be overwritten."""
        n = check_int(n, "a shared array's length", 0)
        dt = _element_type(dtype)
        nbytes = n * dt.itemsize
        size = max(self.ALIGN, -(-nbytes // self.ALIGN) * self.ALIGN)
        with self._lock:
            if self._closed:
                raise ValueError("gpuscan: the shared-memory arena is closed (its client was closed)")
            self._take_back()
            for region in self._regions:
                at = region.take(size) if region.usable() else None
                if at is not None:
                    break
            else:
                want = self.initial_bytes or 4 * size
                region = _ArenaRegion(_new_region(max(size, want, self.nbytes), self.dir, self.mode, True, True),
                                      self)
                self._regions.append(region)
                at = region.take(size)
            offset, dirty = cast(Tuple[int, int], at)
        piece: Any = (ctypes.c_char * size).from_buffer(region.mapping, offset)
        piece.gpuscan_mapping = region.mapping
        weakref.finalize(piece, self._returned.append, (region, offset, size))
        a = np.frombuffer(piece, dt, count=n).view(SharedArray)
        if zero and dirty:
            np.frombuffer(piece, np.uint8, count=min(nbytes, dirty))[:] = 0
        return a

    def close(self) -> None:
        """Unlinks the regions (idempotent): arrays already carved stay valid, calls stream them."""
        with self._lock:
            self._closed = True
            for r in self._regions:
                r.mapping.release()

    def _take_back(self) -> None:
        while self._returned:
            region, offset, size = self._returned.popleft()
            region.give(offset, size)


class _ArenaRegion:
    """One region of an arena and its free pieces: [offset, size] runs, sorted and merged."""

    def __init__(self, mapping: _Mapping, arena: Arena):
        self.mapping = mapping
        mapping.arena = weakref.ref(arena)
        self.free: List[List[int]] = [[0, mapping.nbytes]]
        self.touched = 0  # bytes from the start ever handed out: beyond them the file is still zero

    def usable(self) -> bool:
        """Still carved from: not unlinked, here or by anyone else (its arrays would stream)."""
        if self.mapping.linked and not os.path.exists(self.mapping.path):
            self.mapping.release()
        return self.mapping.linked

    def take(self, size: int) -> Optional[Tuple[int, int]]:
        """First fit: (offset, how many of its first bytes were handed out before), or None."""
        for i, (offset, free) in enumerate(self.free):
            if free >= size:
                if free == size:
                    del self.free[i]
                else:
                    self.free[i] = [offset + size, free - size]
                dirty = max(0, min(self.touched, offset + size) - offset)
                self.touched = max(self.touched, offset + size)
                return offset, dirty
        return None

    def give(self, offset: int, size: int) -> None:
        """Returns the piece [offset, offset + size) to the free runs, merged with its neighbours."""
        runs = self.free
        i = 0
        while i < len(runs) and runs[i][0] < offset:
            i += 1
        runs.insert(i, [offset, size])
        if i + 1 < len(runs) and runs[i][0] + runs[i][1] == runs[i + 1][0]:  # merge with the next
            runs[i][1] += runs.pop(i + 1)[1]
        if i > 0 and runs[i - 1][0] + runs[i - 1][1] == runs[i][0]:  # and with the previous
            runs[i - 1][1] += runs.pop(i)[1]


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


def default_dir(limits: Dict[str, Any]) -> str:
    """Where Client.shared_array makes regions: the server's --shm-dir (ServerInfo.limits.shm_dir)
    when it serves shared memory, else DEFAULT_DIR (its calls then fail with FailedPrecondition)."""
    d = limits.get("shm_dir", "") if limits.get("shared_memory") else ""
    if not d:
        return DEFAULT_DIR
    if not os.path.isdir(d):
        raise ValueError(f"gpuscan: the server's --shm-dir {d} is not a directory here (another container?): "
                         "pass dir= where that directory is mounted in this one")
    return cast(str, d)


class Call:
    """One shared-memory call: its single request (the header alone), the checks of the final
    response, the regions it makes for its results (closed if the call fails) and its temporary
    regions (closed when it ends, whichever way). Use as a context manager around the call."""

    def __init__(self, request: Any, src: Place, n: int, dtype: np.dtype[Any]):
        self.request = request
        self.sm = request.header.shared_memory
        self.sm.region = src.name
        self.sm.offset = src.offset
        self.sm.bytes = n * dtype.itemsize
        arena = src.mapping.arena() if src.mapping.arena is not None else None
        self.arena: Optional[Arena] = arena if arena is not None and not arena._closed else None
        self.sm.arena = self.arena is not None
        self.src = src
        self.n = n
        self.dtype = dtype
        self.timing: Optional[Timing] = None
        self.kept: Optional[int] = None
        self.result: Optional[npt.NDArray[Any]] = None    # scan: the array returned
        self.values: Optional[SharedArray] = None   # compact: the kept values' region
        self.indices: Optional[SharedArray] = None  # compact: the kept indices' region
        self._outputs: List[SharedArray] = []
        self._temporaries: List[SharedArray] = []
        self.copy_back: Optional[Tuple[SharedArray, npt.NDArray[Any]]] = None

    def region(self, n: int, dtype: npt.DTypeLike, temporary: bool = False,
               reserve: bool = True) -> Tuple[SharedArray, Place]:
        """A new array for the call's results: out of the input's arena when it has one (its old
        bytes left: the server writes it), else a new region next to the input's (same directory
        and mode)."""
        m = self.src.mapping
        if self.arena is not None:
            a = self.arena.carve(n, dtype, zero=False)
        else:
            a = create(n, dtype, m.dir, m.mode, reserve=reserve)
        (self._temporaries if temporary else self._outputs).append(a)
        return a, cast(Place, place(a))

    def serialized(self) -> List[bytes]:
        """The call's one request, serialized."""
        return [self.request.SerializeToString()]

    def __enter__(self) -> "Call":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        for a in self._temporaries + (self._outputs if et is not None else []):
            a.close()

    def _counted(self, kind: str, element_count: int, timing: Any) -> None:
        if element_count != self.n:
            raise Internal(f"server's {kind} counted {element_count} elements of a {self.n}-element shared array")
        self.timing = Timing.from_proto(timing)

    # -- the responses
    def feed_scan(self, raw: bytes) -> None:
        """Checks a ScanResponse of the call (no data: the results are in the region)."""
        r = pb.ScanResponse.FromString(raw)
        if r.data:
            raise Internal("server streamed scan data back on a shared-memory call")
        if r.HasField("timing"):
            self._counted("scan", r.element_count, r.timing)

    def feed_compact(self, raw: bytes) -> None:
        """Checks a CompactResponse of the call and keeps its kept count."""
        r = pb.CompactResponse.FromString(raw)
        if r.values or r.indices:
            raise Internal("server streamed kept elements back on a shared-memory call")
        if r.HasField("timing"):
            self._counted("compact", r.element_count, r.timing)
            if r.kept_count > self.n:
                raise Internal(f"server kept {r.kept_count} of {self.n} elements")
            self.kept = r.kept_count

    def reduce_value(self, raw: bytes) -> Any:
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
