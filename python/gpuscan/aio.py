"""gpuscan.AsyncClient: the Client's methods as coroutines on grpc.aio (same arguments, results and
errors). scan_iter is an async generator taking a sync or async iterable of arrays. Striped lanes run
as one asyncio task per lane, each call on its own grpc.aio channel. Shared memory as the Client's
(shared_array is a coroutine); CUDA arrays as the Client's (their export, and the wait for their
stream, runs on the event loop's thread: a stream belongs to its thread)."""
from __future__ import annotations

import asyncio
import contextvars
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple, Union

import grpc
import grpc.aio
import numpy as np

from . import _chunking, _device, _retry, _types, shared
from ._types import HistogramResult, Timing, TransportResult
from .client import (DEFAULT_CHUNK_BYTES, Client, Tls, _Calls, _Prepared, channel_args, channel_credentials,
                     decode_health_response, encode_health_request, lane_channel_args)
from .errors import Internal, from_rpc_error, raised
from .v1 import gpuscan_pb2 as pb


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
            _device.refuse("scan_iter", chunk=arr)
            for r in feeder.requests_for(arr):
                yield r
    else:
        for arr in chunks:
            _device.refuse("scan_iter", chunk=arr)
            for r in feeder.requests_for(arr):
                yield r
    for r in feeder.finish():
        yield r


def _client_doc(note: str = ""):
    """Decorator: the coroutine takes the docstring of the Client method of its name (one text for
    both clients), after a line saying so and `note` (what differs)."""
    def take(fn):
        sync = getattr(Client, fn.__name__)
        head = f"As Client.{fn.__name__}, awaited" + (f"; {note}" if note else ".")
        fn.__doc__ = head + "\n\n" + inspect.cleandoc(sync.__doc__ or "")
        return fn
    return take


class AsyncClient(_Calls):
    """Asynchronous gpuscan client on grpc.aio; `async with AsyncClient(target) as c: await c.scan(x)`.
    Arguments as Client's, retries and timeout= included (the waits are asyncio.sleep; on_retry is
    called on the event loop). No native path: data_path is always "grpcio"."""

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: Union[None, bool, Tls] = None,
                 timeout: Optional[float] = None, lanes: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 load_balancing_policy: Optional[str] = None, options=None, retries: int = 0,
                 backoff: Tuple[float, float] = (0.1, 2.0), on_retry: Optional[_retry.OnRetry] = None,
                 shm_arena_bytes: Optional[int] = None):
        self._init_common(target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry, shm_arena_bytes)
        args = channel_args(self.chunk_bytes, load_balancing_policy, options, tls)
        creds = channel_credentials(tls, credentials)
        self._bind(grpc.aio.secure_channel(target, creds, options=args) if creds is not None
                   else grpc.aio.insecure_channel(target, options=args))
        # Per task, as the sync client's is per thread: concurrent tasks each see their own.
        self._timing_var: contextvars.ContextVar = contextvars.ContextVar(f"gpuscan_timing_{id(self)}", default=None)
        # Lanes: one channel (connection) each, made on first use, reused, closed with the client.
        self._lane_args = (target, creds, options, tls)
        self._lane_channels: List[grpc.aio.Channel] = []
        self._lane_methods: List[Dict[str, Any]] = []
        self._closed = False

    async def close(self) -> None:
        """Closes the channel and the lanes' channels (calls in flight are cancelled). The
        shared-memory arena's files are unlinked: its arrays stay valid, calls stream them."""
        self._close_arenas()
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
            self._lane_methods.append(self._lane_methods_of(ch))
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
                       unary: bool = False, metadata=None) -> None:
        """Runs one call per lane at once, as tasks: streams is a list of (method, request
        iterator). Every response goes to feed(lane, raw). The first failure cancels every lane and
        is raised (see _chunking.first_failure); cancelling the awaiting task cancels them all."""
        calls = [method(reqs, timeout=timeout, metadata=metadata) for method, reqs in streams]
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
            if upload.error is not None:  # the source failed and cancelled the call: grpc.aio says CancelledError
                raise upload.error from None
            raise
        if upload.error is not None:
            raise upload.error

    async def _stream_header_only(self, call, method, timeout: Optional[float], feed) -> None:
        """As Client._stream_header_only (grpcio's stream: no native path here)."""
        with call:
            async for raw in self._stream(method, call.serialized(), timeout):
                feed(raw)
            self._timing_var.set(call.finish())

    async def _header_only(self, p: _Prepared):
        """As Client._header_only."""
        if p.device is not None:
            p.device.export(await self._device_info(p.timeout), self.target)
            return p.device
        return p.shared

    async def _device_info(self, timeout: Optional[float]) -> "pb.ServerInfo":
        """As Client._device_info."""
        info = self._device_server
        if info is None:
            info = await self._info_message(timeout)
            if info.limits.device_ipc:
                self._device_server = info
        return info

    async def _retrying(self, p: _Prepared, attempt: Callable[[Optional[float]], Awaitable[Any]]) -> Any:
        """As Client._retrying, for a coroutine function attempt(timeout)."""
        return await _retry.run_async(self._tries(p.retries, p.timeout), attempt)

    @_client_doc("no native path")
    async def scan(self, x, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None,
                   out: Optional[np.ndarray] = None, *, axis: Optional[int] = None, dtype=None,
                   copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                   timeout: Optional[float] = None) -> np.ndarray:
        x, axis = self._scan_axis(x, axis, algorithm, copy)
        if axis is not None:
            p = self._prepare_scan2d(x, op, out, copy, retries, timeout, axis, exclusive, dtype)
            if not self._axis_served:
                self._check_axis_served((await self._info(p.timeout))["operations"])
            return await self._scanned(p, self._scan2d)
        x, accumulate = self._with_dtype(x, dtype, copy)
        if accumulate is not None:
            return await self._scanned(self._prepare_narrow(x, accumulate, op, exclusive, algorithm, out, copy,
                                                            retries, timeout, True), self._scan)
        p = self._prepare_scan(x, op, exclusive, algorithm, out, copy, retries, timeout)
        call = await self._header_only(p)
        if call is not None:  # never retried: an in-place scan may have written over its input
            await self._stream_header_only(call, self._scan, p.timeout, call.feed_scan)
            return call.result

        async def attempt(timeout: Optional[float]) -> Timing:
            k = await self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:
                asm = _chunking.ScanAssembler(p.out, (p.per, k))
                reqs, md = p.lane_requests(k)
                await self._fan_out(list(zip(self._lanes(k, "Scan"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                    timeout, metadata=md)
            else:
                asm = _chunking.ScanAssembler(p.out)
                async for raw in self._stream(self._scan, p.requests(), timeout):
                    asm.feed(raw)
            return asm.finish()
        self._timing_var.set(await self._retrying(p, attempt))
        return p.out

    async def _scanned(self, p: _Prepared, method) -> np.ndarray:
        """As Client._scanned."""
        async def attempt(timeout: Optional[float]) -> Timing:
            asm = _chunking.ScanAssembler(p.out)
            async for raw in self._stream(method, p.requests(), timeout):
                asm.feed(raw)
            return asm.finish()
        self._timing_var.set(await self._retrying(p, attempt))
        return p.out if p.result is None else p.result

    @_client_doc("no native path")
    async def segmented_scan(self, x, keys=None, *, heads=None, op: str = "sum", exclusive: bool = False,
                             out: Optional[np.ndarray] = None, dtype=None, copy: bool = False,
                             timeout: Optional[float] = None, retries: Optional[int] = None) -> np.ndarray:
        p = self._prepare_segmented(x, keys, heads, op, exclusive, out, copy, retries, timeout, dtype)
        call = await self._header_only(p)
        if call is not None:  # never retried: an in-place scan may have written over its input
            await self._stream_header_only(call, self._segmented, p.timeout, call.feed_scan)
            return call.result
        return await self._scanned(p, self._segmented)

    @_client_doc()
    async def scan2d(self, x, op: str = "sum", *, out: Optional[np.ndarray] = None, dtype=None, copy: bool = False,
                     timeout: Optional[float] = None, retries: Optional[int] = None) -> np.ndarray:
        return await self._scanned(self._prepare_scan2d(x, op, out, copy, retries, timeout, dtype=dtype),
                                   self._scan2d)

    @_client_doc()
    async def reduce_by_key(self, x, keys, *, op: str = "sum", dtype=None, copy: bool = False,
                            timeout: Optional[float] = None,
                            retries: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        p = self._prepare_reduce_by_key(x, keys, op, copy, retries, timeout, dtype)

        async def attempt(timeout: Optional[float]):
            asm = _chunking.ReduceByKeyAssembler(p.side.dtype, p.result_dtype, len(p.x))
            async for raw in self._stream(self._reduce_by_key, p.requests(), timeout):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = await self._retrying(p, attempt)
        self._timing_var.set(timing)
        return result

    @_client_doc()
    async def sort(self, x, *, values=None, descending: bool = False, copy: bool = False,
                   timeout: Optional[float] = None, retries: Optional[int] = None):
        p = self._prepare_sort(x, values, descending, pb.SORT_OUTPUT_KEYS, copy, retries, timeout)
        keys, vals, _ = await self._sorted(p)
        return keys if values is None else (keys, vals)

    @_client_doc()
    async def argsort(self, x, *, descending: bool = False, return_keys: bool = False, copy: bool = False,
                      timeout: Optional[float] = None, retries: Optional[int] = None):
        output = pb.SORT_OUTPUT_KEYS_AND_INDICES if return_keys else pb.SORT_OUTPUT_INDICES
        keys, _, indices = await self._sorted(self._prepare_sort(x, None, descending, output, copy, retries, timeout))
        return (keys, indices) if return_keys else indices

    async def _sorted(self, p: _Prepared):
        """As Client._sorted."""
        call = await self._header_only(p)
        if call is not None:  # never retried
            await self._stream_header_only(call, self._sort, p.timeout, call.feed_sort)
            return call.keys, call.sorted_values, call.indices

        async def attempt(timeout: Optional[float]):
            asm = self._sort_assembler(p.x, p.side, p.request)
            async for raw in self._stream(self._sort, p.requests(), timeout):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = await self._retrying(p, attempt)
        self._timing_var.set(timing)
        return result

    @_client_doc("an async generator (`async for y in c.scan_iter(chunks)`); chunks may be a sync or an "
                 "async iterable, read on the event loop")
    async def scan_iter(self, chunks, op: str = "sum", exclusive: bool = False,
                        algorithm: Optional[str] = None, *, timeout: Optional[float] = None
                        ) -> AsyncIterator[np.ndarray]:
        feeder, asm, timeout = self._scan_iter_parts((), op, exclusive, algorithm, timeout)
        stream = self._stream(self._scan, _feed_async(feeder, chunks), timeout)  # never retried
        try:
            async for raw in stream:
                for arr in asm.feed(raw):
                    yield arr
        finally:
            await stream.aclose()
        if asm.current is not None:
            raise Internal("server returned fewer scan results than elements sent")
        self._timing_var.set(asm.timing or Timing())

    @_client_doc("no native path")
    async def reduce(self, x, op: str = "sum", *, dtype=None, copy: bool = False, lanes: Optional[int] = None,
                     retries: Optional[int] = None, timeout: Optional[float] = None):
        x, accumulate = self._with_dtype(x, dtype, copy)
        if accumulate is not None:
            p = self._prepare_narrow(x, accumulate, op, False, None, None, copy, retries, timeout, False)

            async def narrow_attempt(timeout: Optional[float]):
                return _chunking.reduce_value(await self._unary(self._reduce, p.requests(), timeout), accumulate[1])
            value, _, timing = await self._retrying(p, narrow_attempt)
            self._timing_var.set(timing)
            return value
        p = self._prepare_reduce(x, op, copy, retries, timeout)
        call = await self._header_only(p)
        if call is not None:
            with call:
                value = call.reduce_value(await self._unary(self._reduce, call.serialized(), p.timeout))
            self._timing_var.set(call.timing)
            return value

        async def attempt(timeout: Optional[float]):
            k = await self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:
                raws: List[bytes] = [b""] * k
                reqs, md = p.lane_requests(k)
                await self._fan_out(list(zip(self._lanes(k, "Reduce"), reqs)), raws.__setitem__, timeout, unary=True,
                                    metadata=md)
                return self._reduce_lanes_result(raws, p.x.dtype, len(p.x))
            return _chunking.reduce_value(await self._unary(self._reduce, p.requests(), timeout), p.x.dtype)
        value, _, timing = await self._retrying(p, attempt)
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

    @_client_doc()
    async def histogram(self, x, bins=10, range=None, *, copy: bool = False,
                        retries: Optional[int] = None, timeout: Optional[float] = None) -> HistogramResult:
        p = self._prepare_histogram(x, bins, range, copy, retries, timeout)
        call = await self._header_only(p)
        if call is not None:
            with call:
                if call.needs_range:
                    call.set_range(*[await self._unary(self._reduce, [r], p.timeout) for r in call.range_requests()])
                result = call.histogram_value(await self._unary(self._histogram, call.serialized(), p.timeout))
            self._timing_var.set(call.timing)
            return result

        async def attempt(timeout: Optional[float]):
            return _chunking.histogram_result(await self._unary(self._histogram, p.requests(), timeout))
        result, timing = await self._retrying(p, attempt)
        self._timing_var.set(timing)
        return result

    @_client_doc("no native path")
    async def compact(self, x, where=None, predicate=None, *, indices: bool = False, values: bool = True,
                      copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                      timeout: Optional[float] = None):
        p = self._prepare_compact(x, where, predicate, indices, values, copy, retries, timeout)
        call = await self._header_only(p)
        if call is not None:
            await self._stream_header_only(call, self._compact, p.timeout, call.feed_compact)
            return self._compact_header_only_result(call, values, indices)
        if p.narrow:
            lanes = 1  # the server takes a narrow x on one call

        async def attempt(timeout: Optional[float]) -> _chunking.CompactAssembler:
            asm = _chunking.CompactAssembler(p.x.dtype)  # per try: a failed try's pieces are dropped
            k = await self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:
                reqs, md = p.lane_requests(k)
                await self._fan_out(list(zip(self._lanes(k, "Compact"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                    timeout, metadata=md)
            else:
                async for raw in self._stream(self._compact, p.requests(), timeout):
                    asm.feed(raw)
            return asm
        asm = await self._retrying(p, attempt)
        self._timing_var.set(asm.timing or Timing())
        return self._compact_result(asm, values, indices)

    @_client_doc("data_path is always grpcio's")
    async def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._with_data_path(await self._info(self._call_timeout(timeout)))

    async def _info(self, timeout: Optional[float]) -> Dict[str, Any]:
        return _types.server_info(await self._info_message(timeout))

    async def _info_message(self, timeout: Optional[float]) -> "pb.ServerInfo":
        with raised():
            return await self._stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=timeout)

    @_client_doc()
    async def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        timeout = self._call_timeout(timeout)
        try:
            raw = await self._health(encode_health_request(service), timeout=timeout)
        except grpc.RpcError as e:
            return self._health_failed(e)
        return decode_health_response(raw)

    @_client_doc("on_row is called on the event loop")
    async def benchmark(self, operations=None, algorithms=None, dtypes=None, sizes=None, repetitions=0,
                        warmup=0, on_row: Optional[Callable[[dict], None]] = None, devices=None, *,
                        timeout: Optional[float] = None) -> _types.Table:
        req = _types.bench_request(operations, algorithms, dtypes, sizes, repetitions, warmup, devices)
        timeout = self._call_timeout(timeout)
        table, add = self._bench_table(on_row)
        call = self._stub.Benchmark(req, timeout=timeout)
        try:
            with raised():
                async for row in call:
                    add(row)
        except BaseException:
            call.cancel()
            raise
        return table

    @_client_doc()
    async def transport(self, total_bytes: int, echo: bool = True, chunk_bytes: Optional[int] = None,
                        lanes: int = 1, *, timeout: Optional[float] = None) -> TransportResult:
        timeout = self._call_timeout(timeout)
        tally = self._transport_tally(total_bytes, echo, chunk_bytes, lanes)
        if tally.lanes == 1:
            async for raw in self._stream(self._transport, tally.requests(), timeout):
                tally.feed(0, raw)
        else:
            streams = [(m, tally.requests(lane)) for lane, m in enumerate(self._lanes(tally.lanes, "Transport"))]
            await self._fan_out(streams, tally.feed, timeout, metadata=tally.metadata())
        return tally.result()

    @_client_doc("a coroutine (it may ask the server for its --shm-dir): "
                 "`with await c.shared_array(n, \"int32\") as a: ...; y = await c.scan(a)`")
    async def shared_array(self, n: int, dtype="int32", *, dir: Optional[str] = None,
                           mode: int = shared.DEFAULT_MODE, timeout: Optional[float] = None,
                           zero: bool = True) -> shared.SharedArray:
        if dir is None:
            dir = shared.default_dir((await self.info(timeout=timeout))["limits"])
        return self._carve(n, dtype, dir, mode, zero)
