"""The native data path (a Client's default where this library loads; see Client's `native`): the
C++ client's scan, reduce and compact through its C API (libgpuscan_capi.so, client/capi),
called with ctypes. ctypes lets go of the GIL for the whole call, so the array's bytes move, and striped
lanes run, at the C++ client's speed instead of grpcio's in one Python thread. Where the library
is looked for: see candidates() ($GPUSCAN_NATIVE_LIB, else beside this module, a checkout's build
tree, the install prefixes' lib). Only plain arrays in memory take it: shared memory, scan_iter,
in-place scans and clients with TLS or custom credentials stay on the grpcio path.

Every C API call takes its own deadline (timeout_ms): a call's timeout= goes through it (see
NativeClient.timed), so a call with a timeout of its own takes this path too. A library whose
gpuscan_capi_version() is not CAPI_VERSION (an older build: its calls take no timeout_ms) is not
loaded, and the client says why (data_path).

A call runs on a helper thread while the calling thread waits on it, so that Ctrl-C reaches the
caller at once (a signal only runs Python's handler between bytecodes, never inside a C call):
the handle's calls in flight are then cancelled (gpuscan_cancel_calls), the helper is joined and
the KeyboardInterrupt goes on."""
from __future__ import annotations

import copy
import ctypes
import os
import queue
import sys
import threading
import warnings
from typing import List, Optional, Tuple

import grpc
import numpy as np

from . import _pump
from ._types import Timing
from .errors import error_for

_LIB_NAME = "libgpuscan_capi.so"
_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path = ""  # the file _lib was loaded from
_why = ""


class _Options(ctypes.Structure):  # gpuscan_options
    _fields_ = [("target", ctypes.c_char_p), ("chunk_bytes", ctypes.c_uint64), ("timeout_ms", ctypes.c_int64),
                ("lanes", ctypes.c_uint32), ("attempts", ctypes.c_uint32), ("backoff_initial_ms", ctypes.c_int64),
                ("backoff_max_ms", ctypes.c_int64), ("load_balancing_policy", ctypes.c_char_p)]


_COUNTS = ("receive_us", "queue_us", "h2d_us", "kernel_us", "d2h_us", "send_us", "total_us", "bytes_in", "bytes_out",
           "chunks")


class _Timing(ctypes.Structure):  # gpuscan_timing
    _fields_ = [(n, ctypes.c_uint64) for n in _COUNTS] + [
        ("engine", ctypes.c_char * 32), ("device", ctypes.c_char * 128), ("algorithm", ctypes.c_char * 64)]

    def to_timing(self) -> Timing:
        counts = {n: int(getattr(self, n)) for n in _COUNTS}
        names = {n: getattr(self, n).decode(errors="replace") for n in ("engine", "device", "algorithm")}
        return Timing(**counts, **names)


def candidates() -> List[str]:
    """The files library() tries, in order: $GPUSCAN_NATIVE_LIB alone when it is set; else
    libgpuscan_capi.so beside this module (CMake's copy in build/python/pkg/gpuscan, or the one
    `pip install ./python` shipped after `make`), in the build tree of the checkout this module
    lives in (python/gpuscan -> build/python/pkg/gpuscan), then in the lib directory of this
    Python's prefix, of the prefix a venv was made from (/usr: the libgpuscan-dev package's), and
    of /usr/local (where `cmake --install` puts it)."""
    env = os.environ.get("GPUSCAN_NATIVE_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]
    if os.path.isfile(os.path.join(here, "..", "setup.py")):  # python/gpuscan of a checkout
        dirs.append(os.path.join(here, "..", "..", "build", "python", "pkg", "gpuscan"))
    dirs += [os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib"), "/usr/local/lib"]
    seen, out = set(), []
    for d in dirs:
        path = os.path.normpath(os.path.join(d, _LIB_NAME))
        if path not in seen:
            seen.add(path)
            out.append(path)
    return out


def _declare(lib: ctypes.CDLL) -> None:
    """The C API's signatures (AttributeError: a library without one of its functions)."""
    lib.gpuscan_capi_version.restype = ctypes.c_int
    lib.gpuscan_capi_version.argtypes = []
    if lib.gpuscan_capi_version() != CAPI_VERSION:
        raise AttributeError(f"its gpuscan_capi_version() is {lib.gpuscan_capi_version()}, this package calls "
                             f"version {CAPI_VERSION} (rebuild the library with this package's sources)")
    lib.gpuscan_client_new.restype = ctypes.c_void_p
    lib.gpuscan_client_new.argtypes = [ctypes.POINTER(_Options), ctypes.c_char_p, ctypes.c_size_t]
    lib.gpuscan_client_free.argtypes = [ctypes.c_void_p]
    lib.gpuscan_cancel_calls.argtypes = [ctypes.c_void_p]
    lib.gpuscan_scan.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                                 ctypes.POINTER(_Timing), ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    lib.gpuscan_scan_header.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                        ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(_Timing),
                                        ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    lib.gpuscan_reduce.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                   ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p,
                                   ctypes.POINTER(_Timing), ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    lib.gpuscan_compact.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                    ctypes.POINTER(_Timing), ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
    lib.gpuscan_header_call.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                        ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]


CAPI_VERSION = 2  # gpuscan_capi.h's GPUSCAN_CAPI_VERSION: the signatures declared above


# gpuscan_header_call's RPCs (GPUSCAN_RPC_* of gpuscan_capi.h).
RPC_SCAN, RPC_REDUCE, RPC_COMPACT = 0, 1, 2
RPC_HISTOGRAM, RPC_SORT, RPC_SEGMENTED_SCAN = 3, 4, 5


def find(paths: List[str]) -> Tuple[Optional[ctypes.CDLL], str, str]:
    """(the library, its path, "") from the first of `paths` that loads, else (None, "", why not:
    each path that exists and failed, or that none exists)."""
    failed = []
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
            return lib, os.path.realpath(path), ""
        except (OSError, AttributeError) as e:
            failed.append(f"{path}: {e}")
    if failed:
        return None, "", "; ".join(failed)
    return None, "", f"{_LIB_NAME} not found (looked at {', '.join(paths)}; GPUSCAN_NATIVE_LIB names the file to use)"


class NativeUnavailableWarning(RuntimeWarning):
    """The native data path could not be loaded: clients take grpcio (slower for large arrays)."""


def library() -> Tuple[Optional[ctypes.CDLL], str]:
    """The loaded C API, or None and why not (looked for once: see candidates()). The first
    failure warns once per process (NativeUnavailableWarning: pip hides what setup.py prints
    unless -v, so this is where an installation without the library says so); GPUSCAN_NATIVE=0
    or a client's native=False do not look, and do not warn."""
    global _lib, _path, _why
    with _lock:
        if _lib is None and not _why:
            _lib, _path, _why = find(candidates())
            if _lib is None:
                warnings.warn(f"gpuscan: the native data path is off, clients take grpcio: {_why}. Build the C API "
                              "(make, or the libgpuscan-dev package) and reinstall, or set GPUSCAN_NATIVE_LIB; "
                              "GPUSCAN_NATIVE=0 turns the path off without this warning",
                              NativeUnavailableWarning, stacklevel=3)
        return _lib, _why


def library_path() -> Optional[str]:
    """The file the C API was loaded from (None: not loaded)."""
    return _path if library()[0] is not None else None


class NativeClient:
    """One C API handle: its channel and lane connections live until close()."""

    def __init__(self, target: str, chunk_bytes: int, timeout: Optional[float], lanes: int, retries: int,
                 backoff: Tuple[float, float], load_balancing_policy: Optional[str]):
        lib, why = library()
        if lib is None:
            raise ValueError(f"gpuscan: native=True but the C API cannot be loaded ({why}); build the package "
                             "with CMake, or set GPUSCAN_NATIVE_LIB")
        self._lib = lib
        opts = _Options(target.encode(), chunk_bytes, int(round((timeout or 0) * 1000)), lanes, retries + 1,
                        int(backoff[0] * 1000), int(backoff[1] * 1000),
                        load_balancing_policy.encode() if load_balancing_policy else None)
        err = ctypes.create_string_buffer(512)
        self._handle = lib.gpuscan_client_new(ctypes.byref(opts), err, len(err))
        if not self._handle:
            raise ValueError(f"gpuscan: {err.value.decode(errors='replace')}")
        self._timeout_ms = 0  # each call's timeout_ms: 0 the handle's (see timed)

    def timed(self, timeout: Optional[float]) -> "NativeClient":
        """This handle with its calls' deadline `timeout` seconds (None: none): a view sharing the
        handle (close() the original only), for one call's timeout= (the client's or its own)."""
        view = copy.copy(self)
        view._timeout_ms = -1 if timeout is None else max(1, int(round(timeout * 1000)))
        return view

    def _run(self, fn, *args) -> int:
        """fn(*args) (a C API call) on a helper thread; see the module's docstring. The calling
        thread waits on a SimpleQueue: an interrupted threading.Event or Thread.join can leave its
        lock held (the next wait hangs) or report the thread done while it runs (CPython 3.11),
        and the call writes into the caller's arrays until it ends."""
        result: list = []  # the call's return value or exception, once it ended
        done: "queue.SimpleQueue" = queue.SimpleQueue()

        def call() -> None:
            try:
                result.append(fn(*args))
            except BaseException as e:  # noqa: B036 - handed to the caller's thread
                result.append(e)
            done.put(True)
        threading.Thread(target=call, name="gpuscan-native", daemon=True).start()
        try:
            _pump.wait(done)  # Ctrl-C interrupts it
        except BaseException:
            self._lib.gpuscan_cancel_calls(self._handle)  # a C call: no interrupt lands inside it
            # The call ends soon, cancelled; until then it owns the arrays. `result`, not the
            # queue, says when: the interrupt may have come just after wait() took the item.
            while not result:
                try:
                    done.get(timeout=0.05)
                except (queue.Empty, KeyboardInterrupt):
                    pass
            raise
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    @staticmethod
    def _check(code: int, err) -> None:
        if code != 0:
            status = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
            raise error_for(status, err.value.decode(errors="replace"))

    def scan(self, x: np.ndarray, out: np.ndarray, dtype: int, op: int, exclusive: bool, algorithm: int,
             lanes: int) -> Timing:
        t, err = _Timing(), ctypes.create_string_buffer(1024)
        code = self._run(self._lib.gpuscan_scan, self._handle, dtype, op, int(exclusive), algorithm, x.ctypes.data,
                         out.ctypes.data, len(x), lanes, ctypes.byref(t), self._timeout_ms, err, len(err))
        self._check(code, err)
        return t.to_timing()

    def scan_header(self, x: np.ndarray, out: np.ndarray, header: bytes) -> Timing:
        """A scan whose serialized ScanHeader is given (a narrow x and its output dtype): one
        stream, results into out."""
        t, err = _Timing(), ctypes.create_string_buffer(1024)
        code = self._run(self._lib.gpuscan_scan_header, self._handle, header, len(header), x.ctypes.data, x.nbytes,
                         out.ctypes.data, out.nbytes, ctypes.byref(t), self._timeout_ms, err, len(err))
        self._check(code, err)
        return t.to_timing()

    def reduce(self, x: np.ndarray, dtype: int, op: int, lanes: int) -> Tuple[np.generic, Timing]:
        t, err = _Timing(), ctypes.create_string_buffer(1024)
        value = np.zeros(1, x.dtype.newbyteorder("="))
        code = self._run(self._lib.gpuscan_reduce, self._handle, dtype, op, x.ctypes.data, len(x), lanes,
                         value.ctypes.data, ctypes.byref(t), self._timeout_ms, err, len(err))
        self._check(code, err)
        return value[0], t.to_timing()

    def compact(self, x: np.ndarray, header: bytes, flags: Optional[np.ndarray], values: bool, indices: bool,
                lanes: int) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Timing]:
        """header: a serialized CompactHeader. Kept values and indices are written into arrays of
        len(x) elements, then shrunk to what was kept (in place: no copy)."""
        t, err, kept = _Timing(), ctypes.create_string_buffer(1024), ctypes.c_uint64(0)
        v = np.empty(len(x), x.dtype.newbyteorder("=")) if values else None
        i = np.empty(len(x), np.int64) if indices else None
        code = self._run(self._lib.gpuscan_compact, self._handle, header, len(header), x.ctypes.data,
                         flags.ctypes.data if flags is not None else None, len(x), lanes,
                         v.ctypes.data if v is not None else None, i.ctypes.data if i is not None else None,
                         ctypes.byref(kept), ctypes.byref(t), self._timeout_ms, err, len(err))
        self._check(code, err)
        for a in (v, i):
            if a is not None:
                a.resize(kept.value, refcheck=False)
        return v, i, t.to_timing()

    def header_call(self, rpc: int, request: bytes, interruptible: bool = True,
                    response_bytes: int = 64 << 10) -> bytes:
        """A call whose header says where its arrays lie (device or shared memory): the header
        goes with the half-close and the final response (serialized, at most response_bytes)
        comes back. Not interruptible: called on this thread (ctypes lets the GIL go meanwhile),
        sparing _run's thread (~0.1 ms), for calls that end in milliseconds (arrays on the
        device); Ctrl-C then lands when the call returns."""
        out, size, err = (ctypes.create_string_buffer(response_bytes), ctypes.c_size_t(0),
                          ctypes.create_string_buffer(1024))
        args = (self._handle, rpc, request, len(request), out, len(out), ctypes.byref(size), self._timeout_ms, err,
                len(err))
        fn = self._lib.gpuscan_header_call
        code = self._run(fn, *args) if interruptible else fn(*args)
        self._check(code, err)
        return out.raw[:size.value]

    def close(self) -> None:
        if self._handle:
            self._lib.gpuscan_client_free(self._handle)
            self._handle = None
