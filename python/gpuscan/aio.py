"""gpuscan.AsyncClient: the Client's methods as coroutines on grpc.aio (same arguments, results and
errors). The operations (_ops) and transports (_transport) are the Client's: this client only
awaits their effects (_effects). scan_iter is an async generator taking a sync or async iterable
of arrays. Striped lanes run as one asyncio task per lane, each call on its own grpc.aio channel.
Shared memory as the Client's (shared_array is a coroutine); CUDA arrays as the Client's (their
export, and the wait for their stream, runs on the event loop's thread: a stream belongs to its
thread)."""
from __future__ import annotations

import asyncio
import contextvars
import inspect
from typing import (Any, AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Dict, Iterable, List,
                    Optional, Tuple, TypeVar, Union, cast)

import grpc
import grpc.aio
import numpy.typing as npt

from . import _chunking, _device, _ops, _resident, _retry, _tally, _transport, _types, shared
from ._base import ClientBase
from ._channel import Tls, channel_args, channel_credentials, decode_health_response, encode_health_request
from ._effects import STREAMED_REPLY, UNARY, Call, HeaderOnly, Info, Lanes, Program, Retry, Single
from ._types import HistogramResult, Timing, TransportResult
from .client import DEFAULT_CHUNK_BYTES, Client
from .errors import Internal, from_rpc_error, raised
from .v1 import gpuscan_pb2 as pb


def _lost_status(error: Any, upload: "_AsyncUpload") -> Any:
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

    def __init__(self, requests: Any) -> None:
        self._requests = requests
        self.error: Optional[BaseException] = None
        self.call: Any = None
        self.finished = False  # every request was handed to grpc

    def _ended(self) -> bool:
        """The call has its status: writing more would only fail. (grpcio's aio then reports
        INTERNAL "Internal error from Core" in place of the server's status, grpc/grpc#36066, when
        the failed write is handled after the status: so no write is issued once it is in.)"""
        return self.call is not None and self.call.done()

    async def __aiter__(self) -> AsyncIterator[Any]:
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


async def _feed_async(feeder: _chunking.ScanIterFeeder, chunks: Any) -> AsyncIterator[bytes]:
    if hasattr(chunks, "__aiter__"):
        async for arr in chunks:
            _resident.refuse("scan_iter", chunk=arr)
            _device.refuse("scan_iter", chunk=arr)
            for r in feeder.requests_for(arr):
                yield r
    else:
        for arr in chunks:
            _resident.refuse("scan_iter", chunk=arr)
            _device.refuse("scan_iter", chunk=arr)
            for r in feeder.requests_for(arr):
                yield r
    for r in feeder.finish():
        yield r


_F = TypeVar("_F", bound=Callable[..., Any])


def _client_doc(note: str = "") -> Callable[[_F], _F]:
    """Decorator: the coroutine takes the docstring of the Client method of its name (one text for
    both clients), after a line saying so and `note` (what differs)."""
    def take(fn: _F) -> _F:
        sync = getattr(Client, fn.__name__)
        head = f"As Client.{fn.__name__}, awaited" + (f"; {note}" if note else ".")
        fn.__doc__ = head + "\n\n" + inspect.cleandoc(sync.__doc__ or "")
        return fn
    return take


class AsyncClient(ClientBase):
    """Asynchronous gpuscan client on grpc.aio; `async with AsyncClient(target) as c: await c.scan(x)`.
    Arguments as Client's, retries and timeout= included (the waits are asyncio.sleep; on_retry is
    called on the event loop). No native path: data_path is always "grpcio"."""

    _grpc = grpc.aio
    _awaits = True

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: Union[None, bool, Tls] = None,
                 timeout: Optional[float] = None, lanes: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 load_balancing_policy: Optional[str] = None,
                 options: Union[None, Dict[str, Any], Iterable[Tuple[str, Any]]] = None, retries: int = 2,
                 backoff: Tuple[float, float] = (0.1, 2.0), on_retry: Optional[_retry.OnRetry] = None,
                 shm_arena_bytes: Optional[int] = None, tenant: Optional[str] = None) -> None:
        self._init_common(target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry, shm_arena_bytes,
                          tenant)
        self._bind(channel_credentials(tls, credentials), channel_args(self.chunk_bytes, load_balancing_policy,
                                                                       options, tls), options, tls)
        # Per task, as the sync client's is per thread: concurrent tasks each see their own.
        self._timing_var: contextvars.ContextVar[Optional[Timing]] = contextvars.ContextVar(
            f"gpuscan_timing_{id(self)}", default=None)

    async def close(self) -> None:
        """Closes the channel and the lanes' channels (calls in flight are cancelled). The
        shared-memory arena's files are unlinked: its arrays stay valid, calls stream them."""
        self._close_arenas()
        channels = self._take_lane_channels()
        await self._channel.close()
        for ch in channels:
            await ch.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def last_timing(self) -> Optional[Timing]:
        """The server's Timing of the current task's last completed call (None before one)."""
        return self._timing_var.get()

    def _set_timing(self, t: Optional[Timing]) -> None:
        self._timing_var.set(t)

    # -- running a call's program: each effect awaited
    async def _drive(self, program: Program) -> Any:
        stepper, effect = self._stepper(program)
        while not stepper.done:
            value, error = None, None
            try:
                value = await self._effect(effect)
            except BaseException as e:  # raised inside the program, where its `with` blocks see it
                error = e
            effect = stepper.step(value, error)
        return stepper.result

    async def _effect(self, e: Any) -> Any:
        if isinstance(e, (Call, HeaderOnly)):  # a header-only call: grpcio's, as any other here
            method, requests = self._methods[e.method], e.requests if isinstance(e, Call) else [e.request]
            if e.method in UNARY:
                e.feed(0, await self._unary(method, requests, e.timeout))
            else:
                async for raw in self._stream(method, requests, e.timeout):
                    e.feed(0, raw)
        elif isinstance(e, Lanes):
            await self._fan_out(list(zip(self._lanes(len(e.requests), e.method), e.requests)), e.feed, e.timeout,
                                unary=e.method in UNARY, metadata=self._with_tenant(e.metadata))
        elif isinstance(e, Single):
            call = self._methods[e.method](e.request, timeout=e.timeout, metadata=self._metadata)
            try:
                with raised():
                    if e.method in STREAMED_REPLY:
                        async for raw in call:
                            e.feed(0, raw)
                    else:
                        e.feed(0, await call)
            except BaseException:
                call.cancel()
                raise
        elif isinstance(e, Info):
            return await (self._info_message(e.timeout) if e.message else self._info(e.timeout))
        elif isinstance(e, Retry):
            return await _retry.run_async(self._tries(e.retries, e.timeout),
                                         lambda t: cast(Awaitable[object], self._drive(e.attempt(t))))
        else:
            raise TypeError(f"gpuscan: no such effect {e!r}")
        return None

    async def _fan_out(self, streams: List[Tuple[Any, Any]], feed: Callable[[int, bytes], None],
                       timeout: Optional[float], unary: bool = False, metadata: Any = None) -> None:
        """Runs one call per lane at once, as tasks: streams is a list of (method, request
        iterator). Every response goes to feed(lane, raw). The first failure cancels every lane and
        is raised (see _chunking.first_failure); cancelling the awaiting task cancels them all."""
        calls = [method(reqs, timeout=timeout, metadata=metadata) for method, reqs in streams]
        failures: List[BaseException] = []
        aborted = False

        def cancel_all() -> None:
            for c in calls:
                c.cancel()

        async def run(lane: int) -> None:
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

    async def _stream(self, method: Any, requests: Any, timeout: Optional[float]) -> AsyncGenerator[bytes, None]:
        upload = _AsyncUpload(requests)
        call = method(upload.__aiter__(), timeout=timeout, metadata=self._metadata)
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

    async def _unary(self, method: Any, requests: Any, timeout: Optional[float]) -> bytes:
        """One stream-unary call (Reduce, Histogram): the serialized response."""
        call = method(requests, timeout=timeout, metadata=self._metadata)
        try:
            with raised():
                return cast(bytes, await call)
        except BaseException:
            call.cancel()
            raise

    @_client_doc("no native path")
    async def scan(self, x: Any, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None,
                   out: Any = None, *, axis: Optional[int] = None, dtype: npt.DTypeLike = None,
                   copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                   timeout: Optional[float] = None, keep: bool = False, ttl: Optional[float] = None,
                   label: Optional[str] = None, carry: Any = None) -> Any:
        return await self._drive(_transport.run(self, _ops.scan(self, x, op, exclusive, algorithm, out, axis, dtype,
                                                                copy, lanes, retries, timeout, keep, ttl, label,
                                                                carry)))

    @_client_doc("no native path")
    async def segmented_scan(self, x: Any, keys: Any = None, *, heads: Any = None, op: str = "sum",
                             exclusive: bool = False, out: Any = None, dtype: npt.DTypeLike = None, copy: bool = False,
                             timeout: Optional[float] = None, retries: Optional[int] = None,
                             keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.segmented_scan(self, x, keys, heads, op, exclusive, out,
                                                                          copy, retries, timeout, dtype, keep, ttl,
                                                                          label)))

    @_client_doc()
    async def scan2d(self, x: Any, op: str = "sum", *, out: Any = None, dtype: npt.DTypeLike = None,
                     copy: bool = False, timeout: Optional[float] = None, retries: Optional[int] = None,
                     keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.scan2d(self, x, op, out, copy, retries, timeout, None,
                                                                  False, dtype, keep, ttl, label)))

    @_client_doc()
    async def reduce_by_key(self, x: Any, keys: Any, *, op: str = "sum", dtype: npt.DTypeLike = None,
                            copy: bool = False, timeout: Optional[float] = None, retries: Optional[int] = None,
                            keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.reduce_by_key(self, x, keys, op, copy, retries, timeout,
                                                                         dtype, keep, ttl, label)))

    @_client_doc()
    async def sort(self, x: Any, *, values: Any = None, descending: bool = False, copy: bool = False,
                   timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
                   ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.sort(self, x, values, descending, copy, retries, timeout,
                                                                keep, ttl, label)))

    @_client_doc()
    async def argsort(self, x: Any, *, descending: bool = False, return_keys: bool = False, copy: bool = False,
                      timeout: Optional[float] = None, retries: Optional[int] = None, keep: bool = False,
                      ttl: Optional[float] = None, label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.argsort(self, x, descending, return_keys, copy, retries,
                                                                   timeout, keep, ttl, label)))

    @_client_doc("an async generator (`async for y in c.scan_iter(chunks)`); chunks may be a sync or an "
                 "async iterable, read on the event loop")
    async def scan_iter(self, chunks: Union[Iterable[npt.ArrayLike], AsyncIterable[npt.ArrayLike]], op: str = "sum",
                        exclusive: bool = False, algorithm: Optional[str] = None, *, timeout: Optional[float] = None
                        ) -> AsyncIterator[npt.NDArray[Any]]:
        feeder, asm, timeout = self._scan_iter_parts((), op, exclusive, algorithm, timeout)
        stream = self._stream(self._methods["Scan"], _feed_async(feeder, chunks), timeout)  # never retried
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
    async def reduce(self, x: Any, op: str = "sum", *, dtype: npt.DTypeLike = None, copy: bool = False,
                     lanes: Optional[int] = None, retries: Optional[int] = None,
                     timeout: Optional[float] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.reduce(self, x, op, dtype, copy, lanes, retries, timeout)))

    @_client_doc()
    async def histogram(self, x: Any, bins: npt.ArrayLike = 10, range: Optional[Tuple[float, float]] = None, *,
                        copy: bool = False, retries: Optional[int] = None,
                        timeout: Optional[float] = None) -> HistogramResult:
        return cast(HistogramResult, await self._drive(_transport.run(self, _ops.histogram(self, x, bins, range, copy,
                                                                                            retries, timeout))))

    @_client_doc("no native path")
    async def compact(self, x: Any, where: Any = None, predicate: Any = None, *, indices: bool = False,
                      values: bool = True,
                      copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                      timeout: Optional[float] = None, keep: bool = False, ttl: Optional[float] = None,
                      label: Optional[str] = None) -> Any:
        return await self._drive(_transport.run(self, _ops.compact(self, x, where, predicate, indices, values, copy,
                                                                   lanes, retries, timeout, keep, ttl, label)))

    @_client_doc("a RemoteArray of this client: `await r.get()`, `await r.drop()`, `async with r:`")
    async def put(self, x: Any, *, ttl: Optional[float] = None, label: Optional[str] = None, copy: bool = False,
                  retries: Optional[int] = None, timeout: Optional[float] = None) -> _resident.RemoteArray:
        return cast(_resident.RemoteArray,
                    await self._drive(_resident.put(self, x, ttl, label, copy, retries, timeout)))

    @_client_doc()
    async def get(self, r: Union[_resident.RemoteArray, bytes], offset: int = 0, count: Optional[int] = None, *,
                  retries: Optional[int] = None, timeout: Optional[float] = None) -> npt.NDArray[Any]:
        return cast(npt.NDArray[Any], await self._drive(_resident.get(self, r, offset, count, retries, timeout)))

    @_client_doc()
    async def drop(self, r: Union[_resident.RemoteArray, bytes], *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return cast(Dict[str, Any], await self._drive(_resident.drop(self, r, timeout)))

    @_client_doc()
    async def arrays(self, *, timeout: Optional[float] = None) -> _resident.ResidentArrays:
        return cast(_resident.ResidentArrays, await self._drive(_resident.arrays(self, timeout)))

    @_client_doc("data_path is always grpcio's")
    async def info(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._with_data_path(await self._info(self._call_timeout(timeout)))

    async def _info(self, timeout: Optional[float]) -> Dict[str, Any]:
        return _types.server_info(await self._info_message(timeout))

    async def _info_message(self, timeout: Optional[float]) -> "pb.ServerInfo":
        with raised():
            return cast(pb.ServerInfo, await self._stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=timeout,
                                                                      metadata=self._metadata))

    @_client_doc()
    async def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        timeout = self._call_timeout(timeout)
        try:
            raw = await self._health(encode_health_request(service), timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            return self._health_failed(e)
        return decode_health_response(raw)

    @_client_doc("on_row is called on the event loop")
    async def benchmark(self, operations: Optional[Iterable[str]] = None, algorithms: Optional[Iterable[str]] = None,
                        dtypes: Optional[Iterable[npt.DTypeLike]] = None, sizes: Optional[Iterable[int]] = None,
                        repetitions: int = 0, warmup: int = 0,
                        on_row: Optional[Callable[[Dict[str, Any]], None]] = None,
                        devices: Optional[Iterable[int]] = None, *, timeout: Optional[float] = None) -> _types.Table:
        req = _types.bench_request(operations, algorithms, dtypes, sizes, repetitions, warmup, devices)
        timeout = self._call_timeout(timeout)
        table, add = self._bench_table(on_row)
        call = self._stub.Benchmark(req, timeout=timeout, metadata=self._metadata)
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
        tally = _tally.Tally(total_bytes, echo, int(chunk_bytes or self.chunk_bytes), lanes)
        return cast(TransportResult, await self._drive(_tally.program(tally, self._call_timeout(timeout))))

    @_client_doc("a coroutine (it may ask the server for its --shm-dir): "
                 "`with await c.shared_array(n, \"int32\") as a: ...; y = await c.scan(a)`")
    async def shared_array(self, n: int, dtype: npt.DTypeLike = "int32", *, dir: Optional[str] = None,
                           mode: int = shared.DEFAULT_MODE, timeout: Optional[float] = None,
                           zero: bool = True) -> shared.SharedArray:
        if dir is None:
            dir = shared.default_dir((await self.info(timeout=timeout))["limits"])
        return self._carve(n, dtype, dir, mode, zero)
