"""gpuscan.AsyncClient: the Client's methods as coroutines on grpc.aio (same arguments, results and
errors). scan_iter is an async generator taking a sync or async iterable of arrays. Striped lanes run
as one asyncio task per lane, each call on its own grpc.aio channel. Shared memory as the Client's
(shared_array is a coroutine)."""
from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple, Union

import grpc
import grpc.aio
import numpy as np

from . import _chunking, _retry, _types, _wire, shared
from ._types import HistogramResult, Timing, TransportResult
from .client import (DEFAULT_CHUNK_BYTES, Tls, _Calls, channel_args, channel_credentials, check_lanes,
                     decode_health_response, encode_health_request, lane_channel_args, method_path)
from .errors import Internal, from_rpc_error, raised
from .v1 import gpuscan_pb2 as pb
from .v1 import gpuscan_pb2_grpc as pb_grpc


def _lost_status(error, upload: "_AsyncUpload"):
    """The error, explained when it is grpcio's stand-in for a status the server sent while the
    upload was still going (grpc/grpc#36066: a write that fails as the call ends replaces the
    server's status with INTERNAL "Internal error from Core")."""
    if (error.code == grpc.StatusCode.INTERNAL and "Internal error from Core" in error.message
            and not upload.finished):
        return type(error)(error.message + "; the server ended the call during the upload and grpcio's asyncio "
                           "client lost its status (grpc/grpc#36066): the synchronous gpuscan.Client reports it")
    return error


class _AsyncUpload:
    """Async request iterator over a sync or async source; an exception from the source cancels
    the call and is re-raised to the caller (as _chunking.Upload does for the sync client)."""

    def __init__(self, requests):
        self._requests = requests
        self.error: Optional[BaseException] = None
        self.call = None
        self.finished = False  # every request was handed to grpc

    def _ended(self) -> bool:
        """The call has its status: writing more would only fail. (grpcio's aio then reports
        INTERNAL "Internal error from Core" in place of the server's status, grpc/grpc#36066, when
        the failed write is handled after the status: so no write is issued once it is in.)"""
        return self.call is not None and self.call.done()

    async def __aiter__(self):
        try:
            if hasattr(self._requests, "__aiter__"):
                async for r in self._requests:
                    await asyncio.sleep(0)  # let a status that came in be handled first
                    if self._ended():
                        return
                    yield r
            else:
                for r in self._requests:
                    await asyncio.sleep(0)
                    if self._ended():
                        return
                    yield r
            self.finished = True
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException as e:  # noqa: B902
            self.error = e
            if self.call is not None:
                self.call.cancel()


async def _feed_async(feeder: _chunking.ScanIterFeeder, chunks) -> AsyncIterator[bytes]:
    if hasattr(chunks, "__aiter__"):
        async for arr in chunks:
            for r in feeder.requests_for(arr):
                yield r
    else:
        for arr in chunks:
            for r in feeder.requests_for(arr):
                yield r
    for r in feeder.finish():
        yield r


class AsyncClient(_Calls):
    """Asynchronous gpuscan client on grpc.aio; `async with AsyncClient(target) as c: await c.scan(x)`.
    Arguments as Client's, retries included (the waits are asyncio.sleep; on_retry is called on the
    event loop)."""

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: Union[None, bool, Tls] = None,
                 timeout: Optional[float] = None, lanes: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 load_balancing_policy: Optional[str] = None, options=None, retries: int = 0,
                 backoff: Tuple[float, float] = (0.1, 2.0), on_retry: Optional[_retry.OnRetry] = None):
        self._init_common(target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry)
        args = channel_args(self.chunk_bytes, load_balancing_policy, options, tls)
        creds = channel_credentials(tls, credentials)
        self._channel = (grpc.aio.secure_channel(target, creds, options=args) if creds is not None
                         else grpc.aio.insecure_channel(target, options=args))
        self._stub = pb_grpc.GpuScanStub(self._channel)
        self._scan = self._channel.stream_stream(method_path("Scan"))
        self._reduce = self._channel.stream_unary(method_path("Reduce"))
        self._compact = self._channel.stream_stream(method_path("Compact"))
        self._histogram = self._channel.stream_unary(method_path("Histogram"))
        self._segmented = self._channel.stream_stream(method_path("SegmentedScan"))
        self._reduce_by_key = self._channel.stream_stream(method_path("ReduceByKey"))
        self._sort = self._channel.stream_stream(method_path("Sort"))
        self._scan2d = self._channel.stream_stream(method_path("Scan2D"))
        self._transport = self._channel.stream_stream(method_path("Transport"))
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check")
        # Per task, as the sync client's is per thread: concurrent tasks each see their own.
        self._timing_var: contextvars.ContextVar = contextvars.ContextVar(f"gpuscan_timing_{id(self)}", default=None)
        # Lanes: one channel (connection) each, made on first use, reused, closed with the client.
        self._lane_args = (target, creds, options, tls)
        self._lane_channels: List[grpc.aio.Channel] = []
        self._lane_methods: List[Dict[str, Any]] = []
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        channels, self._lane_channels, self._lane_methods = self._lane_channels, [], []
        await self._channel.close()
        for ch in channels:
            await ch.close()

    def _lanes(self, k: int, method: str):
        """The multi-callable `method` on each of k lane channels (no await: no other task can
        interleave, so no lock is needed)."""
        if self._closed:
            raise ValueError("gpuscan: the client is closed")
        target, creds, options, tls = self._lane_args
        while len(self._lane_channels) < k:
            a = lane_channel_args(self.chunk_bytes, options, tls, len(self._lane_channels))
            ch = grpc.aio.secure_channel(target, creds, options=a) if creds is not None \
                else grpc.aio.insecure_channel(target, options=a)
            self._lane_channels.append(ch)
            self._lane_methods.append({
                "Scan": ch.stream_stream(method_path("Scan")),
                "Reduce": ch.stream_unary(method_path("Reduce")),
                "Compact": ch.stream_stream(method_path("Compact")),
                "Transport": ch.stream_stream(method_path("Transport"))})
        return [m[method] for m in self._lane_methods[:k]]

    async def _usable_lanes(self, lanes, n: int, per: int, timeout: Optional[float]) -> int:
        """As Client._usable_lanes: capped by the server's max_lanes (asked once) and the chunks."""
        wanted = self._wanted_lanes(lanes)
        chunks = _chunking.chunk_count(n, per)
        if wanted <= 1 or chunks <= 1:
            return 1
        if self._max_lanes is None:
            self._max_lanes = int((await self._info(timeout))["limits"].get("max_lanes", 0))
        return _chunking.lane_count(chunks, wanted, self._max_lanes)

    async def _fan_out(self, streams, feed: Callable[[int, bytes], None], timeout: Optional[float],
                       unary: bool = False) -> None:
        """Runs one call per lane at once, as tasks: streams is a list of (method, request
        iterator). Every response goes to feed(lane, raw). The first failure cancels every lane and
        is raised (see _chunking.first_failure); cancelling the awaiting task cancels them all."""
        calls = [method(reqs, timeout=timeout) for method, reqs in streams]
        failures: List[BaseException] = []
        aborted = False

        def cancel_all():
            for c in calls:
                c.cancel()

        async def run(lane: int):
            nonlocal aborted
            try:
                if unary:
                    feed(lane, await calls[lane])
                else:
                    async for raw in calls[lane]:
                        feed(lane, raw)
            except asyncio.CancelledError:
                if not aborted:  # this task itself was cancelled, not the call by a sibling's failure
                    raise
            except Exception as e:  # noqa: B902 - raised by the awaiting task
                failures.append(e)
                aborted = True
                cancel_all()

        try:
            await asyncio.gather(*(run(lane) for lane in range(len(calls))))
        except BaseException:
            cancel_all()
            raise
        if failures:
            raise _chunking.first_failure(failures) from None

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def last_timing(self) -> Optional[Timing]:
        """The server's Timing of the current task's last completed call (None before one)."""
        return self._timing_var.get()

    async def _stream(self, method, requests, timeout: Optional[float]) -> AsyncIterator[bytes]:
        upload = _AsyncUpload(requests)
        call = method(upload.__aiter__(), timeout=timeout)
        upload.call = call
        try:
            async for raw in call:
                yield raw
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise _lost_status(from_rpc_error(e), upload) from None
        except BaseException:
            call.cancel()
            raise
        if upload.error is not None:
            raise upload.error

    async def _retrying(self, retries: int, attempt: Callable[[Optional[float]], Awaitable[Any]]) -> Any:
        """As Client._retrying, for a coroutine function attempt(timeout)."""
        return await _retry.run_async(self._tries(retries), attempt)

    async def scan(self, x, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None,
                   out: Optional[np.ndarray] = None, *, copy: bool = False, lanes: Optional[int] = None,
                   retries: Optional[int] = None) -> np.ndarray:
        x, header, out = self._scan_args(x, op, exclusive, algorithm, out, copy)
        retries = self._wanted_retries(retries)
        call = self._scan_shared(x, header, out)
        if call is not None:  # never retried: an in-place scan may have written over its input
            with call:
                async for raw in self._stream(self._scan, call.serialized(), self.timeout):
                    call.feed_scan(raw)
                self._timing_var.set(call.finish())
            return call.result
        out = self._scan_out(x, out)
        per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)

        async def attempt(timeout: Optional[float]) -> Timing:
            k = await self._usable_lanes(lanes, len(x), per, timeout)
            if k > 1:
                asm = _chunking.ScanAssembler(out, (per, k))
                reqs = self._lane_requests(header, _wire.SCAN_DATA, x, per, k)
                await self._fan_out(list(zip(self._lanes(k, "Scan"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                    timeout)
            else:
                asm = _chunking.ScanAssembler(out)
                async for raw in self._stream(self._scan, _chunking.data_requests(header, _wire.SCAN_DATA, x, per),
                                              timeout):
                    asm.feed(raw)
            return asm.finish()
        self._timing_var.set(await self._retrying(self._scan_retries(x, out, retries), attempt))
        return out

    async def segmented_scan(self, x, keys=None, *, heads=None, op: str = "sum", exclusive: bool = False,
                             out: Optional[np.ndarray] = None, copy: bool = False, timeout: Optional[float] = None,
                             retries: Optional[int] = None) -> np.ndarray:
        """As Client.segmented_scan: exactly one of keys= (runs of equal consecutive keys) or heads=
        (nonzero begins a segment); every check before the call."""
        x, side, header, out = self._segmented_args(x, keys, heads, op, exclusive, out, copy)
        retries, timeout = self._wanted_retries(retries), self._call_timeout(timeout)
        out = self._scan_out(x, out)
        per = _chunking.chunk_elements(self.chunk_bytes, max(x.itemsize, side.itemsize))

        async def attempt(t: Optional[float]) -> Timing:
            asm = _chunking.ScanAssembler(out)
            async for raw in self._stream(self._segmented, _chunking.data_requests(
                    header, _wire.SEGMENTED_DATA, x, per, side, flags_field=_wire.SEGMENTED_KEYS), t):
                asm.feed(raw)
            return asm.finish()
        tries = _retry.Tries(self._segmented_retries(x, side, out, retries), self.backoff, self.on_retry, timeout)
        self._timing_var.set(await _retry.run_async(tries, attempt))
        return out

    async def scan2d(self, x, op: str = "sum", *, out: Optional[np.ndarray] = None, copy: bool = False,
                     timeout: Optional[float] = None, retries: Optional[int] = None) -> np.ndarray:
        """As Client.scan2d: the summed-area table of a 2-D array; every check before the call."""
        flat, out, out_flat, header = self._scan2d_args(x, op, out, copy)
        retries, timeout = self._wanted_retries(retries), self._call_timeout(timeout)
        per = _chunking.chunk_elements(self.chunk_bytes, flat.itemsize)

        async def attempt(t: Optional[float]) -> Timing:
            asm = _chunking.ScanAssembler(out_flat)
            async for raw in self._stream(self._scan2d, _chunking.data_requests(header, _wire.SCAN2D_DATA, flat, per),
                                          t):
                asm.feed(raw)
            return asm.finish()
        tries = _retry.Tries(self._scan_retries(flat, out_flat, retries), self.backoff, self.on_retry, timeout)
        self._timing_var.set(await _retry.run_async(tries, attempt))
        return out

    async def reduce_by_key(self, x, keys, *, op: str = "sum", copy: bool = False, timeout: Optional[float] = None,
                            retries: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """As Client.reduce_by_key: (unique_keys, values), one per run of equal consecutive keys;
        every check before the call."""
        x, side, header = self._reduce_by_key_args(x, keys, op, copy)
        retries, timeout = self._wanted_retries(retries), self._call_timeout(timeout)
        per = _chunking.chunk_elements(self.chunk_bytes, max(x.itemsize, side.itemsize))

        async def attempt(t: Optional[float]):
            asm = _chunking.ReduceByKeyAssembler(side.dtype, x.dtype, len(x))
            async for raw in self._stream(self._reduce_by_key, _chunking.data_requests(
                    header, _wire.REDUCE_BY_KEY_DATA, x, per, side, flags_field=_wire.REDUCE_BY_KEY_KEYS), t):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = await _retry.run_async(_retry.Tries(retries, self.backoff, self.on_retry, timeout), attempt)
        self._timing_var.set(timing)
        return result

    async def sort(self, x, *, values=None, descending: bool = False, copy: bool = False,
                   timeout: Optional[float] = None, retries: Optional[int] = None):
        """As Client.sort: the sorted keys, or (sorted keys, values moved with them) with values=;
        every check before the call."""
        x, side, request = self._sort_args(x, values, descending, pb.SORT_OUTPUT_KEYS, copy)
        keys, vals, _ = await self._sorted(x, side, request, retries, timeout)
        return keys if side is None else (keys, vals)

    async def argsort(self, x, *, descending: bool = False, return_keys: bool = False, copy: bool = False,
                      timeout: Optional[float] = None, retries: Optional[int] = None):
        """As Client.argsort: int64 indices, or (sorted keys, indices) with return_keys=True."""
        output = pb.SORT_OUTPUT_KEYS_AND_INDICES if return_keys else pb.SORT_OUTPUT_INDICES
        x, side, request = self._sort_args(x, None, descending, output, copy)
        keys, _, indices = await self._sorted(x, side, request, retries, timeout)
        return (keys, indices) if return_keys else indices

    async def _sorted(self, x, side, request, retries, timeout):
        retries, timeout = self._wanted_retries(retries), self._call_timeout(timeout)
        per = self._sort_per(x, side)

        async def attempt(t: Optional[float]):
            asm = self._sort_assembler(x, side, request)
            async for raw in self._stream(self._sort, _chunking.data_requests(
                    request, _wire.SORT_KEYS, x, per, side, flags_field=_wire.SORT_VALUES), t):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = await _retry.run_async(_retry.Tries(retries, self.backoff, self.on_retry, timeout), attempt)
        self._timing_var.set(timing)
        return result

    async def scan_iter(self, chunks, op: str = "sum", exclusive: bool = False,
                        algorithm: Optional[str] = None) -> AsyncIterator[np.ndarray]:
        feeder = _chunking.ScanIterFeeder(
            (), lambda wire: pb.ScanRequest(header=self._scan_header(wire, op, exclusive, algorithm)),
            self.chunk_bytes)
        asm = _chunking.ScanIterAssembler(feeder)
        stream = self._stream(self._scan, _feed_async(feeder, chunks), self.timeout)  # never retried
        try:
            async for raw in stream:
                for arr in asm.feed(raw):
                    yield arr
        finally:
            await stream.aclose()
        if asm.current is not None:
            raise Internal("server returned fewer scan results than elements sent")
        self._timing_var.set(asm.timing or Timing())

    async def reduce(self, x, op: str = "sum", *, copy: bool = False, lanes: Optional[int] = None,
                     retries: Optional[int] = None):
        x, header = self._reduce_args(x, op, copy)
        retries = self._wanted_retries(retries)
        call = self._reduce_shared(x, header)
        if call is not None:
            with call:
                value = call.reduce_value(await self._unary(self._reduce, call.serialized(), self.timeout))
            self._timing_var.set(call.timing)
            return value
        per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)

        async def attempt(timeout: Optional[float]):
            k = await self._usable_lanes(lanes, len(x), per, timeout)
            if k > 1:
                raws: List[bytes] = [b""] * k
                reqs = self._lane_requests(header, _wire.REDUCE_DATA, x, per, k)
                await self._fan_out(list(zip(self._lanes(k, "Reduce"), reqs)), raws.__setitem__, timeout, unary=True)
                return self._reduce_lanes_result(raws, x.dtype, len(x))
            raw = await self._unary(self._reduce, _chunking.data_requests(header, _wire.REDUCE_DATA, x, per), timeout)
            return _chunking.reduce_value(raw, x.dtype)
        value, _, timing = await self._retrying(retries, attempt)
        self._timing_var.set(timing)
        return value

    async def _unary(self, method, requests, timeout: Optional[float]) -> bytes:
        """One stream-unary call (Reduce, Histogram): the serialized response."""
        call = method(requests, timeout=timeout)
        try:
            with raised():
                return await call
        except BaseException:
            call.cancel()
            raise

    async def histogram(self, x, bins=10, range=None, *, copy: bool = False,
                        retries: Optional[int] = None) -> HistogramResult:
        """As Client.histogram: numpy.histogram's bins and range; no lanes, shared memory or native path."""
        x, header = self._histogram_args(x, bins, range, copy)
        per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)

        async def attempt(timeout: Optional[float]):
            return _chunking.histogram_result(await self._unary(
                self._histogram, _chunking.data_requests(header, _wire.HISTOGRAM_DATA, x, per), timeout))
        result, timing = await self._retrying(self._wanted_retries(retries), attempt)
        self._timing_var.set(timing)
        return result

    async def compact(self, x, where=None, predicate=None, *, indices: bool = False, values: bool = True,
                      copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None):
        x, flags, header = self._compact_args(x, where, predicate, indices, values, copy)
        retries = self._wanted_retries(retries)
        call = self._compact_shared(x, where, flags, header, values, indices)
        if call is not None:
            with call:
                async for raw in self._stream(self._compact, call.serialized(), self.timeout):
                    call.feed_compact(raw)
                self._timing_var.set(call.finish())
            return self._compact_shared_result(call, values, indices)
        per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)

        async def attempt(timeout: Optional[float]) -> _chunking.CompactAssembler:
            asm = _chunking.CompactAssembler(x.dtype)  # per try: a failed try's pieces are dropped
            k = await self._usable_lanes(lanes, len(x), per, timeout)
            if k > 1:
                reqs = self._lane_requests(header, _wire.COMPACT_VALUES, x, per, k, flags)
                await self._fan_out(list(zip(self._lanes(k, "Compact"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                    timeout)
            else:
                async for raw in self._stream(self._compact,
                                              _chunking.data_requests(header, _wire.COMPACT_VALUES, x, per, flags),
                                              timeout):
                    asm.feed(raw)
            return asm
        asm = await self._retrying(retries, attempt)
        self._timing_var.set(asm.timing or Timing())
        return self._compact_result(asm, values, indices)

    async def info(self) -> Dict[str, Any]:
        return await self._info(self.timeout)

    async def _info(self, timeout: Optional[float]) -> Dict[str, Any]:
        with raised():
            return _types.server_info(await self._stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=timeout))

    async def health(self, service: str = "") -> str:
        try:
            raw = await self._health(encode_health_request(service), timeout=self.timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:  # the health service's answer for an unknown name
                return "SERVICE_UNKNOWN"
            raise from_rpc_error(e) from None
        return decode_health_response(raw)

    async def benchmark(self, operations=None, algorithms=None, dtypes=None, sizes=None, repetitions=0,
                        warmup=0, on_row: Optional[Callable[[dict], None]] = None, devices=None) -> _types.Table:
        req = _types.bench_request(operations, algorithms, dtypes, sizes, repetitions, warmup, devices)
        table = _types.Table()
        call = self._stub.Benchmark(req, timeout=self.timeout)
        try:
            with raised():
                async for row in call:
                    d = _types.bench_row(row)
                    table.append(d)
                    if on_row:
                        on_row(d)
        except BaseException:
            call.cancel()
            raise
        return table

    async def transport(self, total_bytes: int, echo: bool = True, chunk_bytes: Optional[int] = None,
                        lanes: int = 1) -> TransportResult:
        cb = int(chunk_bytes or self.chunk_bytes)
        total = int(total_bytes)
        lanes = check_lanes(lanes)  # Transport is not joined: not capped by max_lanes
        received = [0] * lanes
        finals: List[Dict[int, Any]] = [{} for _ in range(lanes)]

        def feed(lane: int, raw: bytes) -> None:
            f = _wire.parse(raw)
            if 1 in f:
                received[lane] += f[1][1] - f[1][0]
            if f.get(6):
                finals[lane] = f
        t0 = time.perf_counter()
        if lanes == 1:
            async for raw in self._stream(self._transport, _chunking.transport_requests(total, cb, echo), self.timeout):
                feed(0, raw)
        else:
            await self._fan_out([(m, _chunking.transport_requests(total, cb, echo, lane, lanes))
                                 for lane, m in enumerate(self._lanes(lanes, "Transport"))], feed, self.timeout)
        wall = time.perf_counter() - t0
        return TransportResult(bytes_in=sum(f.get(2, 0) for f in finals), bytes_out=sum(f.get(3, 0) for f in finals),
                               bytes_received=sum(received), requests=sum(f.get(5, 0) for f in finals),
                               wall_s=wall, server_total_us=max(f.get(4, 0) for f in finals))

    async def shared_array(self, n: int, dtype="int32", *, dir: Optional[str] = None,
                           mode: int = shared.DEFAULT_MODE) -> shared.SharedArray:
        """As Client.shared_array (a coroutine: it may ask the server for its --shm-dir):
        `with await c.shared_array(n, "int32") as a: ...; y = await c.scan(a)`."""
        if dir is None:
            dir = shared.default_dir((await self.info())["limits"])
        return shared.create(n, dtype, dir, mode)
