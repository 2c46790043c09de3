"""What Client and AsyncClient share besides the operations (_ops) and transports (_transport):
their settings, channels and lane channels, shared-memory arenas, per-call options, and the
stepping of a call's program of effects (_effects)."""
from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import grpc

from . import _chunking, _device, _resident, _retry, _types, shared
from ._channel import check_lanes, lane_channel_args, method_path
from ._checks import scan_header
from ._effects import Program, Stepper
from ._pipeline import Pipeline
from ._types import DataPath, check_int
from .errors import from_rpc_error
from .v1 import gpuscan_pb2 as pb
from .v1 import gpuscan_pb2_grpc as pb_grpc

# The data RPCs and their shapes (the multi-callables a channel makes for them).
_STREAM_STREAM = ("Scan", "Compact", "SegmentedScan", "ReduceByKey", "Sort", "Scan2D", "Transport", "Pipeline")
_STREAM_UNARY = ("Reduce", "Histogram", "PutArray")
_UNARY_STREAM = ("GetArray",)
_UNARY_UNARY = ("DropArray", "ListArrays")


def data_methods(channel) -> Dict[str, Any]:
    """A grpc or grpc.aio channel's multi-callables of the data RPCs, by name. The data path
    sends and receives serialized bytes (see _wire)."""
    methods = {name: channel.stream_stream(method_path(name)) for name in _STREAM_STREAM}
    methods.update((name, channel.stream_unary(method_path(name))) for name in _STREAM_UNARY)
    methods.update((name, channel.unary_stream(method_path(name))) for name in _UNARY_STREAM)
    methods.update((name, channel.unary_unary(method_path(name))) for name in _UNARY_UNARY)
    return methods


class ClientBase:
    """Settings, channels and per-call options of both clients. `_grpc` is the module whose
    channels the client makes (grpc or grpc.aio: the same calls)."""

    _grpc: Any = grpc
    _awaits = False  # AsyncClient: its methods are coroutines (RemoteArray asks)

    def _init_common(self, target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry,
                     shm_arena_bytes=None, tenant=None):
        self.target = target
        # tenant=: the gpuscan-tenant metadata on every call (None: none, the default tenant).
        self._metadata = _resident.check_tenant(tenant)
        self.tenant = None if self._metadata is None else tenant
        # shared_array's arenas, one per (directory, mode), made on first use (see shared.Arena).
        self._arenas: Dict[Tuple[str, int], shared.Arena] = {}
        self._arena_lock = threading.Lock()
        self._arena_bytes = None if shm_arena_bytes is None else check_int(shm_arena_bytes, "shm_arena_bytes", 1)
        self.timeout = None if timeout is None or timeout == 0 else float(timeout)
        self.lanes = check_lanes(lanes)
        if int(chunk_bytes) < 1:
            raise ValueError(f"gpuscan: chunk_bytes must be positive, got {chunk_bytes}")
        self.chunk_bytes = int(chunk_bytes)
        self.retries = _retry.check_retries(retries)
        self.backoff = _retry.check_backoff(backoff)
        self.on_retry = _retry.check_on_retry(on_retry)
        self._native: Any = None  # Client's _native.NativeClient where it takes the native path
        self._max_lanes: Optional[int] = None  # the server's Limits.max_lanes, asked once
        self._served: Set[str] = set()  # what info()["operations"] listed of what calls needed
        self._device_server: Optional[pb.ServerInfo] = None  # its ServerInfo, kept once it serves device memory
        self._data_path = DataPath("grpcio", reason="grpc.aio: AsyncClient has no native path")
        # Lanes: one channel (connection) each, made on first use, reused, closed with the client.
        self._lane_channels: List[Any] = []
        self._lane_methods: List[Dict[str, Any]] = []
        self._lane_lock = threading.Lock()
        self._closed = False

    def pipeline(self) -> Pipeline:
        """A new Pipeline of this client: stages added with p.scan(x, ...), p.reduce, p.histogram,
        p.compact, p.segmented_scan, p.sort and p.argsort (each its call's arguments; inputs
        RemoteArrays, earlier stages and at most one host array) run on the server in order as one
        call: `res = p.run()` (AsyncClient: `await p.run()`), res[stage] what the stage's call
        returns. Nothing is sent before run(). See gpuscan.Pipeline and docs/python.md, "Pipelines"."""
        return Pipeline(self)

    def _carve(self, n, dtype, dir: str, mode: int, zero: bool) -> shared.SharedArray:
        """n elements of dtype out of this client's arena in dir (made on first use)."""
        with self._arena_lock:
            arena = self._arenas.get((dir, mode))
            if arena is None:
                arena = self._arenas[(dir, mode)] = shared.Arena(dir, mode, self._arena_bytes)
        return arena.carve(n, dtype, zero)

    def _close_arenas(self) -> None:
        with self._arena_lock:
            arenas, self._arenas = list(self._arenas.values()), {}
        for a in arenas:
            a.close()

    @property
    def data_path(self) -> DataPath:
        """The path this client's scan, reduce and compact of plain arrays take: DataPath("native",
        library=its file) or DataPath("grpcio", reason=why not native); also info()["data_path"]."""
        return self._data_path

    def _with_data_path(self, info: Dict[str, Any]) -> Dict[str, Any]:
        info["data_path"] = self._data_path.as_dict()
        return info

    def _new_channel(self, creds, args):
        if creds is not None:
            return self._grpc.secure_channel(self.target, creds, options=args)
        return self._grpc.insecure_channel(self.target, options=args)

    def _bind(self, creds, args, options, tls) -> None:
        """The main channel, its stub (for the calls other than the data path's) and data methods."""
        self._channel = self._new_channel(creds, args)
        self._stub = pb_grpc.GpuScanStub(self._channel)
        self._methods = data_methods(self._channel)
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check")
        self._lane_args = (creds, options, tls)

    def _lanes(self, k: int, method: str):
        """The multi-callable `method` on each of k lane channels."""
        with self._lane_lock:
            if self._closed:
                raise ValueError("gpuscan: the client is closed")
            creds, options, tls = self._lane_args
            while len(self._lane_channels) < k:
                ch = self._new_channel(creds, lane_channel_args(self.chunk_bytes, options, tls,
                                                                len(self._lane_channels)))
                self._lane_channels.append(ch)
                self._lane_methods.append(data_methods(ch))
            return [m[method] for m in self._lane_methods[:k]]

    def _take_lane_channels(self) -> list:
        """Marks the client closed; the lane channels, for the caller to close."""
        with self._lane_lock:
            self._closed = True
            channels, self._lane_channels, self._lane_methods = self._lane_channels, [], []
        return channels

    def _with_tenant(self, metadata):
        """A call's metadata with the tenant's added (None where both are none)."""
        if self._metadata is None:
            return metadata
        return tuple(metadata or ()) + self._metadata

    def _wanted_lanes(self, lanes) -> int:
        return self.lanes if lanes is None else check_lanes(lanes)

    def _call_options(self, retries, timeout) -> Tuple[int, Optional[float]]:
        """A call's retries= and timeout=, checked (ValueError), None meaning the client's."""
        return self.retries if retries is None else _retry.check_retries(retries), self._call_timeout(timeout)

    def _call_timeout(self, timeout) -> Optional[float]:
        """A call's timeout= in seconds: None is the client's timeout, 0 none."""
        if timeout is None:
            return self.timeout
        try:
            if isinstance(timeout, (bool, str)):
                raise TypeError
            t = float(timeout)
        except (TypeError, ValueError):
            t = math.nan
        if not (math.isfinite(t) and t >= 0):
            raise ValueError(f"gpuscan: timeout must be seconds >= 0 (0: none; None: the client's), got {timeout!r}")
        return None if t == 0 else t

    def _tries(self, retries: int, timeout: Optional[float]) -> _retry.Tries:
        """The bookkeeping of one call's tries; its deadline (`timeout` seconds, the call's: every
        try and wait) starts now."""
        return _retry.Tries(retries, self.backoff, self.on_retry, timeout)

    @staticmethod
    def _stepper(program: Program) -> Tuple[Stepper, Any]:
        """A program about to be driven, and its first effect."""
        stepper = Stepper(program)
        return stepper, stepper.step()

    def _scan_iter_parts(self, chunks, op, exclusive, algorithm, timeout):
        """scan_iter's (feeder of the requests, assembler of the results, timeout)."""
        timeout = self._call_timeout(timeout)
        feeder = _chunking.ScanIterFeeder(
            self._host_chunks(chunks),
            lambda wire: pb.ScanRequest(header=scan_header(wire, op, exclusive, algorithm)), self.chunk_bytes)
        return feeder, _chunking.ScanIterAssembler(feeder), timeout

    @staticmethod
    def _host_chunks(chunks):
        """scan_iter's arrays, each refused when it is a CUDA array (no device path)."""
        for c in chunks:
            _resident.refuse("scan_iter", chunk=c)
            _device.refuse("scan_iter", chunk=c)
            yield c

    @staticmethod
    def _health_failed(e: grpc.RpcError) -> str:
        """health()'s answer to a failed Check: the health service's NOT_FOUND for an unknown
        name is SERVICE_UNKNOWN; anything else is raised as a gpuscan.Error."""
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        raise from_rpc_error(e) from None

    @staticmethod
    def _bench_table(on_row) -> Tuple[_types.Table, Callable[[Any], None]]:
        """benchmark()'s table and the function that adds a BenchmarkRow to it (and to on_row)."""
        table = _types.Table()

        def add(row) -> None:
            d = _types.bench_row(row)
            table.append(d)
            if on_row:
                on_row(d)
        return table, add
