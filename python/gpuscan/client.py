"""gpuscan.Client: the synchronous client (one grpc channel, plus one per lane for striped calls;
thread-safe, calls may run concurrently). Mirrors client/include/gpuscan/client.h: numpy arrays in,
numpy arrays and scalars out, every failure a gpuscan.Error. Each operation is checked and built
in _ops and run by the transport _transport picks; this client runs a call's effects (_effects)
blocking: grpcio's calls (_blocking), the C API (_native), the waits between retries."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple, Union, cast

import grpc
import numpy.typing as npt

from . import _blocking, _chunking, _native, _ops, _pump, _resident, _retry, _tally, _transport, _types, shared
from ._base import ClientBase
from ._channel import Tls as Tls, channel_args, channel_credentials, decode_health_response, encode_health_request
from ._channel import sleep_watching
from ._effects import STREAMED_REPLY, UNARY, Call, HeaderOnly, Info, Lanes, Native, Program, Retry, Single
from ._effects import NATIVE_RESPONSE_BYTES  # noqa: F401 (gpuscan.client's name, which tests size bins by)
from ._types import DataPath, HistogramResult, Timing, TransportResult
from .errors import Internal, raised
from .v1 import gpuscan_pb2 as pb

DEFAULT_CHUNK_BYTES = 1 << 20


class Client(ClientBase):
    """Synchronous gpuscan client.

    Client(target, *, tls=None|True|Tls(...), timeout=None (seconds per call), lanes=1,
           chunk_bytes=1 MiB, credentials=None, load_balancing_policy=None, options=None,
           retries=2, backoff=(0.1, 2.0), on_retry=None, native=None, shm_arena_bytes=None, tenant=None)

    tenant="name": sent as gpuscan-tenant metadata on every call: the owner of the resident arrays it
    puts, the only one that finds them (None: the default; mTLS: the certificate's identity instead).

    lanes=K (or a call's lanes=K): scan/reduce/compact stripe an array over K concurrent calls, each
    on its own connection (chunk i on lane i mod K), capped by the server's Limits.max_lanes and
    the array's chunk count; one call when the server does not join lanes (max_lanes 0).
    Results are exactly those of one call.

    retries=N (or a call's retries=N; default 2, as the CLI's and the C++ client's; 0 turns them
    off): scan/reduce/compact/histogram of arrays in memory that fail
    with UNAVAILABLE (the server died, restarted, is shutting down or unreachable), or with a
    CANCELLED from the server's end, are tried up to N more times, each try a new call on the
    channel (with lanes: the whole striped call), after waits of backoff[0] seconds doubling per
    try up to backoff[1] (+-20% jitter). timeout covers every try and wait; when the tries run
    out the last error is raised, its message ending "(gave up after N tries)". Not retried:
    other errors, scan_iter, shared-memory calls and in-place scans (out=x). on_retry(error,
    next_attempt, wait_s) is called before each wait.

    native: scan, reduce and compact of plain arrays go through the C++ client (its C API, loaded with ctypes; see
    gpuscan._native), outside the GIL: one stream and lanes then move data as the C++ client does. Same results,
    Timing, errors and retries (a call with an on_retry, or its own retries=, stays on grpcio); Ctrl-C cancels the
    client's native calls in flight. None (the default): on where the library loads and the client speaks plaintext
    with no `credentials` or `options`, else off (the environment's GPUSCAN_NATIVE=0 or 1 overrides it); True:
    required (ValueError where it cannot be, as with tenant=: the C API sends no metadata); False: off. `data_path`
    (and info()["data_path"]) says which path the client took: "native" and the library's file, or "grpcio" and why
    (see gpuscan._native.candidates for where the library is looked for).
    Streamed histograms and sorts (the other operations too), scan_iter and in-place scans of host arrays use grpcio;
    calls that send their header alone (shared memory; CUDA arrays: scan, reduce, compact, histogram, sort; a
    RemoteArray's reduce and kept results) go through the C API's gpuscan_header_call. A call's own timeout= goes
    through the C API too (each of its calls takes a deadline).

    timeout= on every call (None: the client's timeout; 0: none): that call's seconds, every try
    and wait included; past it, gpuscan.DeadlineExceeded.
    """

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: Union[None, bool, Tls] = None,
                 timeout: Optional[float] = None, lanes: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 credentials: Optional[grpc.ChannelCredentials] = None, load_balancing_policy: Optional[str] = None,
                 options: Union[None, Dict[str, Any], Iterable[Tuple[str, Any]]] = None, retries: int = 2,
                 backoff: Tuple[float, float] = (0.1, 2.0), on_retry: Optional[_retry.OnRetry] = None,
                 native: Optional[bool] = None, shm_arena_bytes: Optional[int] = None,
                 tenant: Optional[str] = None) -> None:
        self._init_common(target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry, shm_arena_bytes,
                          tenant)
        args = channel_args(self.chunk_bytes, load_balancing_policy, options, tls)
        creds = channel_credentials(tls, credentials)
        why_not = "native=False"
        env = os.environ.get("GPUSCAN_NATIVE", "")
        if native is None and env in ("0", "1"):
            native, why_not = env == "1", f"GPUSCAN_NATIVE={env} in the environment"
        auto = native is None  # wherever it can serve this client as configured
        if auto:
            lib, why_lib = _native.library()
            why_not = ("tls/credentials: the native path speaks plaintext gRPC" if creds is not None else
                       "options=: grpc channel options apply to grpcio's channel only" if options else
                       "tenant=: the C API sends no request metadata" if self._metadata else
                       f"no C API: {why_lib}" if lib is None else "")
            native = not why_not
        if native:
            if creds is not None or self._metadata:
                raise ValueError("gpuscan: native=True speaks plaintext gRPC without metadata: it takes no tls, "
                                 "credentials or tenant")
            try:
                self._native = _native.NativeClient(target, self.chunk_bytes, self.timeout, self.lanes, self.retries,
                                                    self.backoff, load_balancing_policy)
            except ValueError as e:
                if not auto:
                    raise  # (auto: a target the C++ client refuses is left to grpcio, which says why)
                why_not = f"the C++ client refused the target: {e}"
        self._data_path = (DataPath("native", library=_native.library_path()) if self._native is not None
                           else DataPath("grpcio", reason=why_not))
        self._bind(creds, args, options, tls)
        self._local = threading.local()

    # -- lifecycle
    def close(self) -> None:
        """Closes the channels (the lanes' too) and the native handle; calls in flight are cancelled.
        The shared-memory arena's files are unlinked: its arrays stay valid, calls stream them."""
        self._close_arenas()
        if self._native is not None:
            self._native.close()
        self._channel.close()
        for ch in self._take_lane_channels():
            ch.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def last_timing(self) -> Optional[Timing]:
        """The server's Timing of this thread's last completed call (None before one)."""
        return getattr(self._local, "timing", None)

    def _set_timing(self, t: Optional[Timing]) -> None:
        self._local.timing = t

    # -- running a call's program: each effect blocking
    def _drive(self, program: Program) -> Any:
        stepper, effect = self._stepper(program)
        while not stepper.done:
            value, error = None, None
            try:
                value = self._effect(effect)
            except BaseException as e:  # raised inside the program, where its `with` blocks see it
                error = e
            effect = stepper.step(value, error)
        return stepper.result

    def _effect(self, e: Any) -> Any:
        if isinstance(e, Call):
            _blocking.call(self._methods[e.method], e.method in UNARY, e.requests, e.timeout, e.feed, self._metadata)
        elif isinstance(e, Lanes):
            _chunking.fan_out(list(zip(self._lanes(len(e.requests), e.method), e.requests)), e.feed, e.timeout,
                              unary=e.method in UNARY, metadata=self._with_tenant(e.metadata))
        elif isinstance(e, HeaderOnly):
            # Through the C API where it loaded (the call's timeout with it): one write with the
            # half-close and one read on its thread, about 0.7 ms less than grpcio's request and
            # response threads.
            if self._native is not None:
                e.feed(0, self._native.timed(e.timeout).header_call(e.rpc, e.request, interruptible=e.interruptible,
                                                                    response_bytes=e.room))
            else:
                _blocking.call(self._methods[e.method], e.method in UNARY, [e.request], e.timeout, e.feed,
                               self._metadata)
        elif isinstance(e, Single):
            method = self._methods[e.method]
            if e.method in STREAMED_REPLY:
                # through _blocking.stream with its one request bound and nothing to upload
                for raw in _blocking.stream(lambda _, **kw: method(e.request, **kw), (), e.timeout, self._metadata):
                    e.feed(0, raw)
            else:
                with raised():
                    e.feed(0, _pump.unary(method, e.request, e.timeout, self._metadata))
        elif isinstance(e, Info):
            return self._info_message(e.timeout) if e.message else self._info(e.timeout)
        elif isinstance(e, Native):
            return e.run(self._native)
        elif isinstance(e, Retry):
            return _retry.run(self._tries(e.retries, e.timeout), lambda t: cast(object, self._drive(e.attempt(t))),
                              self._pause)
        else:
            raise TypeError(f"gpuscan: no such effect {e!r}")
        return None

    def _pause(self, seconds: float) -> None:
        """The wait before a retry, watching the channels (see _channel.sleep_watching)."""
        with self._lane_lock:
            channels = [self._channel, *self._lane_channels]
        sleep_watching(channels, seconds)

    # -- typed API: each method's arguments are checked and its requests built in _ops, and the
    # call runs on the transport _transport picks. AsyncClient's methods share these docstrings.
    def scan(self, x: Any, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None,
             out: Any = None, *, axis: Optional[int] = None, dtype: npt.DTypeLike = None, copy: bool = False,
             lanes: Optional[int] = None, retries: Optional[int] = None, timeout: Optional[float] = None,
             keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None, carry: Any = None) -> Any:
        """Prefix scan of a 1-D array (inclusive unless exclusive=True); returns `out` (new if None).
        dtype: the accumulator and result dtype, as np.cumsum's. A narrow x (int8, uint8, int16,
        uint16, bool, float16) travels as it is (1-2 bytes an element) and the server accumulates
        it in dtype, by default numpy's: int64 for int8/int16/bool, uint64 for uint8/uint16,
        float16 for float16 (accumulated in float32 and each result rounded once, so at least as
        close as numpy's, whose every partial sum is rounded to float16: the bits may differ).
        Outputs of 4 or 8 bytes (float16 too for float16). A 4- or 8-byte x with another dtype is
        converted here first, as numpy does. Narrow calls stream on one connection (no lanes, no
        shared or device memory; out= of the result dtype).
        axis: as np.cumsum's. None scans the array flat (an N-D host array in C order, as numpy
        does: a view when C-contiguous, else with copy=True). 0 or 1 of a 2-D host array scans each
        column (0) or each row (1) on its own: every operator, exclusive too, each row or column
        folded in order, so float bits equal np.cumsum(x, axis=...)'s for "sum"; out= of x's shape
        (and of the result dtype); the matrix streams in chunk_bytes pieces and rows come back
        whole; algorithm= and lanes do not apply (Unimplemented from a server without
        info()["operations"] "scan_axis"). A narrow matrix travels narrow and is accumulated in
        dtype as above, np.cumsum(x, axis=..., dtype=dtype)'s result dtype (a server that does not
        list "scan2d" in info()["narrow_operations"]: gpuscan.InvalidArgument).
        op: sum, product, min, max, bit_and, bit_or, bit_xor; algorithm: a name from info()
        ["scan_algorithms"] (None: the server's default). copy=True copies a non-contiguous or
        big-endian array instead of raising ValueError. lanes, retries: this call's (None: the
        client's). A retry writes the whole result into `out` again; in place (out=x) is not
        retried. timeout: this call's seconds, every try and wait included (None: the client's;
        0: none; past it gpuscan.DeadlineExceeded); on a native client one other than the
        client's takes the grpcio path for this call.

        x in shared memory (see shared_array): nothing is streamed and lanes do not apply; the
        result is `out` when out is shared too (out=x: in place), else a new SharedArray next to
        x's region (out None), or, for a plain out, written into a temporary region and copied into out.

        x a CUDA array (any object with __cuda_array_interface__: CuPy, PyTorch, Numba), for a
        client on the server's host and GPU: the server scans it where it lies (CUDA IPC; nothing
        crosses the host; see gpuscan._device). Any shape, C-contiguous; out= a CUDA array of x's
        dtype and size (out=x: in place), or None: a new array like x (CuPy's or PyTorch's; other
        libraries need out=). Its stream (__cuda_array_interface__ v3; before v3 the whole device)
        is waited for before the call; the result is complete when the call returns. The server
        must serve device memory (info()["limits"]["device_ipc"]: --allow-device-ipc on the cuda
        engine) on x's GPU, else gpuscan.FailedPrecondition, before any export. Host and CUDA
        arrays mixed: TypeError. copy= and lanes do not apply; not retried.

        x a RemoteArray (see put; axis= of r.reshape(rows, cols)): scanned where it lies (no upload; the streamed
        call's bits) into `out` (new if None), or with keep=True (ttl=, label= as put's) kept there: a new
        RemoteArray. So every operation: all its inputs RemoteArrays (else TypeError), keep=True returning
        RemoteArrays in place of the arrays; one call (no lanes).

        carry: a prefix folded into every result: out[i] = op(carry, scan[i]), scan being x's own (float
        bits: x scanned alone, then folded), and an exclusive scan's out[0] is carry itself, so x continues
        an array whose earlier part folds to carry. A number the result dtype holds exactly (else ValueError;
        bool, non-numbers: TypeError), sent as one element of it. Host, shared, CUDA and remote x (keep=True
        too), on one stream (lanes=K > 1: ValueError); not with axis 0/1 of a matrix or a float16 result
        (ValueError). A server older than ScanHeader.carry ignores it."""
        return self._drive(_transport.run(self, _ops.scan(self, x, op, exclusive, algorithm, out, axis, dtype, copy,
                                                           lanes, retries, timeout, keep, ttl, label, carry)))

    def segmented_scan(self, x: Any, keys: Any = None, *, heads: Any = None, op: str = "sum", exclusive: bool = False,
                       out: Any = None, dtype: npt.DTypeLike = None, copy: bool = False,
                       timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
                       ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        """Segmented prefix scan of a 1-D array: each segment scanned on its own (inclusive unless
        exclusive=True; exclusive puts op's identity at each segment's first element). Returns
        `out` (new if None), x's dtype (or dtype's); op as scan's.

        dtype: the accumulator and result dtype, exactly as scan's (np.cumsum's dtype=): a narrow
        x (int8, uint8, int16, uint16, bool, float16) travels as it is and is accumulated in
        dtype, by default int64 (int8/int16/bool), uint64 (uint8/uint16) or float16 (float16:
        accumulated in float32 and each result rounded once); out= then of that dtype. A 4- or
        8-byte x with another dtype is converted here first. A narrow x needs a server that lists
        "segmented_scan" in info()["narrow_operations"] (an older one: gpuscan.InvalidArgument).

        Segments, given by exactly one of (ValueError otherwise):
          keys:  1-D integer array of len(x): a segment is a run of equal consecutive keys
                 (int32/int64/uint32/uint64 sent as they are; int8/int16 widened to int32 and
                 uint8/uint16 to uint32, a copy; floats and bools: ValueError).
          heads: 1-D bool/int8/uint8 array of len(x): a segment begins at each nonzero head.
        Element 0 always begins a segment. A length that differs from x's is a ValueError.

        x, out and copy= as scan's; keys/heads follow copy= too. The keys (or head bytes) of a
        chunk's elements travel in the same request as its values: a chunk holds chunk_bytes //
        max(x.itemsize, key size, out.itemsize) elements. Results are reproducible bit for bit
        (float sum and product associate in the server's deterministic tree, not a sequential
        loop). timeout: this call's seconds (None: the client's; 0: none), every try and wait included. retries
        as scan's (in place, with out overlapping x or the keys, not retried). No lanes, shared
        memory or native path for host arrays: a SharedArray is streamed.

        x a CUDA array (see scan), with keys or heads CUDA arrays too, on x's GPU: the server scans
        x where it lies (CUDA IPC; nothing crosses the host). x 1-D and C-contiguous; keys
        int32/int64/uint32/uint64 (read in place: never widened, ValueError otherwise) or heads
        bool/int8/uint8, each 1-D of len(x); out= a CUDA array of x's dtype and size (out=x: in
        place) or None (a new array like x, as scan's). Every operator on integers, and min/max
        on floats; a float32/float64 sum or product is not served on device memory yet:
        gpuscan.Unimplemented before any call (the host path serves it: pass host arrays). Host
        and CUDA arrays mixed: TypeError. The server must serve device memory on x's GPU, as
        scan's; copy= and dtype= do not apply (dtype=: TypeError); not retried. RemoteArrays: as scan's."""
        return self._drive(_transport.run(self, _ops.segmented_scan(self, x, keys, heads, op, exclusive, out, copy,
                                                                    retries, timeout, dtype, keep, ttl, label)))

    def scan2d(self, x: Any, op: str = "sum", *, out: Any = None, dtype: npt.DTypeLike = None, copy: bool = False,
               timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
               ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        """2-D inclusive scan (summed-area table) of a 2-D array: out[i, j] = op over x[:i+1, :j+1].
        Returns `out` (new if None), x's shape and dtype (or dtype's); op as scan's ("sum",
        "product", "min", "max"; bitwise ones for integers).

        dtype: the accumulator and result dtype, exactly as scan's: a narrow x (int8, uint8,
        int16, uint16, bool, float16) travels as it is (1-2 bytes an element) and is accumulated
        in dtype, by default int64 (int8/int16/bool), uint64 (uint8/uint16) or float16 (float16:
        accumulated in float32 and each result rounded once), the result dtype of
        `np.cumsum(np.cumsum(x, 0, dtype=dtype), 1, dtype=dtype)`; out= then of that dtype. A 4- or
        8-byte x with another dtype is converted here first. A narrow x needs a server that lists
        "scan2d" in info()["narrow_operations"] (an older one: gpuscan.InvalidArgument).

        Float bits are fixed by the input: each row is folded left to right, then each column top
        to bottom, what `np.cumsum(np.cumsum(x, axis=1, dtype=x.dtype), axis=0, dtype=x.dtype)`
        computes for "sum", on every engine and whatever chunk_bytes (a narrow x: in the
        accumulator's dtype, float16's in float32). x: a C-contiguous little-endian 2-D array of a
        served or narrow dtype with at least one column (otherwise
        ValueError before any call; copy=True sends a contiguous copy of a non-contiguous or
        big-endian one). The matrix streams as chunk_bytes pieces cut anywhere; the server
        answers whole rows. out= as scan's (same shape). timeout: this call's seconds (None: the
        client's; 0: none). retries as scan's (with out overlapping x, not retried). No lanes,
        shared memory or native path. x a RemoteArray: r.reshape(rows, cols), as scan's."""
        return self._drive(_transport.run(self, _ops.scan2d(self, x, op, out, copy, retries, timeout, None, False,
                                                            dtype, keep, ttl, label)))

    def reduce_by_key(self, x: Any, keys: Any, *, op: str = "sum", dtype: npt.DTypeLike = None, copy: bool = False,
                      timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
                      ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        """Reduction by key of a 1-D array: `unique_keys, values = client.reduce_by_key(x, keys)`,
        one (key, value) per run of equal consecutive keys, in order (as
        cub::DeviceReduce::ReduceByKey: a key that comes back after another run starts a new run;
        sort first for a group-by). unique_keys[r] is run r's key, in the keys' dtype (as sent:
        int8/int16 widened to int32, uint8/uint16 to uint32); values[r] is op over run r's values,
        in x's dtype, or dtype's: the accumulator, as segmented_scan's (a narrow x travels as it is;
        by default int64, uint64 or float16, as np.sum's). An empty x gives two empty arrays.

        keys: 1-D integer array of len(x), as segmented_scan's (floats, bools, None, another
        length: ValueError before any call). op, x and copy= as scan's (keys follow copy= too; a
        bitwise operator on floats is InvalidArgument). Values and keys of the same elements travel
        in one request: chunk_bytes // max(x.itemsize, key size) elements each. A run's value is
        bit for bit the segmented inclusive scan at its last element (float sum and product
        associate in the server's deterministic tree), whatever the chunking. timeout: this
        call's seconds (None: the client's; 0: none). retries as reduce's: the runs are returned only at the end, so
        a retry starts over. No lanes, shared memory or native path. x and keys RemoteArrays: as scan's (keep=True:
        (keys, values) as two RemoteArrays)."""
        return self._drive(_transport.run(self, _ops.reduce_by_key(self, x, keys, op, copy, retries, timeout, dtype,
                                                                   keep, ttl, label)))

    def sort(self, x: Any, *, values: Any = None, descending: bool = False, copy: bool = False,
             timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
             ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        """Stable sort of a 1-D array: `y = client.sort(x)`, x's elements in order, x's dtype; with
        values= (a 1-D array of len(x), any served dtype) `(sorted_x, sorted_values)`, each value
        moved with its key. Floats in IEEE 754 total order: -NaN < -inf < ... < -0.0 < +0.0 < ... <
        +inf < +NaN (a NaN's sign bit decides its end; NaNs of one sign by their payload bits).
        Stable: equal keys keep their input order, descending=True too (so a descending sort is
        not an ascending one reversed). x, values and copy= as scan's x (values follow copy=
        too): a wrong dtype, shape or length is a ValueError before any call. Keys and values may
        also be narrow (int8, uint8, int16, uint16, float16, bool: bool travels as uint8), taken
        and returned as they are, in their own dtype (a server that lists "sort" in
        info()["narrow_operations"]; an older one: gpuscan.InvalidArgument). Keys and values of
        the same elements travel in one request: chunk_bytes // max(x.itemsize, values.itemsize)
        elements each. The server holds the whole input, at most
        info()["limits"]["max_sort_bytes"] (keys and values): beyond, gpuscan.ResourceExhausted.
        The result streams back after the upload and is checked (offsets continuing, keys in
        order: gpuscan.Internal otherwise). timeout: this call's seconds (None: the client's; 0:
        none). retries as reduce_by_key's (a retry starts over). No lanes, shared memory or native path for host arrays.

        x a CUDA array (1-D, C-contiguous; see scan), values= then a 1-D CUDA array of len(x) on
        its GPU too (host and CUDA arrays mixed: TypeError): the server sorts them where they lie
        (nothing crosses the host) into new arrays of x's library (CuPy's or PyTorch's) on x's
        device: the same results as the host path's, as CUDA arrays (of 4- or 8-byte dtypes: a
        narrow CUDA array is a ValueError). The server must serve device memory on x's GPU, as
        scan's; copy= does not apply; not retried. x and values RemoteArrays: as scan's."""
        return self._drive(_transport.run(self, _ops.sort(self, x, values, descending, copy, retries, timeout, keep,
                                                          ttl, label)))

    def argsort(self, x: Any, *, descending: bool = False, return_keys: bool = False, copy: bool = False,
                timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
                ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        """The stable sort's permutation: int64 indices with x[indices] sorted as sort(x) is
        (numpy's np.argsort(x, kind="stable") for integers and for floats without NaN or signed
        zeros; equal keys in input order, descending=True too). return_keys=True: `(sorted_x,
        indices)` from the one call. Arguments (narrow x too), checks, timeout and errors as
        sort's; x a CUDA array: indices (int64) and keys as new CUDA arrays, as sort's; a RemoteArray too."""
        return self._drive(_transport.run(self, _ops.argsort(self, x, descending, return_keys, copy, retries,
                                                             timeout, keep, ttl, label)))

    def scan_iter(self, chunks: Iterable[npt.ArrayLike], op: str = "sum", exclusive: bool = False,
                  algorithm: Optional[str] = None, *, timeout: Optional[float] = None) -> Iterator[npt.NDArray[Any]]:
        """One scan over a stream of arrays (the concatenation), yielding each array's scanned counterpart as it
        returns; for arrays that do not fit in memory. `chunks` is consumed on a grpc thread while results are read.
        Stopping the iteration early cancels the call. Never retried (chunks is read once); timeout: the whole
        stream's seconds (None: the client's; 0: none)."""
        feeder, asm, timeout = self._scan_iter_parts(chunks, op, exclusive, algorithm, timeout)
        stream = _blocking.stream(self._methods["Scan"], feeder, timeout, self._metadata)
        try:
            for raw in stream:
                yield from asm.feed(raw)
        finally:
            stream.close()  # the caller stopped early: cancels the call now, not when collected
        if asm.current is not None:
            raise Internal("server returned fewer scan results than elements sent")
        self._set_timing(asm.timing or Timing())

    def reduce(self, x: Any, op: str = "sum", *, dtype: npt.DTypeLike = None, copy: bool = False,
               lanes: Optional[int] = None, retries: Optional[int] = None, timeout: Optional[float] = None) -> Any:
        """Reduction of a 1-D array: a numpy scalar of x's dtype (the identity for an empty array).
        op, dtype= (the accumulator and result: a narrow x as scan's, np.sum's defaults), copy=,
        lanes, retries and timeout as scan's. x in shared memory, or a CUDA array (as scan's):
        read there by the server, lanes and retries do not apply. x a RemoteArray: as scan's (no keep)."""
        return self._drive(_transport.run(self, _ops.reduce(self, x, op, dtype, copy, lanes, retries, timeout)))

    def histogram(self, x: Any, bins: npt.ArrayLike = 10, range: Optional[Tuple[float, float]] = None, *,
                  copy: bool = False,
                  retries: Optional[int] = None, timeout: Optional[float] = None) -> HistogramResult:
        """Histogram of a 1-D array with numpy.histogram's bins: `counts, edges =
        client.histogram(x, 256, range=(0, 1))`. bins: an int, even bins over range=(lo, hi) (None:
        x.min()..x.max(), a pass over x here, as numpy makes; NaN or inf there is a ValueError), or
        a 1-D sequence of edges (sent as float64; range is ignored). Counts are numpy's: bin i holds
        edges[i] <= x < edges[i+1], the last bin also x == edges[-1]; a float32 array's even edges
        are rounded to float32 and compared in float32, as numpy does (see HistogramHeader).
        Narrow arrays are taken as they are (int8, uint8, int16, uint16; bool as uint8, as numpy
        converts it; float16 binned as its exact float32 values, with numpy's edges: where its
        even edges, computed in float16, are not the server's float32 ones they are sent as
        explicit edges), from a server that lists "histogram" in info()["narrow_operations"].
        Returns a HistogramResult: counts (uint64), the server's edges (float64), and below, above,
        nan_count, element_count. The client refuses bins < 1 and a non-finite range (ValueError);
        the server refuses lo > hi, more bins than info()["limits"]["max_histogram_bins"], NaN or
        decreasing edges (gpuscan.InvalidArgument naming the field). Streamed and retried as
        reduce is, timeout as scan's; no lanes, shared memory or native path for host arrays (the
        server offers none for histograms: a SharedArray is streamed).

        x a CUDA array (any shape: all its elements, C-contiguous; see scan): the server reads it
        where it lies (nothing crosses the host) and the result is the host path's for the same
        values. With range=None (even bins over x's min and max) the range is found first by two reductions of x on
        the device (min, max), each a call of its own within `timeout`. The server must serve device memory on x's
        GPU, as scan's (4- or 8-byte dtypes: a narrow CUDA array is a ValueError); copy= does not apply; not
        retried. x a RemoteArray: as scan's (no keep), with range= or edges (range=None would read x here)."""
        return cast(HistogramResult,
                    self._drive(_transport.run(self, _ops.histogram(self, x, bins, range, copy, retries, timeout))))

    def compact(self, x: Any, where: Any = None, predicate: Any = None, *, indices: bool = False, values: bool = True,
                copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                timeout: Optional[float] = None, keep: bool = False, ttl: Optional[float] = None,
                label: Optional[str] = None) -> Any:
        """Stable stream compaction: keeps x[i] where the mask `where` is true, or where the predicate
        holds (("gt", 0), ("in_range", lo, hi), "nonzero", "not_nan", "eq"/"ne"/"lt"/"le"/"ge").
        Returns the kept values; with indices=True (values, indices); values=False, indices=True:
        the indices (int64) alone. Indices count in the whole array, with or without lanes.
        copy=, lanes, retries and timeout as scan's.

        x may be narrow (int8, uint8, int16, uint16, float16, bool: bool travels as uint8): the
        kept values come back exactly, in x's dtype, from a server that lists "compact" in
        info()["narrow_operations"] (an older one: gpuscan.InvalidArgument). A narrow x streams
        on one call (lanes do not apply; a shared one is streamed too); a float16 x's predicate
        threshold is rounded to float16, as numpy compares it.

        x in shared memory: nothing is streamed and lanes do not apply; the kept values and
        indices are SharedArray views [:kept] of new regions of len(x) elements next to x's; a
        where= mask is read in place when it is a shared bool/int8/uint8 array, else copied into a
        temporary region; retries do not apply.

        x a CUDA array (as scan's, of a 4- or 8-byte dtype): the kept values and indices are new
        CUDA arrays of x's library (CuPy or PyTorch; n elements each, returned as views [:kept]);
        where= must then be a CUDA bool/int8/uint8 array of x's size, read in place (a host mask: TypeError). x (and
        where=, uint8/int8) RemoteArrays: as scan's."""
        return self._drive(_transport.run(self, _ops.compact(self, x, where, predicate, indices, values, copy, lanes,
                                                             retries, timeout, keep, ttl, label)))

    # -- resident arrays (_resident): the server keeps them between calls
    def put(self, x: Any, *, ttl: Optional[float] = None, label: Optional[str] = None, copy: bool = False,
            retries: Optional[int] = None, timeout: Optional[float] = None) -> _resident.RemoteArray:
        """Uploads a 1-D array (any dtype the package takes; int8, uint8, int16, uint16, float16 as they are, bool
        as uint8) for the server to keep: a RemoteArray naming it, owned by this client's tenant. ttl: seconds
        unused before the server drops it (None: its --resident-ttl-ms, which also caps it). label: a name arrays()
        shows (<= 128 bytes). copy=, retries, timeout as scan's. A server without --resident-bytes:
        gpuscan.Unimplemented; past its budget or the tenant's quota: gpuscan.ResourceExhausted. A 1-D CUDA array
        (CuPy, PyTorch: __cuda_array_interface__; 4- and 8-byte dtypes) is not streamed: the header names its memory
        by a CUDA IPC handle and the server copies it device to device (a server on this host and GPU with
        --allow-device-ipc, else gpuscan.FailedPrecondition)."""
        return cast(_resident.RemoteArray, self._drive(_resident.put(self, x, ttl, label, copy, retries, timeout)))

    def get(self, r: Union[_resident.RemoteArray, bytes], offset: int = 0, count: Optional[int] = None, *,
            retries: Optional[int] = None, timeout: Optional[float] = None) -> npt.NDArray[Any]:
        """Elements [offset, offset + count) of a resident array (a RemoteArray or its id; count None: to its end)
        as a new numpy array. Past the end: gpuscan.OutOfRange; an id unknown to this tenant, dropped or idle past
        its ttl: gpuscan.NotFound. retries, timeout as scan's."""
        return cast(npt.NDArray[Any], self._drive(_resident.get(self, r, offset, count, retries, timeout)))

    def drop(self, r: Union[_resident.RemoteArray, bytes], *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Frees a resident array (a RemoteArray or its id) once the calls using it end: its last info (as
        RemoteArray.info). gpuscan.NotFound when it is gone already. Not retried."""
        return cast(Dict[str, Any], self._drive(_resident.drop(self, r, timeout)))

    def arrays(self, *, timeout: Optional[float] = None) -> _resident.ResidentArrays:
        """This tenant's resident arrays: a ResidentArrays (its RemoteArrays, oldest first, and tenant_bytes,
        tenant_quota_bytes, budget_bytes, used_bytes). Not retried."""
        return cast(_resident.ResidentArrays, self._drive(_resident.arrays(self, timeout)))

    # -- diagnostics
    def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """What the server runs on and accepts (ServerInfo as a dict), and "data_path": this
        client's (see data_path: {"name": "native" or "grpcio", "library": the C API's file or
        None, "reason": why grpcio}). timeout as scan's."""
        return self._with_data_path(self._info(self._call_timeout(timeout)))

    def _info(self, timeout: Optional[float]) -> Dict[str, Any]:
        return _types.server_info(self._info_message(timeout))

    def _info_message(self, timeout: Optional[float]) -> "pb.ServerInfo":
        with raised():
            return cast(pb.ServerInfo,
                        _pump.unary(self._stub.GetServerInfo, pb.GetServerInfoRequest(), timeout, self._metadata))

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """grpc.health.v1 status: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN" (of the
        whole server, or of `service`). timeout as scan's."""
        timeout = self._call_timeout(timeout)
        try:
            raw = _pump.unary(self._health, encode_health_request(service), timeout, self._metadata)
        except grpc.RpcError as e:
            return self._health_failed(e)
        return decode_health_response(raw)

    def benchmark(self, operations: Optional[Iterable[str]] = None, algorithms: Optional[Iterable[str]] = None,
                  dtypes: Optional[Iterable[npt.DTypeLike]] = None, sizes: Optional[Iterable[int]] = None,
                  repetitions: int = 0, warmup: int = 0, on_row: Optional[Callable[[Dict[str, Any]], None]] = None,
                  devices: Optional[Iterable[int]] = None, *, timeout: Optional[float] = None) -> _types.Table:
        """Runs the server's kernel suite (cuda servers only): a Table of row dicts, each also
        passed to on_row as it comes. devices: ordinals to measure one after the other (default:
        the server's first). timeout: the whole run's seconds (None: the client's; 0: none)."""
        req = _types.bench_request(operations, algorithms, dtypes, sizes, repetitions, warmup, devices)
        timeout = self._call_timeout(timeout)
        table, add = self._bench_table(on_row)
        with raised():
            for row in _pump.ResponsePump(lambda: self._stub.Benchmark(req, timeout=timeout, metadata=self._metadata)):
                add(row)
        return table

    def transport(self, total_bytes: int, echo: bool = True, chunk_bytes: Optional[int] = None,
                  lanes: int = 1, *, timeout: Optional[float] = None) -> TransportResult:
        """The transport ceiling: total_bytes through the server's Transport RPC (no compute), in messages framed as
        a scan's are. With echo each chunk comes back (a Scan's byte pattern). lanes=K: K concurrent calls on K
        connections, chunk k on call k mod K (the ceiling of a K-lane scan); the totals are summed and
        server_total_us is the slowest call's. timeout as scan's (not retried)."""
        tally = _tally.Tally(total_bytes, echo, int(chunk_bytes or self.chunk_bytes), lanes)
        return cast(TransportResult, self._drive(_tally.program(tally, self._call_timeout(timeout))))

    def shared_array(self, n: int, dtype: npt.DTypeLike = "int32", *, dir: Optional[str] = None,
                     mode: int = shared.DEFAULT_MODE, timeout: Optional[float] = None,
                     zero: bool = True) -> shared.SharedArray:
        """A numpy array of n zeros in shared memory that the server reads and writes itself, for a
        client on the server's host: scan/reduce/compact of it (or of a contiguous slice) send no
        data. `a = client.shared_array(n, "int32"); a[:] = ...; y = client.scan(a)`.

        It is carved out of this client's arena (shared.Arena): regions made once, which the server
        maps and registers on their first call, so a fresh array is as fast as a reused one. Its
        piece goes back to the arena when its last view is collected (close() and `with` do
        nothing more); the client's close() unlinks the arena's files (later calls stream its
        arrays). Results of calls on it (scan without out=, compact) come from the arena too. The
        arena's first region holds the client's shm_arena_bytes, or four times the first array;
        it grows by new regions. gpuscan.shared_array(n, dtype, dir=...) makes a region of its own.

        dir: where the region files are made, a directory the server sees as its --shm-dir
        (default: that directory, from info(), when the server serves shared memory; else
        /dev/shm). mode: the files' permissions (0600: only this user; 0o660 when the server runs
        as another user of the directory's group). timeout: that info() call's (as scan's). zero:
        False leaves a reused piece's old bytes (for an array about to be overwritten)."""
        if dir is None:
            dir = shared.default_dir(self.info(timeout=timeout)["limits"])
        return self._carve(n, dtype, dir, mode, zero)
