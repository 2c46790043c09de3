"""gpuscan.Client: the synchronous client (one grpc channel, plus one per lane for striped calls;
thread-safe, calls may run concurrently). Mirrors client/include/gpuscan/client.h: numpy arrays in,
numpy arrays and scalars out, every failure a gpuscan.Error; the chunking lives in _chunking, the
shared-memory regions in shared, CUDA arrays (device memory) in _device, the error mapping in errors.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import grpc
import numpy as np

from . import _chunking, _device, _native, _pump, _retry, _types, _wire, shared
from ._types import DataPath, HistogramResult, Timing, TransportResult, check_array, check_int
from .errors import Internal, Unimplemented, from_rpc_error, raised
from .v1 import gpuscan_pb2 as pb
from .v1 import gpuscan_pb2_grpc as pb_grpc

DEFAULT_CHUNK_BYTES = 1 << 20
# The room _native.NativeClient.header_call gives a final response, at least (a histogram's
# grows with its bins).
NATIVE_RESPONSE_BYTES = 64 << 10

_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


@dataclasses.dataclass(frozen=True)
class Tls:
    """TLS towards the server (PEM file paths; None = not used). tls=True means Tls()."""
    ca_file: Optional[str] = None      # CAs that sign the server's certificate; None = system roots
    cert_file: Optional[str] = None    # client certificate chain, for mutual TLS
    key_file: Optional[str] = None     # its private key
    server_name: Optional[str] = None  # name to verify the certificate against (default: target's host)

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path):
            if path is None:
                return None
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise ValueError(f"gpuscan: cannot read TLS file {path}: {e.strerror}") from None
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("gpuscan: TLS cert_file and key_file go together")
        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


def method_path(name: str) -> str:
    """'/gpuscan.v1.GpuScan/Scan', from the generated descriptor."""
    m = pb.DESCRIPTOR.services_by_name["GpuScan"].methods_by_name[name]
    return f"/{m.containing_service.full_name}/{m.name}"


def check_lanes(lanes) -> int:
    """A lanes argument as an int >= 1 (ValueError otherwise: 0, negatives, 2.5, "4", True)."""
    return _types.check_int(lanes, "lanes", 1)


def lane_channel_args(chunk_bytes: int, options, tls, lane: int) -> list:
    """Channel arguments of lane `lane`'s channel. As the C++ client does: a distinct argument per
    lane and a channel-local subchannel pool, so each lane gets its own TCP connection (channels
    with equal arguments would share one). No load-balancing policy: pick_first sends every lane
    of an array to the same server, which the server needs to join them."""
    return channel_args(chunk_bytes, None, options, tls) + [
        ("gpuscan.lane", lane), ("grpc.use_local_subchannel_pool", 1)]


# Keepalive while calls are active, as the C++ client sets it (docs/configuration.md, "Keepalive"):
# an unanswered ping closes a connection whose link went silent within time + timeout, failing its
# calls with UNAVAILABLE instead of leaving them to TCP (~15 min). The server accepts pings this
# often. The caller's options= win: a default whose key they name is left out.
KEEPALIVE_ARGS = [("grpc.keepalive_time_ms", 2000), ("grpc.keepalive_timeout_ms", 2000)]


def channel_args(chunk_bytes: int, load_balancing_policy: Optional[str], options, tls=None) -> list:
    args = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    user = list(options.items()) if isinstance(options, dict) else list(options or ())
    args += [kv for kv in KEEPALIVE_ARGS if kv[0] not in {k for k, _ in user}]
    if isinstance(tls, Tls) and tls.server_name:
        args.append(("grpc.ssl_target_name_override", tls.server_name))
    if load_balancing_policy:
        args.append(("grpc.lb_policy_name", load_balancing_policy))
    return args + user


def channel_credentials(tls, credentials):
    if credentials is not None:
        return credentials
    if tls is True:
        tls = Tls()
    return tls.credentials() if isinstance(tls, Tls) else None


def encode_health_request(service: str) -> bytes:
    s = service.encode()
    return _wire.field_prefix(1, len(s)) + s if s else b""


def decode_health_response(raw: bytes) -> str:
    return _HEALTH_STATUS.get(_wire.parse(raw).get(1, 0), "UNKNOWN")


@dataclasses.dataclass
class _Prepared:
    """One data call's checked arguments (from a _Calls._prepare_* method): what both clients' drivers
    of that call need, so that the checks, the headers and the request framing live once."""
    x: Any                              # the input, 1-D (scan2d: the matrix flattened; device: the caller's)
    request: Any                        # the first request (its header)
    retries: int                        # retries of the grpcio path (0 where a retry could not replay)
    timeout: Optional[float]            # this call's deadline in seconds (None: none)
    data_field: int                     # the requests' data field (_wire)
    per: int = 0                        # elements per request
    side: Optional[np.ndarray] = None   # compact's flags, the keys or heads, the values: beside x's chunks
    side_field: int = _wire.COMPACT_FLAGS
    out: Optional[np.ndarray] = None    # a scan's output (1-D)
    result: Any = None                  # what the call returns when not `out` (scan2d: the 2-D out)
    shared: Optional[shared.Call] = None  # x lies in shared memory: this call, nothing streamed
    device: Optional[_device.Call] = None  # x lies in device memory: this call, nothing streamed
    narrow: bool = False                # x travels narrow (1-2 bytes an element): one stream, no lanes
    result_dtype: Optional[np.dtype] = None  # reduce_by_key: the runs' values' (a narrow x's accumulator)

    def requests(self) -> Iterator[bytes]:
        """The whole array's serialized requests, for one call."""
        return _chunking.data_requests(self.request, self.data_field, self.x, self.per, self.side,
                                       flags_field=self.side_field)

    def lane_requests(self, k: int) -> tuple:
        """(k lanes' request iterators, their metadata): see _Calls._lane_requests."""
        return _Calls._lane_requests(self.request, self.data_field, self.x, self.per, k, self.side)


class _TransportTally:
    """transport()'s bookkeeping, for both clients: each lane's requests, the responses fed in
    (any lane), and the TransportResult."""

    def __init__(self, total_bytes: int, echo: bool, chunk_bytes: int, lanes: int):
        self.total, self.echo, self.chunk_bytes = int(total_bytes), echo, chunk_bytes
        self.lanes = check_lanes(lanes)  # Transport is not joined: not capped by max_lanes
        self.received = [0] * self.lanes
        self.finals: List[Dict[int, Any]] = [{} for _ in range(self.lanes)]
        self.t0 = time.perf_counter()

    @staticmethod
    def metadata() -> tuple:
        """The lanes' call metadata: a fresh array id, so a balancer sends them to one replica, as
        a striped array's lanes."""
        return _chunking.array_id_metadata(os.urandom(16))

    def requests(self, lane: int = 0):
        if self.lanes == 1:
            return _chunking.transport_requests(self.total, self.chunk_bytes, self.echo)
        return _chunking.transport_requests(self.total, self.chunk_bytes, self.echo, lane, self.lanes)

    def feed(self, lane: int, raw: bytes) -> None:
        f = _wire.parse(raw)
        if 1 in f:
            self.received[lane] += f[1][1] - f[1][0]
        if f.get(6):
            self.finals[lane] = f

    def result(self) -> TransportResult:
        wall = time.perf_counter() - self.t0
        finals = self.finals
        return TransportResult(bytes_in=sum(f.get(2, 0) for f in finals), bytes_out=sum(f.get(3, 0) for f in finals),
                               bytes_received=sum(self.received), requests=sum(f.get(5, 0) for f in finals),
                               wall_s=wall, server_total_us=max(f.get(4, 0) for f in finals))


class _Calls:
    """Argument checking and header building shared by Client and AsyncClient."""

    def _init_common(self, target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry,
                     shm_arena_bytes=None):
        self.target = target
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
        self._max_lanes: Optional[int] = None  # the server's Limits.max_lanes, asked once
        self._axis_served = False  # the server lists "scan_axis" (asked until it does)
        self._device_server: Optional[pb.ServerInfo] = None  # its ServerInfo, kept once it serves device memory
        self._data_path = DataPath("grpcio", reason="grpc.aio: AsyncClient has no native path")

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

    def _bind(self, channel) -> None:
        """The main channel's stub and multi-callables (a grpc or a grpc.aio channel: the same calls).
        The data path sends and receives serialized bytes (see _wire); the rest uses the stub."""
        self._channel = channel
        self._stub = pb_grpc.GpuScanStub(channel)
        self._scan = channel.stream_stream(method_path("Scan"))
        self._reduce = channel.stream_unary(method_path("Reduce"))
        self._compact = channel.stream_stream(method_path("Compact"))
        self._histogram = channel.stream_unary(method_path("Histogram"))
        self._segmented = channel.stream_stream(method_path("SegmentedScan"))
        self._reduce_by_key = channel.stream_stream(method_path("ReduceByKey"))
        self._sort = channel.stream_stream(method_path("Sort"))
        self._scan2d = channel.stream_stream(method_path("Scan2D"))
        self._transport = channel.stream_stream(method_path("Transport"))
        self._health = channel.unary_unary("/grpc.health.v1.Health/Check")

    @staticmethod
    def _lane_methods_of(ch) -> Dict[str, Any]:
        """A lane channel's multi-callables (Scan, Compact, Transport: stream-stream; Reduce: stream-unary)."""
        return {"Scan": ch.stream_stream(method_path("Scan")), "Reduce": ch.stream_unary(method_path("Reduce")),
                "Compact": ch.stream_stream(method_path("Compact")),
                "Transport": ch.stream_stream(method_path("Transport"))}

    def _wanted_lanes(self, lanes) -> int:
        return self.lanes if lanes is None else check_lanes(lanes)

    def _wanted_retries(self, retries) -> int:
        return self.retries if retries is None else _retry.check_retries(retries)

    def _call_options(self, retries, timeout) -> Tuple[int, Optional[float]]:
        """A call's retries= and timeout=, checked (ValueError), None meaning the client's."""
        return self._wanted_retries(retries), self._call_timeout(timeout)

    def _tries(self, retries: int, timeout: Optional[float]) -> _retry.Tries:
        """The bookkeeping of one call's tries; its deadline (`timeout` seconds, the call's: every
        try and wait) starts now."""
        return _retry.Tries(retries, self.backoff, self.on_retry, timeout)

    # -- each data call's arguments, checked before any call (ValueError; a bitwise operator on
    # floats: InvalidArgument): see _Prepared
    def _prepare_scan(self, x, op, exclusive, algorithm, out, copy, retries, timeout) -> _Prepared:
        """x a CUDA array: .device, the call; x in shared memory: .shared, the call (its result
        where out is None); else .out (new where out is None)."""
        src = _device.source(x, out=out)
        if src is not None:
            request = pb.ScanRequest(header=self._scan_header(_types.wire_dtype(src.dtype), op, exclusive, algorithm,
                                                              src.n))
            return self._prepare_device(_device.Call.scan(request, src, out), _wire.SCAN_DATA, retries, timeout)
        x, request, out = self._scan_args(x, op, exclusive, algorithm, out, copy)
        retries, timeout = self._call_options(retries, timeout)
        p = _Prepared(x, request, retries, timeout, _wire.SCAN_DATA, shared=self._scan_shared(x, request, out))
        if p.shared is None:
            p.out = self._scan_out(x, out)
            p.per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)
            p.retries = self._scan_retries(x, p.out, retries)  # in place: not retried
        return p

    def _prepare_reduce(self, x, op, copy, retries, timeout) -> _Prepared:
        src = _device.source(x)
        if src is not None:
            request = self._reduce_request(_types.wire_dtype(src.dtype), op, src.n)
            return self._prepare_device(_device.Call(request, src), _wire.REDUCE_DATA, retries, timeout)
        x, request = self._reduce_args(x, op, copy)
        retries, timeout = self._call_options(retries, timeout)
        return _Prepared(x, request, retries, timeout, _wire.REDUCE_DATA, shared=self._reduce_shared(x, request),
                         per=_chunking.chunk_elements(self.chunk_bytes, x.itemsize))

    def _prepare_compact(self, x, where, predicate, indices, values, copy, retries, timeout) -> _Prepared:
        src = _device.source(x, where=where)
        if src is not None:
            header = self._compact_header(_types.wire_dtype(src.dtype), src.dtype, src.n, where, predicate, indices,
                                          values)
            return self._prepare_device(_device.Call.compact(pb.CompactRequest(header=header), src, where, values,
                                                             indices), _wire.COMPACT_VALUES, retries, timeout)
        x, flags, request = self._compact_args(x, where, predicate, indices, values, copy)
        retries, timeout = self._call_options(retries, timeout)
        # A narrow x streams on one call: the server takes it in the stream only (a shared one too).
        narrow = _types.narrow_wire(x) is not None
        return _Prepared(x, request, retries, timeout, _wire.COMPACT_VALUES, side=flags,
                         per=_chunking.chunk_elements(self.chunk_bytes, x.itemsize), narrow=narrow,
                         shared=None if narrow else self._compact_shared(x, where, flags, request, values, indices))

    def _prepare_device(self, call: _device.Call, data_field: int, retries, timeout) -> _Prepared:
        """A device-memory call's arguments (retries= checked, but such a call sends its header
        alone and is not retried, as a shared-memory one)."""
        _, timeout = self._call_options(retries, timeout)
        return _Prepared(call.x.obj, call.request, 0, timeout, data_field, device=call)

    def _prepare_histogram(self, x, bins, range_, copy, retries, timeout) -> _Prepared:
        src = _device.source(x)
        if src is not None:
            # The header the host path sends for an array of x's dtype: with range=None (even bins
            # over x's min and max) the bins are checked here on a stand-in and the range is found
            # once x is exported (see _device.Call.set_range).
            find_range = np.ndim(bins) == 0 and range_ is None and src.n > 0
            header = _types.histogram_header(np.zeros(2 if find_range else 0, src.dtype), _types.wire_dtype(src.dtype),
                                             bins, range_)
            header.element_count = src.n
            call = _device.Call.histogram(pb.HistogramRequest(header=header), src, bins if find_range else None)
            return self._prepare_device(call, _wire.HISTOGRAM_DATA, retries, timeout)
        x, request = self._histogram_args(x, bins, range_, copy)
        retries, timeout = self._call_options(retries, timeout)
        return _Prepared(x, request, retries, timeout, _wire.HISTOGRAM_DATA,
                         per=_chunking.chunk_elements(self.chunk_bytes, x.itemsize))

    def _prepare_segmented(self, x, keys, heads, op, exclusive, out, copy, retries, timeout,
                           dtype=None) -> _Prepared:
        """x a CUDA array (keys or heads and out too): .device, the call; else streamed into .out
        (dtype=: as scan's; a narrow x travels narrow, out of the accumulator's dtype)."""
        x, accumulate = self._with_dtype(x, dtype, copy)
        src = _device.source(x, keys=keys, heads=heads, out=out)
        if src is not None:
            self._one_segmentation(keys, heads)
            wire = _types.wire_dtype(src.dtype)
            header = pb.SegmentedScanHeader(dtype=wire, op=_types.operator(op, wire),
                                            kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                                            element_count=src.n)
            return self._prepare_device(_device.Call.segmented(pb.SegmentedScanRequest(header=header), src, keys,
                                                               heads, out), _wire.SEGMENTED_DATA, retries, timeout)
        x, side, request, out = self._segmented_args(x, keys, heads, op, exclusive, out, copy, accumulate)
        retries, timeout = self._call_options(retries, timeout)
        out = self._scan_out(x, out)
        # Each chunk small enough that its results (a narrow x's: wider) fit chunk_bytes too.
        return _Prepared(x, request, self._segmented_retries(x, side, out, retries), timeout, _wire.SEGMENTED_DATA,
                         per=_chunking.chunk_elements(self.chunk_bytes, max(x.itemsize, side.itemsize, out.itemsize)),
                         side=side, side_field=_wire.SEGMENTED_KEYS, out=out, narrow=accumulate is not None)

    def _prepare_scan2d(self, x, op, out, copy, retries, timeout, axis: Optional[int] = None,
                        exclusive: bool = False, dtype=None) -> _Prepared:
        """.out: the flat view of .result, the 2-D out. axis 0 or 1: the scan along that axis
        (scan's axis=), else the 2-D scan. dtype=: as scan's (a narrow matrix travels narrow,
        out of the accumulator's dtype)."""
        _device.refuse("scan2d" if axis is None else "scan along an axis", x=x, out=out)
        x, accumulate = self._with_dtype(x, dtype, copy)
        flat, out, out_flat, request = self._scan2d_args(x, op, out, copy, "scan2d" if axis is None else "scan",
                                                         accumulate)
        if axis is not None:
            request.header.axis = pb.SCAN_AXIS_COLUMNS if axis == 0 else pb.SCAN_AXIS_ROWS
            request.header.kind = pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE
        retries, timeout = self._call_options(retries, timeout)
        # Chunks of whole elements of x's dtype (narrow ones too), cut anywhere in a row: the
        # server re-cuts them into rows of cols x x.itemsize bytes. Each chunk small enough that
        # its results (a narrow matrix's are wider) fit chunk_bytes, plus the one row the server
        # may complete beyond it.
        per = _chunking.chunk_elements(self.chunk_bytes, max(flat.itemsize, out_flat.itemsize))
        return _Prepared(flat, request, self._scan_retries(flat, out_flat, retries), timeout, _wire.SCAN2D_DATA,
                         per=per, out=out_flat, result=out, narrow=accumulate is not None)

    def _prepare_reduce_by_key(self, x, keys, op, copy, retries, timeout, dtype=None) -> _Prepared:
        """.result_dtype: the runs' values' (dtype=: as scan's)."""
        _device.refuse("reduce_by_key", x=x, keys=keys)
        x, accumulate = self._with_dtype(x, dtype, copy)
        x, side, request = self._reduce_by_key_args(x, keys, op, copy, accumulate)
        retries, timeout = self._call_options(retries, timeout)
        result = x.dtype.newbyteorder("=") if accumulate is None else accumulate[1]
        widest = max(x.itemsize, side.itemsize, result.itemsize)  # a narrow x's runs are wider
        return _Prepared(x, request, retries, timeout, _wire.REDUCE_BY_KEY_DATA,
                         per=_chunking.chunk_elements(self.chunk_bytes, widest),
                         side=side, side_field=_wire.REDUCE_BY_KEY_KEYS, narrow=accumulate is not None,
                         result_dtype=result)

    def _prepare_sort(self, x, values, descending, output: int, copy, retries, timeout) -> _Prepared:
        src = _device.source(x, values=values)
        if src is not None:
            self._check_descending(descending)
            header = pb.SortHeader(dtype=_types.wire_dtype(src.dtype), descending=bool(descending), output=output,
                                   element_count=src.n)
            return self._prepare_device(_device.Call.sort(pb.SortRequest(header=header), src, values), _wire.SORT_KEYS,
                                        retries, timeout)
        x, side, request = self._sort_args(x, values, descending, output, copy)
        retries, timeout = self._call_options(retries, timeout)
        return _Prepared(x, request, retries, timeout, _wire.SORT_KEYS, per=self._sort_per(x, side), side=side,
                         side_field=_wire.SORT_VALUES)

    def _scan_iter_parts(self, chunks, op, exclusive, algorithm, timeout):
        """scan_iter's (feeder of the requests, assembler of the results, timeout)."""
        timeout = self._call_timeout(timeout)
        feeder = _chunking.ScanIterFeeder(
            self._host_chunks(chunks),
            lambda wire: pb.ScanRequest(header=self._scan_header(wire, op, exclusive, algorithm)), self.chunk_bytes)
        return feeder, _chunking.ScanIterAssembler(feeder), timeout

    @staticmethod
    def _host_chunks(chunks):
        """scan_iter's arrays, each refused when it is a CUDA array (no device path)."""
        for c in chunks:
            _device.refuse("scan_iter", chunk=c)
            yield c

    def _transport_tally(self, total_bytes, echo, chunk_bytes, lanes) -> _TransportTally:
        return _TransportTally(total_bytes, echo, int(chunk_bytes or self.chunk_bytes), lanes)

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

    @staticmethod
    def _lane_requests(first, data_field: int, x: np.ndarray, per: int, k: int, flags=None) -> tuple:
        """(each lane's request iterator, the lanes' call metadata) for one array striped over k
        lanes: the first request with the lanes header (a fresh random array id), then chunks lane,
        lane + k, ...; the metadata carries the same id for a balancer to hash on."""
        array_id = os.urandom(16)
        return [_chunking.data_requests(_chunking.lane_header(first, array_id, lane, k, per), data_field, x,
                                        per, flags, ranges=_chunking.lane_chunks(len(x), per, lane, k))
                for lane in range(k)], _chunking.array_id_metadata(array_id)

    @staticmethod
    def _reduce_lanes_result(raws, dtype: np.dtype, n: int):
        """Every lane answers the whole array's value: they must agree (a server that did not join
        the lanes would answer each lane's part)."""
        responses = [pb.ReduceResponse.FromString(r) for r in raws]
        first = responses[0]
        for lane, r in enumerate(responses):  # compared as bytes: a NaN equals itself
            if r.element_count != n or r.raw_value != first.raw_value or \
                    r.value.SerializeToString() != first.value.SerializeToString():
                raise Internal(f"server's lane {lane} answered {r.element_count} elements reduced (of {n}) or a "
                               "value that differs from lane 0's: it did not join the lanes of this array")
        return _chunking.reduce_value(raws[0], dtype)

    def _scan_header(self, wire, op, exclusive, algorithm, n=None):
        h = pb.ScanHeader(dtype=wire, op=_types.operator(op, wire),
                          kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                          algorithm=_types.scan_algorithm(algorithm))
        if n is not None:
            h.element_count = n
        return h

    def _reduce_args(self, x, op, copy=False):
        x, wire = check_array(x, copy=copy)
        return x, self._reduce_request(wire, op, len(x))

    @staticmethod
    def _reduce_request(wire, op, n: int):
        return pb.ReduceRequest(header=pb.ReduceHeader(dtype=wire, op=_types.operator(op, wire), element_count=n))

    def _histogram_args(self, x, bins, range_, copy=False):
        """x checked (narrow dtypes taken as they are; bool binned as uint8, as numpy.histogram
        converts it) and the first request."""
        x, wire = check_array(x, copy=copy, narrow=True)
        if x.dtype.kind == "b":
            x = x.view(np.uint8)
        return x, pb.HistogramRequest(header=_types.histogram_header(x, wire, bins, range_))

    def _scan_args(self, x, op, exclusive, algorithm, out, copy=False):
        """x checked, the first request, and out checked (None stays None: see _scan_out)."""
        x, wire = check_array(x, copy=copy)
        header = pb.ScanRequest(header=self._scan_header(wire, op, exclusive, algorithm, len(x)))
        self._check_out(x, out)
        return x, header, out

    @staticmethod
    def _check_out(x, out) -> None:
        """A scan's out= (None passes): a writable contiguous array of x's dtype and shape."""
        if out is not None and (
                not isinstance(out, np.ndarray) or out.shape != x.shape or
                out.dtype.newbyteorder("=") != x.dtype.newbyteorder("=") or not out.flags.c_contiguous
                or not out.flags.writeable or out.dtype.byteorder == ">"):
            raise ValueError(f"gpuscan: out must be a writable contiguous {x.dtype} array of shape {x.shape}")

    def _segmented_args(self, x, keys, heads, op, exclusive, out, copy=False, accumulate=None):
        """x checked as scan's, the keys or head bytes (`side`: contiguous, little-endian, len(x)
        elements), the first request, and out checked (None stays None; a narrow x's, with
        `accumulate` from _with_dtype: out of the result dtype, new if None). Every check before
        any call: ValueError (a bitwise operator on floats: InvalidArgument, as scan's)."""
        self._one_segmentation(keys, heads)
        x, wire, output = self._values_and_wires(x, copy, accumulate)
        header = pb.SegmentedScanHeader(dtype=wire, op=_types.operator(op, output or wire),
                                        kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                                        element_count=len(x))
        if output is not None:
            header.output_dtype = output
        if keys is not None:
            side, header.key_dtype = _types.segment_keys(keys, copy)
            what = "keys"
        else:
            side = _types.segment_heads(heads, copy)
            header.heads = True
            what = "heads"
        if len(side) != len(x):
            raise ValueError(f"gpuscan: {what} has {len(side)} elements but x has {len(x)}: they must match")
        if accumulate is None:
            self._check_out(x, out)
        else:
            out = self._narrow_out(x, out, accumulate[1])
        return x, side, pb.SegmentedScanRequest(header=header), out

    @staticmethod
    def _one_segmentation(keys, heads) -> None:
        if (keys is None) == (heads is None):
            raise ValueError("gpuscan: segmented_scan needs exactly one of keys= (segments: runs of equal "
                             "keys) or heads= (segments begin at nonzero heads)")

    @staticmethod
    def _scan_axis(x, axis, algorithm, copy):
        """scan's (x, axis): axis None or a 1-D array's 0/-1 gives (x, None), the 1-D scan (an
        N-D host array with axis None flattened in C order, as np.cumsum does: without a copy
        when it is C-contiguous, else only with copy=True); a 2-D array's 0, 1, -2, -1 gives
        (x, 0 or 1). Anything else, or algorithm= with a matrix axis: ValueError."""
        if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
            raise ValueError(f"gpuscan: axis must be None or an integer, got {axis!r}")
        if _device.is_device(x):  # the device path scans any shape flat
            if axis is not None and len(x.__cuda_array_interface__["shape"]) != 1:
                raise TypeError("gpuscan: a scan along an axis takes host arrays, and x is a CUDA matrix: the "
                                "device path scans arrays flat (axis=None)")
            return x, None
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if axis is None:
            if x.ndim > 1:
                if not x.flags.c_contiguous and not copy:
                    raise ValueError(f"gpuscan: x of shape {x.shape} is not C-contiguous (strides {x.strides}): "
                                     "pass copy=True to scan a flat copy, or axis=0/1 for a matrix")
                x = (x if x.flags.c_contiguous else np.ascontiguousarray(x)).reshape(-1)  # a view keeps x's region
            return x, None
        if x.ndim not in (1, 2) or not -x.ndim <= axis < x.ndim:
            raise ValueError(f"gpuscan: axis {axis} of an array of shape {x.shape}: scans run along axis 0 of a "
                             "1-D array or axis 0 or 1 of a 2-D one (None: the flattened array)")
        if x.ndim == 1:
            return x, None
        if algorithm is not None:
            raise ValueError("gpuscan: algorithm= applies to 1-D scans; a scan along an axis has one algorithm")
        return x, axis % 2

    @staticmethod
    def _with_dtype(x, dtype, copy):
        """dtype= of scan (along an axis too), scan2d, reduce, segmented_scan and reduce_by_key:
        (x, None) for the plain path (x converted first where a 4- or 8-byte x asks for another
        dtype, as numpy casts it), or (x, (output wire dtype, result dtype)) for a narrow x (int8,
        uint8, int16, uint16, bool, float16; a 1-D array or a matrix) that travels as it is (see
        _types.accumulation; a list is converted first, so a list of bools is one). A CUDA x with
        dtype=: TypeError."""
        if _device.is_device(x):
            if dtype is not None:
                raise TypeError("gpuscan: dtype= takes host arrays; the device path keeps x's dtype")
            return x, None
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if dtype is None and _types.narrow_wire(x) is None:
            return x, None
        x, wire, result = _types.accumulation(x, dtype)
        if wire is None:
            return x, None
        return x, (wire, result)

    def _values_and_wires(self, x, copy, accumulate) -> Tuple[np.ndarray, int, Optional[int]]:
        """The values of a call with dtype= (segmented_scan, reduce_by_key): (x checked, its wire
        dtype, the header's output_dtype or None). accumulate None: x checked as scan's; else
        (from _with_dtype) a narrow x, 1-D, contiguous and little-endian (copy=True copies it)."""
        x, wire = check_array(x, copy=copy, narrow=accumulate is not None)
        return x, wire, None if accumulate is None else accumulate[0]

    @staticmethod
    def _narrow_out(x, out, result: np.dtype) -> np.ndarray:
        """A narrow x's scan output: out checked (a writable contiguous array of the result dtype
        and x's shape), or a new one."""
        if out is None:
            return np.empty(len(x), result)
        if (not isinstance(out, np.ndarray) or out.shape != x.shape or out.dtype != result
                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"gpuscan: out must be a writable contiguous {result} array of shape {x.shape}")
        return out

    def _prepare_narrow(self, x, accumulate, op, exclusive, algorithm, out, copy, retries, timeout,
                        scan: bool) -> _Prepared:
        """A narrow x's scan (scan=True) or reduce: the header with output_dtype, out of the
        result dtype (new if None); each chunk small enough that its results fit chunk_bytes."""
        wire, result = accumulate
        x, narrow = check_array(x, copy=copy, narrow=True)
        retries, timeout = self._call_options(retries, timeout)
        per = _chunking.chunk_elements(self.chunk_bytes, max(x.itemsize, result.itemsize))
        if not scan:
            request = self._reduce_request(narrow, op, len(x))
            request.header.output_dtype = wire
            return _Prepared(x, request, retries, timeout, _wire.REDUCE_DATA, per=per, narrow=True)
        header = self._scan_header(narrow, op, exclusive, algorithm, len(x))
        header.output_dtype = wire
        out = self._narrow_out(x, out, result)
        return _Prepared(x, pb.ScanRequest(header=header), self._scan_retries(x, out, retries), timeout,
                         _wire.SCAN_DATA, per=per, out=out, narrow=True)

    def _check_axis_served(self, operations) -> None:
        """Unimplemented unless the server lists "scan_axis" in `operations` (an older one would
        ignore the axis and answer the 2-D scan: a wrong result, not an error); kept once true."""
        self._axis_served = "scan_axis" in operations
        if not self._axis_served:
            raise Unimplemented("the server does not serve scans along an axis (no \"scan_axis\" in "
                                "info()[\"operations\"]: an older version)")

    def _scan2d_args(self, x, op, out, copy=False, what: str = "scan2d", accumulate=None):
        """x as a 2-D C-contiguous little-endian matrix (copy=True: a non-contiguous or big-endian
        one is copied) flattened without a copy, out (new if None; else checked as scan's, same
        shape; a narrow x's, with `accumulate` from _with_dtype: of the result dtype) and its flat
        view, and the first request (a narrow x's with output_dtype). Every check before any
        call: ValueError (a bitwise operator on floats: InvalidArgument, as scan's)."""
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(f"gpuscan: {what} takes a 2-D matrix, got shape {x.shape}")
        if x.shape[1] == 0:
            raise ValueError(f"gpuscan: {what} needs at least one column, got shape {x.shape}")
        if copy and x.dtype.kind in "iuf" and (not x.flags.c_contiguous or x.dtype.byteorder == ">"):
            x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        if not x.flags.c_contiguous:  # reshape would copy behind the caller's back
            raise ValueError(f"gpuscan: x is not C-contiguous (strides {x.strides}); "
                             "pass copy=True or np.ascontiguousarray(x) to send a copy")
        flat, wire = check_array(x.reshape(-1), copy=copy, narrow=accumulate is not None)
        output, result = accumulate if accumulate is not None else (None, flat.dtype.newbyteorder("="))
        rows, cols = x.shape
        header = pb.Scan2DHeader(dtype=wire, op=_types.operator(op, output or wire), cols=cols, rows=rows)
        if output is not None:
            header.output_dtype = output
        if out is None:
            out = np.empty(x.shape, result)
        elif not isinstance(out, np.ndarray) or out.shape != x.shape or not out.flags.c_contiguous:
            raise ValueError(f"gpuscan: out must be a writable contiguous {result} array of shape {x.shape}")
        out_flat = out.reshape(-1)
        if accumulate is None:
            self._check_out(flat, out_flat)
        else:
            self._narrow_out(x, out, result)
        return flat, out, out_flat, pb.Scan2DRequest(header=header)

    def _reduce_by_key_args(self, x, keys, op, copy=False, accumulate=None):
        """x checked as scan's (a narrow one with `accumulate` as _segmented_args'), the keys
        (contiguous, little-endian, widened as segmented_scan's, len(x) of them) and the first
        request. Every check before any call: ValueError (a bitwise operator on floats:
        InvalidArgument, as scan's)."""
        if keys is None:
            raise ValueError("gpuscan: reduce_by_key needs keys (an integer array of len(x): each run of "
                             "equal consecutive keys gives one value)")
        x, wire, output = self._values_and_wires(x, copy, accumulate)
        header = pb.ReduceByKeyHeader(dtype=wire, op=_types.operator(op, output or wire), element_count=len(x))
        if output is not None:
            header.output_dtype = output
        side, header.key_dtype = _types.segment_keys(keys, copy)
        if len(side) != len(x):
            raise ValueError(f"gpuscan: keys has {len(side)} elements but x has {len(x)}: they must match")
        return x, side, pb.ReduceByKeyRequest(header=header)

    def _sort_args(self, x, values, descending, output: int, copy=False):
        """x (the keys) checked as scan's, narrow dtypes (bool too) taken as they are, the values
        (None, or checked as x: any served dtype, narrow ones too, len(x) of them) and the first
        request, its output `output` (KEYS_AND_VALUES when values are given). Every check before
        any call: ValueError."""
        self._check_descending(descending)
        x, wire = check_array(x, copy=copy, narrow=True)
        header = pb.SortHeader(dtype=wire, descending=bool(descending), output=output, element_count=len(x))
        side = None
        if values is not None:
            side, header.values_dtype = check_array(values, "values", copy, narrow=True)
            if len(side) != len(x):
                raise ValueError(f"gpuscan: values has {len(side)} elements but x has {len(x)}: they must match")
            header.output = pb.SORT_OUTPUT_KEYS_AND_VALUES
        return x, side, pb.SortRequest(header=header)

    @staticmethod
    def _check_descending(descending) -> None:
        if not isinstance(descending, (bool, np.bool_)):
            raise ValueError(f"gpuscan: descending must be True or False, got {descending!r}")

    def _sort_per(self, x, side) -> int:
        """Elements a sort request carries: keys and values of the same elements travel together."""
        return _chunking.chunk_elements(self.chunk_bytes, max(x.itemsize, side.itemsize if side is not None else 0))

    @staticmethod
    def _sort_assembler(x, side, request) -> _chunking.SortAssembler:
        h = request.header
        return _chunking.SortAssembler(x.dtype, side.dtype if side is not None else None, h.output, h.descending,
                                       len(x))

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

    @staticmethod
    def _scan_out(x, out):
        """The streamed scan's output array: out, or a new one."""
        return np.empty(len(x), x.dtype.newbyteorder("=")) if out is None else out

    @staticmethod
    def _scan_retries(x, out, retries: int) -> int:
        """A streamed scan is retried unless it runs in place (out overlaps x): a failed try may
        have written results over its input, which a retry would then send."""
        return 0 if np.may_share_memory(x, out) else retries

    @staticmethod
    def _segmented_retries(x, side, out, retries: int) -> int:
        """As _scan_retries, with the keys or heads also an input that out must not overlap."""
        return 0 if np.may_share_memory(x, out) or np.may_share_memory(side, out) else retries

    def _compact_args(self, x, where, predicate, indices, values, copy=False):
        x, wire = check_array(x, copy=copy, narrow=True)  # narrow dtypes kept as they are
        header = self._compact_header(wire, x.dtype, len(x), where, predicate, indices, values)
        flags = None
        if where is not None:
            mask = np.asarray(where)
            if mask.shape != x.shape:
                raise ValueError(f"gpuscan: where has shape {mask.shape}, x has {x.shape}")
            flags = np.ascontiguousarray(mask != 0 if mask.dtype != np.bool_ else mask).view(np.uint8)
        return x, flags, pb.CompactRequest(header=header)

    @staticmethod
    def _compact_header(wire, dtype: np.dtype, n: int, where, predicate, indices, values) -> "pb.CompactHeader":
        """A compact's header: use_flags for where=, else the predicate; the outputs asked for."""
        if (where is None) == (predicate is None):
            raise ValueError("gpuscan: compact needs exactly one of where= (a mask) or predicate= (e.g. ('gt', 0))")
        header = pb.CompactHeader(dtype=wire, element_count=n)
        if where is not None:
            header.use_flags = True
        else:
            header.predicate.CopyFrom(_types.predicate(predicate, dtype))
        if not values and not indices:
            raise ValueError("gpuscan: compact with values=False needs indices=True")
        header.output = (pb.COMPACT_OUTPUT_VALUES_AND_INDICES if values and indices else
                         pb.COMPACT_OUTPUT_INDICES if indices else pb.COMPACT_OUTPUT_VALUES)
        return header

    @staticmethod
    def _compact_outputs(v, i, values, indices):
        """What compact returns: the values, the indices, or both (as asked)."""
        if values and indices:
            return v, i
        return v if values else i

    @classmethod
    def _compact_result(cls, asm, values, indices):
        return cls._compact_outputs(*asm.result(values, indices), values, indices)

    # -- shared memory (header field 20): see shared.py. A call whose input lies in an open region
    # sends the header alone; lanes do not apply. None: the input is not shared, stream it.
    @staticmethod
    def _scan_shared(x, request, out) -> Optional[shared.Call]:
        """Scan: into out when it is shared (in place when it is x itself); into a new region next
        to x's when out is None (returned); into a temporary region copied into out when out is a
        plain array."""
        src = shared.place(x)
        if src is None:
            return None
        call = shared.Call(request, src, len(x), x.dtype)
        dst = shared.place(out) if out is not None else None
        if out is None:
            call.result, dst = call.region(len(x), x.dtype.newbyteorder("="))
        else:
            call.result = out
            if dst is None:
                tmp, dst = call.region(len(x), x.dtype.newbyteorder("="), temporary=True)
                call.copy_back = (tmp, out)
        if not dst.same_as(src):  # else in place: output_region stays empty
            call.sm.output_region, call.sm.output_offset = dst.name, dst.offset
        return call

    @staticmethod
    def _reduce_shared(x, request) -> Optional[shared.Call]:
        src = shared.place(x)
        return None if src is None else shared.Call(request, src, len(x), x.dtype)

    @staticmethod
    def _compact_shared(x, where, flags, request, want_values, want_indices) -> Optional[shared.Call]:
        """Compact: kept values and indices into new regions of capacity len(x) next to x's
        (sparse: only the kept part takes memory), returned as views [:kept]; a where= mask that
        lies in a region (bool, int8 or uint8: nonzero keeps) is read there, any other is copied
        (as `flags`, from _compact_args) into a temporary region."""
        src = shared.place(x)
        if src is None:
            return None
        n = len(x)
        call = shared.Call(request, src, n, x.dtype)
        if want_values:
            call.values, dst = call.region(n, x.dtype.newbyteorder("="), reserve=False)
            call.sm.output_region, call.sm.output_offset = dst.name, dst.offset
        if want_indices:
            call.indices, dst = call.region(n, np.int64, reserve=False)
            call.sm.indices_region, call.sm.indices_offset = dst.name, dst.offset
        if request.header.use_flags:
            mask = np.asarray(where)
            at = shared.place(mask) if mask.dtype.itemsize == 1 and mask.dtype.kind in "biu" else None
            if at is None:
                tmp, at = call.region(n, np.uint8, temporary=True)
                tmp[:] = flags
            call.sm.flags_region, call.sm.flags_offset = at.name, at.offset
        return call

    @staticmethod
    def _compact_header_only_result(call, values, indices):
        """A compact sent as its header alone (shared or device memory): its outputs' first `kept`."""
        kept = call.kept
        v = call.values[:kept] if values else None
        i = call.indices[:kept] if indices else None
        return _Calls._compact_outputs(v, i, values, indices)


class Client(_Calls):
    """Synchronous gpuscan client.

    Client(target, *, tls=None|True|Tls(...), timeout=None (seconds per call), lanes=1,
           chunk_bytes=1 MiB, credentials=None, load_balancing_policy=None, options=None,
           retries=0, backoff=(0.1, 2.0), on_retry=None)

    lanes=K (or a call's lanes=K): scan/reduce/compact stripe an array over K concurrent calls, each
    on its own connection (chunk i on lane i mod K), capped by the server's Limits.max_lanes and
    the array's chunk count; one call when the server does not join lanes (max_lanes 0).
    Results are exactly those of one call.

    retries=N (or a call's retries=N): scan/reduce/compact/histogram of arrays in memory that fail
    with UNAVAILABLE (the server died, restarted, is shutting down or unreachable), or with a
    CANCELLED from the server's end, are tried up to N more times, each try a new call on the
    channel (with lanes: the whole striped call), after waits of backoff[0] seconds doubling per
    try up to backoff[1] (+-20% jitter). timeout covers every try and wait; when the tries run
    out the last error is raised, its message ending "(gave up after N tries)". Not retried:
    other errors, scan_iter, shared-memory calls and in-place scans (out=x). on_retry(error,
    next_attempt, wait_s) is called before each wait.

    native: scan, reduce and compact of plain arrays go through the C++ client (its C API, loaded with
    ctypes; see gpuscan._native), outside the GIL: one stream and lanes then move data as the C++
    client does. Same results, Timing, errors and retries (a call with an on_retry, or its own
    retries=, stays on grpcio); Ctrl-C cancels the client's native calls in flight. None (the
    default): on where the library loads and the client speaks plaintext with no `credentials`
    or `options`, else off (the environment's GPUSCAN_NATIVE=0 or 1 overrides it); True: required
    (ValueError where it cannot be); False: off. `data_path` (and info()["data_path"]) says which
    path the client took: "native" and the library's file, or "grpcio" and why (see
    gpuscan._native.candidates for where the library is looked for).
    Streamed histograms and sorts (the other operations too), scan_iter and in-place scans of host
    arrays use grpcio; calls that send their header alone (shared memory; CUDA arrays: scan,
    reduce, compact, histogram, sort) go through the C API's gpuscan_header_call. A call with its
    own timeout= other than the client's uses grpcio (the C API's deadline is the client's).

    timeout= on every call (None: the client's timeout; 0: none): that call's seconds, every try
    and wait included; past it, gpuscan.DeadlineExceeded.
    """

    def __init__(self, target: str = "127.0.0.1:50051", *, tls: Union[None, bool, Tls] = None,
                 timeout: Optional[float] = None, lanes: int = 1, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 load_balancing_policy: Optional[str] = None, options=None, retries: int = 0,
                 backoff: Tuple[float, float] = (0.1, 2.0), on_retry: Optional[_retry.OnRetry] = None,
                 native: Optional[bool] = None, shm_arena_bytes: Optional[int] = None):
        self._init_common(target, tls, timeout, lanes, chunk_bytes, retries, backoff, on_retry, shm_arena_bytes)
        args = channel_args(self.chunk_bytes, load_balancing_policy, options, tls)
        creds = channel_credentials(tls, credentials)
        self._native: Optional[_native.NativeClient] = None
        why_not = "native=False"
        env = os.environ.get("GPUSCAN_NATIVE", "")
        if native is None and env in ("0", "1"):
            native, why_not = env == "1", f"GPUSCAN_NATIVE={env} in the environment"
        auto = native is None  # wherever it can serve this client as configured
        if auto:
            lib, why_lib = _native.library()
            why_not = ("tls/credentials: the native path speaks plaintext gRPC" if creds is not None else
                       "options=: grpc channel options apply to grpcio's channel only" if options else
                       f"no C API: {why_lib}" if lib is None else "")
            native = not why_not
        if native:
            if creds is not None:
                raise ValueError("gpuscan: native=True speaks plaintext gRPC: it takes no tls or credentials")
            try:
                self._native = _native.NativeClient(target, self.chunk_bytes, self.timeout, self.lanes, self.retries,
                                                    self.backoff, load_balancing_policy)
            except ValueError as e:
                if not auto:
                    raise  # (auto: a target the C++ client refuses is left to grpcio, which says why)
                why_not = f"the C++ client refused the target: {e}"
        self._data_path = (DataPath("native", library=_native.library_path()) if self._native is not None
                           else DataPath("grpcio", reason=why_not))
        self._bind(grpc.secure_channel(target, creds, options=args) if creds is not None
                   else grpc.insecure_channel(target, options=args))
        self._local = threading.local()
        # Lanes: one channel (connection) each, made on first use, reused, closed with the client.
        self._lane_args = (target, creds, options, tls)
        self._lane_channels: List[grpc.Channel] = []
        self._lane_methods: List[Dict[str, Any]] = []
        self._lane_lock = threading.Lock()
        self._closed = False

    def _lanes(self, k: int, method: str):
        """The multi-callable `method` (Scan, Compact, Transport: stream-stream; Reduce:
        stream-unary) on each of k lane channels."""
        with self._lane_lock:
            if self._closed:
                raise ValueError("gpuscan: the client is closed")
            target, creds, options, tls = self._lane_args
            while len(self._lane_channels) < k:
                a = lane_channel_args(self.chunk_bytes, options, tls, len(self._lane_channels))
                ch = grpc.secure_channel(target, creds, options=a) if creds is not None \
                    else grpc.insecure_channel(target, options=a)
                self._lane_channels.append(ch)
                self._lane_methods.append(self._lane_methods_of(ch))
            return [m[method] for m in self._lane_methods[:k]]

    def _usable_lanes(self, lanes, n: int, per: int, timeout: Optional[float]) -> int:
        """Lanes for an n-element array: the wanted count capped by the server's max_lanes (asked
        once, within `timeout`; 0 = it does not join lanes, so one call) and by the number of
        chunks."""
        wanted = self._wanted_lanes(lanes)
        chunks = _chunking.chunk_count(n, per)
        if wanted <= 1 or chunks <= 1:
            return 1
        with self._lane_lock:
            known = self._max_lanes
        if known is None:
            known = int(self._info(timeout)["limits"].get("max_lanes", 0))
            with self._lane_lock:
                self._max_lanes = known
        return _chunking.lane_count(chunks, wanted, known)

    def _native_lanes(self, lanes, x: np.ndarray) -> int:
        """A native call's lanes, as the grpcio path's: one call where the server does not join
        lanes (max_lanes 0, an older server; the C++ client would refuse it), else the wanted
        count, which the C++ client caps itself."""
        wanted = self._wanted_lanes(lanes)
        if wanted <= 1:
            return wanted
        per = _chunking.chunk_elements(self.chunk_bytes, x.itemsize)
        return self._usable_lanes(lanes, x.size, per, self.timeout)

    # -- lifecycle
    def close(self) -> None:
        """Closes the channels (the lanes' too) and the native handle; calls in flight are cancelled.
        The shared-memory arena's files are unlinked: its arrays stay valid, calls stream them."""
        self._close_arenas()
        if self._native is not None:
            self._native.close()
        self._channel.close()
        with self._lane_lock:
            self._closed = True
            channels, self._lane_channels, self._lane_methods = self._lane_channels, [], []
        for ch in channels:
            ch.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def last_timing(self) -> Optional[Timing]:
        """The server's Timing of this thread's last completed call (None before one)."""
        return getattr(self._local, "timing", None)

    def _set_timing(self, t: Optional[Timing]) -> None:
        self._local.timing = t

    # -- the streaming driver: iterate a stream-stream call, cancel it on any exit but the end
    def _stream(self, method, requests, timeout: Optional[float]) -> Iterator[bytes]:
        upload = _chunking.Upload(requests)

        def start():
            call = method(iter(upload), timeout=timeout)
            upload.attach(call)
            return call
        responses = _pump.ResponsePump(start)  # created and read off this thread: Ctrl-C-safe (see _pump)
        try:
            for raw in responses:
                yield raw
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise from_rpc_error(e) from None
        except BaseException:  # KeyboardInterrupt, an assembler error, the consumer stopping early
            responses.close()
            raise
        if upload.error is not None:
            raise upload.error

    def _takes_native(self, p: _Prepared) -> bool:
        """The native path serves this call: it is on, the call keeps the client's retries with no
        on_retry to call back and the client's timeout (the C API has no per-call deadline), and
        a scan is not in place."""
        return (self._native is not None and p.retries == self.retries and self.on_retry is None and
                p.timeout == self.timeout and (p.out is None or not np.may_share_memory(p.x, p.out)))

    def _header_only(self, p: _Prepared):
        """p's call when it sends its header alone: a shared-memory call, or a device-memory one
        (exported here, once the server is known to serve it); None: p streams."""
        if p.device is not None:
            p.device.export(self._device_info(p.timeout), self.target)
            return p.device
        return p.shared

    def _stream_header_only(self, call, rpc: int, method, timeout: Optional[float], feed) -> None:
        """A header-only call whose responses stream back (Scan, SegmentedScan, Sort, Compact):
        each handed to feed (one of call's feed_*), then the call's Timing kept. Never retried."""
        with call:
            for raw in self._header_only_responses(call, rpc, method, timeout):
                feed(raw)
            self._set_timing(call.finish())

    def _header_only_responses(self, call, rpc: int, method, timeout: Optional[float],
                               request: Optional[bytes] = None) -> Iterator[bytes]:
        """The responses of a call that sends its header alone (`request`, serialized: call's own
        by default): through the C API where it loaded and the call's timeout is the handle's (one
        write with the half-close and one read on its thread: about 0.7 ms less than grpcio's
        request and response threads), else grpcio's."""
        device = isinstance(call, _device.Call)
        room = NATIVE_RESPONSE_BYTES  # (a request of its own: a histogram's reductions, small answers)
        if request is None:
            request = call.serialized()[0]
            if device:  # a histogram's response grows with its bins
                room = max(room, call.response_bytes())
        if self._native is not None and timeout == self.timeout:
            yield self._native.header_call(rpc, request, interruptible=not device, response_bytes=room)
        elif rpc in (_native.RPC_REDUCE, _native.RPC_HISTOGRAM):
            yield self._unary(method, [request], timeout)
        else:
            yield from self._stream(method, [request], timeout)

    def _device_info(self, timeout: Optional[float]) -> "pb.ServerInfo":
        """The server's ServerInfo (the message: its devices' UUIDs), kept once it serves device memory."""
        info = self._device_server
        if info is None:
            info = self._info_message(timeout)
            if info.limits.device_ipc:
                self._device_server = info
        return info

    def _retrying(self, p: _Prepared, attempt: Callable[[Optional[float]], Any]) -> Any:
        """attempt(timeout) with up to p.retries retries after UNAVAILABLE, each try given the time
        left of the call's timeout (see _retry)."""
        return _retry.run(self._tries(p.retries, p.timeout), attempt, self._pause)

    def _pause(self, seconds: float) -> None:
        """The wait before a retry, watching the channels meanwhile. A sync grpc channel advances a
        connection only while something polls it, and calls to a server that is down fail at once
        without much polling: the channel would see the server back only at grpc's backup poll,
        every 5 s. A connectivity subscription polls, on a grpc thread. (try_to_connect stays
        off: the failed try already asked for a connection, and grpc's poller would ask again
        after the subscription ends, failing if the client was closed meanwhile.)"""
        with self._lane_lock:
            channels = [self._channel, *self._lane_channels]

        def ignore(_state) -> None:
            pass
        for ch in channels:
            ch.subscribe(ignore)
        try:
            time.sleep(seconds)
        finally:
            for ch in channels:
                ch.unsubscribe(ignore)

    # -- typed API. Each method's arguments are checked, and its requests built, in _Calls (see
    # _Prepared); the methods drive the calls. AsyncClient's methods share these docstrings.
    def scan(self, x, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None,
             out: Optional[np.ndarray] = None, *, axis: Optional[int] = None, dtype=None, copy: bool = False,
             lanes: Optional[int] = None, retries: Optional[int] = None,
             timeout: Optional[float] = None) -> np.ndarray:
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
        x's region (out None), or, for a plain out, written into a temporary region and copied
        into out.

        x a CUDA array (any object with __cuda_array_interface__: CuPy, PyTorch, Numba), for a
        client on the server's host and GPU: the server scans it where it lies (CUDA IPC; nothing
        crosses the host; see gpuscan._device). Any shape, C-contiguous; out= a CUDA array of x's
        dtype and size (out=x: in place), or None: a new array like x (CuPy's or PyTorch's; other
        libraries need out=). Its stream (__cuda_array_interface__ v3; before v3 the whole device)
        is waited for before the call; the result is complete when the call returns. The server
        must serve device memory (info()["limits"]["device_ipc"]: --allow-device-ipc on the cuda
        engine) on x's GPU, else gpuscan.FailedPrecondition, before any export. Host and CUDA
        arrays mixed: TypeError. copy= and lanes do not apply; not retried."""
        x, axis = self._scan_axis(x, axis, algorithm, copy)
        if axis is not None:
            p = self._prepare_scan2d(x, op, out, copy, retries, timeout, axis, exclusive, dtype)
            if not self._axis_served:
                self._check_axis_served(self._info(p.timeout)["operations"])
            return self._scanned(p, self._scan2d)
        x, accumulate = self._with_dtype(x, dtype, copy)
        if accumulate is not None:
            p = self._prepare_narrow(x, accumulate, op, exclusive, algorithm, out, copy, retries, timeout, True)
            if self._takes_native(p):
                self._set_timing(self._native.scan_header(p.x, p.out, p.request.header.SerializeToString()))
                return p.out
            return self._scanned(p, self._scan)
        p = self._prepare_scan(x, op, exclusive, algorithm, out, copy, retries, timeout)
        call = self._header_only(p)
        if call is not None:  # never retried: an in-place scan may have written over its input
            self._stream_header_only(call, _native.RPC_SCAN, self._scan, p.timeout, call.feed_scan)
            return call.result
        if self._takes_native(p):
            h = p.request.header
            self._set_timing(self._native.scan(p.x, p.out, h.dtype, h.op, h.kind == pb.SCAN_KIND_EXCLUSIVE,
                                               h.algorithm, self._native_lanes(lanes, p.x)))
            return p.out

        def attempt(timeout: Optional[float]) -> Timing:
            k = self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:
                # Chunk i on lane i mod k; results land in `out` by offset, whichever lane brings them.
                asm = _chunking.ScanAssembler(p.out, (p.per, k))
                reqs, md = p.lane_requests(k)
                _chunking.fan_out(list(zip(self._lanes(k, "Scan"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                  timeout, metadata=md)
            else:
                asm = _chunking.ScanAssembler(p.out)
                for raw in self._stream(self._scan, p.requests(), timeout):
                    asm.feed(raw)
            return asm.finish()
        self._set_timing(self._retrying(p, attempt))
        return p.out

    def _scanned(self, p: _Prepared, method) -> np.ndarray:
        """One streamed scan-like call (SegmentedScan, Scan2D) into p.out, retried: p.result or p.out."""
        def attempt(timeout: Optional[float]) -> Timing:
            asm = _chunking.ScanAssembler(p.out)
            for raw in self._stream(method, p.requests(), timeout):
                asm.feed(raw)
            return asm.finish()
        self._set_timing(self._retrying(p, attempt))
        return p.out if p.result is None else p.result

    def segmented_scan(self, x, keys=None, *, heads=None, op: str = "sum", exclusive: bool = False,
                       out: Optional[np.ndarray] = None, dtype=None, copy: bool = False,
                       timeout: Optional[float] = None, retries: Optional[int] = None) -> np.ndarray:
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
        loop). timeout:
        this call's seconds (None: the client's; 0: none), every try and wait included. retries
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
        scan's; copy= and dtype= do not apply (dtype=: TypeError); not retried."""
        p = self._prepare_segmented(x, keys, heads, op, exclusive, out, copy, retries, timeout, dtype)
        call = self._header_only(p)
        if call is not None:  # never retried: an in-place scan may have written over its input
            self._stream_header_only(call, _native.RPC_SEGMENTED_SCAN, self._segmented, p.timeout, call.feed_scan)
            return call.result
        return self._scanned(p, self._segmented)

    def scan2d(self, x, op: str = "sum", *, out: Optional[np.ndarray] = None, dtype=None, copy: bool = False,
               timeout: Optional[float] = None, retries: Optional[int] = None) -> np.ndarray:
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
        shared memory or native path."""
        return self._scanned(self._prepare_scan2d(x, op, out, copy, retries, timeout, dtype=dtype), self._scan2d)

    def reduce_by_key(self, x, keys, *, op: str = "sum", dtype=None, copy: bool = False,
                      timeout: Optional[float] = None, retries: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
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
        call's seconds (None: the client's; 0: none). retries as reduce's: the runs are returned
        only at the end, so a retry starts over. No lanes, shared memory or native path."""
        p = self._prepare_reduce_by_key(x, keys, op, copy, retries, timeout, dtype)

        def attempt(timeout: Optional[float]):
            # per try: a failed one is dropped
            asm = _chunking.ReduceByKeyAssembler(p.side.dtype, p.result_dtype, len(p.x))
            for raw in self._stream(self._reduce_by_key, p.requests(), timeout):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = self._retrying(p, attempt)
        self._set_timing(timing)
        return result

    def sort(self, x, *, values=None, descending: bool = False, copy: bool = False,
             timeout: Optional[float] = None, retries: Optional[int] = None):
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
        none). retries as reduce_by_key's (a retry starts over). No lanes, shared memory or
        native path for host arrays.

        x a CUDA array (1-D, C-contiguous; see scan), values= then a 1-D CUDA array of len(x) on
        its GPU too (host and CUDA arrays mixed: TypeError): the server sorts them where they lie
        (nothing crosses the host) into new arrays of x's library (CuPy's or PyTorch's) on x's
        device: the same results as the host path's, as CUDA arrays (of 4- or 8-byte dtypes: a
        narrow CUDA array is a ValueError). The server must serve device memory on x's GPU, as
        scan's; copy= does not apply; not retried."""
        p = self._prepare_sort(x, values, descending, pb.SORT_OUTPUT_KEYS, copy, retries, timeout)
        keys, vals, _ = self._sorted(p)
        return keys if values is None else (keys, vals)

    def argsort(self, x, *, descending: bool = False, return_keys: bool = False, copy: bool = False,
                timeout: Optional[float] = None, retries: Optional[int] = None):
        """The stable sort's permutation: int64 indices with x[indices] sorted as sort(x) is
        (numpy's np.argsort(x, kind="stable") for integers and for floats without NaN or signed
        zeros; equal keys in input order, descending=True too). return_keys=True: `(sorted_x,
        indices)` from the one call. Arguments (narrow x too), checks, timeout and errors as
        sort's; x a CUDA array: indices (int64) and keys as new CUDA arrays, as sort's."""
        output = pb.SORT_OUTPUT_KEYS_AND_INDICES if return_keys else pb.SORT_OUTPUT_INDICES
        keys, _, indices = self._sorted(self._prepare_sort(x, None, descending, output, copy, retries, timeout))
        return (keys, indices) if return_keys else indices

    def _sorted(self, p: _Prepared):
        """One Sort call (retried as reduce_by_key's): (keys, values, indices), None where not asked."""
        call = self._header_only(p)
        if call is not None:  # never retried
            self._stream_header_only(call, _native.RPC_SORT, self._sort, p.timeout, call.feed_sort)
            return call.keys, call.sorted_values, call.indices

        def attempt(timeout: Optional[float]):
            asm = self._sort_assembler(p.x, p.side, p.request)  # per try: a failed one is dropped
            for raw in self._stream(self._sort, p.requests(), timeout):
                asm.feed(raw)
            return asm.result(), asm.timing or Timing()
        result, timing = self._retrying(p, attempt)
        self._set_timing(timing)
        return result

    def scan_iter(self, chunks: Iterable, op: str = "sum", exclusive: bool = False,
                  algorithm: Optional[str] = None, *, timeout: Optional[float] = None) -> Iterator[np.ndarray]:
        """One scan over a stream of arrays (the concatenation), yielding each array's scanned
        counterpart as it returns; for arrays that do not fit in memory. `chunks` is consumed on a
        grpc thread while results are read. Stopping the iteration early cancels the call. Never
        retried (chunks is read once); timeout: the whole stream's seconds (None: the client's;
        0: none)."""
        feeder, asm, timeout = self._scan_iter_parts(chunks, op, exclusive, algorithm, timeout)
        stream = self._stream(self._scan, feeder, timeout)
        try:
            for raw in stream:
                yield from asm.feed(raw)
        finally:
            stream.close()  # the caller stopped early: cancels the call now, not when collected
        if asm.current is not None:
            raise Internal("server returned fewer scan results than elements sent")
        self._set_timing(asm.timing or Timing())

    def reduce(self, x, op: str = "sum", *, dtype=None, copy: bool = False, lanes: Optional[int] = None,
               retries: Optional[int] = None, timeout: Optional[float] = None):
        """Reduction of a 1-D array: a numpy scalar of x's dtype (the identity for an empty array).
        op, dtype= (the accumulator and result: a narrow x as scan's, np.sum's defaults), copy=,
        lanes, retries and timeout as scan's. x in shared memory, or a CUDA array (as scan's):
        read there by the server, lanes and retries do not apply."""
        x, accumulate = self._with_dtype(x, dtype, copy)
        if accumulate is not None:
            p = self._prepare_narrow(x, accumulate, op, False, None, None, copy, retries, timeout, False)

            def narrow_attempt(timeout: Optional[float]):
                return _chunking.reduce_value(self._unary(self._reduce, p.requests(), timeout), accumulate[1])
            value, _, timing = self._retrying(p, narrow_attempt)
            self._set_timing(timing)
            return value
        p = self._prepare_reduce(x, op, copy, retries, timeout)
        call = self._header_only(p)
        if call is not None:
            with call:
                value = call.reduce_value(next(self._header_only_responses(call, _native.RPC_REDUCE, self._reduce,
                                                                           p.timeout)))
            self._set_timing(call.timing)
            return value
        if self._takes_native(p):
            h = p.request.header
            value, timing = self._native.reduce(p.x, h.dtype, h.op, self._native_lanes(lanes, p.x))
            self._set_timing(timing)
            return value

        def attempt(timeout: Optional[float]):
            k = self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:
                raws: List[bytes] = [b""] * k
                reqs, md = p.lane_requests(k)
                _chunking.fan_out(list(zip(self._lanes(k, "Reduce"), reqs)), raws.__setitem__, timeout, unary=True,
                                  metadata=md)
                return self._reduce_lanes_result(raws, p.x.dtype, len(p.x))
            return _chunking.reduce_value(self._unary(self._reduce, p.requests(), timeout), p.x.dtype)
        value, _, timing = self._retrying(p, attempt)
        self._set_timing(timing)
        return value

    def _unary(self, method, requests, timeout: Optional[float]) -> bytes:
        """One stream-unary call (Reduce, Histogram): the serialized response; Ctrl-C or any
        failure cancels it."""
        upload = _chunking.Upload(requests)

        def start():
            fut = method.future(iter(upload), timeout=timeout)
            upload.attach(fut)
            return fut
        with raised():
            return _pump.result_of(start)  # created and waited for off this thread (see _pump)

    def histogram(self, x, bins=10, range=None, *, copy: bool = False,
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
        values. With range=None (even bins over x's min and max) the range is found first by two
        reductions of x on the device (min, max), each a call of its own within `timeout`. The
        server must serve device memory on x's GPU, as scan's (4- or 8-byte dtypes: a narrow
        CUDA array is a ValueError); copy= does not apply; not retried."""
        p = self._prepare_histogram(x, bins, range, copy, retries, timeout)
        call = self._header_only(p)
        if call is not None:
            with call:
                if call.needs_range:
                    call.set_range(*(next(self._header_only_responses(call, _native.RPC_REDUCE, self._reduce,
                                                                      p.timeout, request=r))
                                     for r in call.range_requests()))
                result = call.histogram_value(next(self._header_only_responses(
                    call, _native.RPC_HISTOGRAM, self._histogram, p.timeout)))
            self._set_timing(call.timing)
            return result

        def attempt(timeout: Optional[float]):
            return _chunking.histogram_result(self._unary(self._histogram, p.requests(), timeout))
        result, timing = self._retrying(p, attempt)
        self._set_timing(timing)
        return result

    def compact(self, x, where=None, predicate=None, *, indices: bool = False, values: bool = True,
                copy: bool = False, lanes: Optional[int] = None, retries: Optional[int] = None,
                timeout: Optional[float] = None):
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
        where= must then be a CUDA bool/int8/uint8 array of x's size, read in place (a host mask:
        TypeError)."""
        p = self._prepare_compact(x, where, predicate, indices, values, copy, retries, timeout)
        call = self._header_only(p)
        if call is not None:
            self._stream_header_only(call, _native.RPC_COMPACT, self._compact, p.timeout, call.feed_compact)
            return self._compact_header_only_result(call, values, indices)
        if p.narrow:
            lanes = 1  # the server takes a narrow x on one call
        # Natively the kept values and indices are written at their kept offsets, so a retried
        # try writes every position again.
        if self._takes_native(p):
            v, i, timing = self._native.compact(p.x, p.request.header.SerializeToString(), p.side, values, indices,
                                                self._native_lanes(lanes, p.x))
            self._set_timing(timing)
            return self._compact_outputs(v, i, values, indices)

        def attempt(timeout: Optional[float]) -> _chunking.CompactAssembler:
            asm = _chunking.CompactAssembler(p.x.dtype)  # per try: a failed try's pieces are dropped
            k = self._usable_lanes(lanes, len(p.x), p.per, timeout)
            if k > 1:  # each lane's kept pieces are placed by their kept_offset
                reqs, md = p.lane_requests(k)
                _chunking.fan_out(list(zip(self._lanes(k, "Compact"), reqs)), lambda lane, raw: asm.feed(raw, lane),
                                  timeout, metadata=md)
            else:
                for raw in self._stream(self._compact, p.requests(), timeout):
                    asm.feed(raw)
            return asm
        asm = self._retrying(p, attempt)
        self._set_timing(asm.timing or Timing())
        return self._compact_result(asm, values, indices)

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
            return _pump.unary(self._stub.GetServerInfo, pb.GetServerInfoRequest(), timeout)

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """grpc.health.v1 status: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN" (of the
        whole server, or of `service`). timeout as scan's."""
        timeout = self._call_timeout(timeout)
        try:
            raw = _pump.unary(self._health, encode_health_request(service), timeout)
        except grpc.RpcError as e:
            return self._health_failed(e)
        return decode_health_response(raw)

    def benchmark(self, operations=None, algorithms=None, dtypes=None, sizes=None, repetitions=0,
                  warmup=0, on_row: Optional[Callable[[dict], None]] = None, devices=None, *,
                  timeout: Optional[float] = None) -> _types.Table:
        """Runs the server's kernel suite (cuda servers only): a Table of row dicts, each also
        passed to on_row as it comes. devices: ordinals to measure one after the other (default:
        the server's first). timeout: the whole run's seconds (None: the client's; 0: none)."""
        req = _types.bench_request(operations, algorithms, dtypes, sizes, repetitions, warmup, devices)
        timeout = self._call_timeout(timeout)
        table, add = self._bench_table(on_row)
        with raised():
            for row in _pump.ResponsePump(lambda: self._stub.Benchmark(req, timeout=timeout)):
                add(row)
        return table

    def transport(self, total_bytes: int, echo: bool = True, chunk_bytes: Optional[int] = None,
                  lanes: int = 1, *, timeout: Optional[float] = None) -> TransportResult:
        """The transport ceiling: total_bytes through the server's Transport RPC (no compute), in
        messages framed as a scan's are. With echo each chunk comes back (a Scan's byte pattern).
        lanes=K: K concurrent calls on K connections, chunk k on call k mod K (the ceiling of a
        K-lane scan); the totals are summed and server_total_us is the slowest call's. timeout
        as scan's (not retried)."""
        timeout = self._call_timeout(timeout)
        tally = self._transport_tally(total_bytes, echo, chunk_bytes, lanes)
        if tally.lanes == 1:
            for raw in self._stream(self._transport, tally.requests(), timeout):
                tally.feed(0, raw)
        else:
            streams = [(m, tally.requests(lane)) for lane, m in enumerate(self._lanes(tally.lanes, "Transport"))]
            _chunking.fan_out(streams, tally.feed, timeout, metadata=tally.metadata())
        return tally.result()

    def shared_array(self, n: int, dtype="int32", *, dir: Optional[str] = None,
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
