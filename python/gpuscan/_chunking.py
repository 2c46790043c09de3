"""Chunking and reassembly, for every call and both clients (sync and grpc.aio).

Requests: an array is cut into chunks of whole elements (chunk_bytes rounded down, at least one
element); chunk k travels as one request message whose bytes are built by one join (the copy
grpcio needs a `bytes` for); the first request also carries the header (the header alone for an
empty array). Responses: each result chunk carries its element offset, and is copied once, at that
offset, into the caller's preallocated array.

Lanes (header field 21, see Lanes in gpuscan.proto): chunk k of an array travels on lane k mod K,
each lane a call of its own on its own connection, every chunk full but the array's last. Requests
take a chunk selection (`lane_chunks`) and a header made by `lane_header`; scan results land by
offset and compaction's by kept_offset, whichever lane brings them; `fan_out` runs the K calls at
once on threads (the sync client; aio.py has its asyncio counterpart).
"""
from __future__ import annotations

import collections
import queue
import threading
from typing import Callable, Deque, Iterable, Iterator, List, Optional, Tuple

import grpc
import numpy as np

from . import _pump, _types, _wire
from ._types import HistogramResult, Timing, check_array, numpy_dtype
from .errors import Cancelled, Internal, from_rpc_error
from .v1 import gpuscan_pb2 as pb


def chunk_elements(chunk_bytes: int, itemsize: int) -> int:
    return max(1, int(chunk_bytes) // itemsize)


def chunk_ranges(n: int, per_chunk: int) -> Iterator[Tuple[int, int]]:
    """(start, end) element ranges of the chunks of an n-element array."""
    for start in range(0, n, per_chunk):
        yield start, min(n, start + per_chunk)


def lane_chunks(n: int, per_chunk: int, lane: int, lanes: int) -> Iterator[Tuple[int, int]]:
    """The chunks lane `lane` of `lanes` carries: chunk k goes on lane k mod lanes."""
    for k, r in enumerate(chunk_ranges(n, per_chunk)):
        if k % lanes == lane:
            yield r


def as_bytes(x: np.ndarray) -> memoryview:
    """A flat byte view of a contiguous array (no copy)."""
    return memoryview(x).cast("B") if x.size else memoryview(b"")


def data_requests(header_msg, data_field: int, x: np.ndarray, per_chunk: int,
                  flags: Optional[np.ndarray] = None,
                  ranges: Optional[Iterable[Tuple[int, int]]] = None,
                  flags_field: int = _wire.COMPACT_FLAGS) -> Iterator[bytes]:
    """Serialized requests: header (+ first chunk), then one chunk each. With flags (a contiguous
    array of len(x) elements: compact's flag bytes, a segmented scan's keys or head bytes), each
    request also carries, in field flags_field, the flags of the same elements. `ranges`
    (default: every chunk) selects the chunks, e.g. one lane's."""
    prefix = header_msg.SerializeToString()
    mv = as_bytes(x)
    fmv = as_bytes(flags) if flags is not None else None
    fsz = flags.itemsize if flags is not None else 0
    isz = x.itemsize
    for start, end in (chunk_ranges(len(x), per_chunk) if ranges is None else ranges):
        piece = mv[start * isz:end * isz]
        parts = [prefix, _wire.field_prefix(data_field, len(piece)), piece]
        if fmv is not None:
            fl = fmv[start * fsz:end * fsz]
            parts += [_wire.field_prefix(flags_field, len(fl)), fl]
        yield b"".join(parts)
        prefix = b""
    if prefix:  # empty array: the header alone
        yield prefix


class Upload:
    """Wraps a request iterator so an exception from the caller's data source (scan_iter's
    chunks) cancels the call and is re-raised to the caller, instead of grpc's generic CANCELLED."""

    def __init__(self, requests: Iterable[bytes]):
        self._requests = requests
        self.error: Optional[BaseException] = None
        self._call = None
        self._lock = threading.Lock()

    def __iter__(self):
        try:
            yield from self._requests
        except GeneratorExit:
            raise
        except BaseException as e:  # noqa: B902 - re-raised on the calling thread
            with self._lock:
                self.error = e
                call = self._call
            if call is None:
                raise  # grpc cancels the call itself
            call.cancel()

    def attach(self, call) -> None:
        with self._lock:
            self._call = call
            failed = self.error is not None
        if failed:
            call.cancel()


def lane_count(chunks: int, wanted: int, server_max: int) -> int:
    """The lanes a call uses: at most the server's Limits.max_lanes (0: it does not join lanes, so
    one call) and at most one per chunk (a lane without a chunk would only add a connection)."""
    if wanted <= 1 or chunks <= 1 or server_max <= 0:
        return 1
    return min(wanted, server_max, chunks)


def chunk_count(n: int, per_chunk: int) -> int:
    return -(-n // per_chunk)


def lane_header(request_msg, array_id: bytes, lane: int, lanes: int, per_chunk: int):
    """A copy of the first request (ScanRequest, ReduceRequest or CompactRequest with its header)
    with the header's lanes field (21) set: the array's id (16 random bytes, the same on every
    lane), this lane's index, the lane count K and the chunk length in elements."""
    if len(array_id) != 16:
        raise ValueError("gpuscan: a lanes array id is 16 bytes")
    out = type(request_msg)()
    out.CopyFrom(request_msg)
    lanes_msg = out.header.lanes
    lanes_msg.array_id = array_id
    lanes_msg.lane = lane
    lanes_msg.lane_count = lanes
    lanes_msg.chunk_elements = per_chunk
    return out


def first_failure(errors: List[BaseException]) -> BaseException:
    """The failure a laned call raises, from its lanes' errors in the order they happened: the
    first status that is not CANCELLED (the cause: a lane the server failed; the siblings we then
    cancelled say CANCELLED), else the first exception that is not a cancellation (e.g. a result
    that does not fit), else the first cancellation. grpc.RpcError becomes gpuscan.Error."""
    rpc = [e for e in errors if isinstance(e, grpc.RpcError)]
    first = next((e for e in rpc if e.code() != grpc.StatusCode.CANCELLED), None) or \
        next((e for e in errors if not isinstance(e, (grpc.RpcError, grpc.FutureCancelledError))), None) or \
        (rpc[0] if rpc else errors[0])
    if isinstance(first, grpc.RpcError):
        return from_rpc_error(first)
    if isinstance(first, grpc.FutureCancelledError):
        return Cancelled("a lane of this call was cancelled")
    return first


# Request metadata on every lane of a striped array: its id as hex, for an L7 balancer to hash the
# lanes to one replica (Lanes in gpuscan.proto; the C++ client's kArrayIdMetadata).
ARRAY_ID_METADATA = "gpuscan-array-id"


def array_id_metadata(array_id: bytes) -> tuple:
    """The lanes' call metadata for an array id."""
    return ((ARRAY_ID_METADATA, array_id.hex()),)


def fan_out(streams, feed: Callable[[int, bytes], None], timeout: Optional[float], unary: bool = False,
            metadata=None) -> None:
    """Runs several calls at once, one per lane, each on its own channel: streams is a list of
    (method, request iterator), stream-stream methods, or stream-unary ones with unary=True; every
    call carries `metadata` (the array id's: array_id_metadata). Every response goes to feed(lane,
    raw) under one lock. The first failure cancels every lane and is
    raised (the data source's own exception first, else see first_failure); Ctrl-C on the
    calling thread cancels them all."""
    uploads = [Upload(reqs) for _, reqs in streams]
    slots = [_pump.CallSlot() for _ in streams]
    lock = threading.Lock()
    failures: List[BaseException] = []
    finished: "queue.SimpleQueue" = queue.SimpleQueue()

    def cancel_all():
        for slot in slots:
            slot.cancel()

    def run(lane: int):
        """One lane, created, attached and read on its own thread: the calling thread never
        enters grpc, so Ctrl-C there is safe (see _pump)."""
        method, u = streams[lane][0], uploads[lane]
        try:
            if unary:
                call = slots[lane].set(method.future(iter(u), timeout=timeout, metadata=metadata))
                u.attach(call)
                raw = call.result()
                with lock:
                    feed(lane, raw)
            else:
                call = slots[lane].set(method(iter(u), timeout=timeout, metadata=metadata))
                u.attach(call)
                for raw in call:
                    with lock:
                        feed(lane, raw)
        except BaseException as e:  # noqa: B902 - handed to the calling thread
            with lock:
                failures.append(e)
            cancel_all()
        finally:
            finished.put(lane)

    _pump.start_canceller()
    for k in range(len(streams)):
        threading.Thread(target=run, args=(k,), name=f"gpuscan-lane-{k}", daemon=True).start()
    try:
        for _ in streams:
            _pump.wait(finished)
    except BaseException:
        _pump.cancel_later(cancel_all)
        raise
    for u in uploads:
        if u.error is not None:
            raise u.error
    if failures:
        raise first_failure(failures) from None


class ScanAssembler:
    """Writes result chunks into `out` at their offsets; keeps the final Timing. With lanes
    (per_chunk, K), each result must be exactly one chunk of the lane it came on, each chunk once:
    a server that did not join the lanes (each lane an array of its own) is caught here rather
    than returning a wrong scan."""

    def __init__(self, out: np.ndarray, lanes: Optional[Tuple[int, int]] = None):
        self.out_u8 = out.view(np.uint8) if out.size else np.empty(0, np.uint8)
        self.isz = out.itemsize
        self.n = len(out)
        self.received = 0
        self.timing: Optional[Timing] = None
        self.lanes = lanes
        self.seen = bytearray(chunk_count(self.n, lanes[0])) if lanes else None

    def feed(self, raw: bytes, lane: int = 0) -> None:
        f = _wire.parse(raw)
        data = f.get(1)
        if data is not None:
            s, e = data
            offset = f.get(2, 0)
            pos = offset * self.isz
            if pos + (e - s) > self.n * self.isz:
                raise Internal("server returned more scan results than elements sent")
            if self.lanes:
                self._check_lane_chunk(lane, offset, (e - s) // self.isz)
            self.out_u8[pos:pos + e - s] = np.frombuffer(raw, np.uint8, e - s, s)
            self.received += (e - s) // self.isz
        if 3 in f:
            s, e = f[3]
            self.timing = Timing.from_bytes(memoryview(raw)[s:e])

    def _check_lane_chunk(self, lane: int, offset: int, length: int) -> None:
        per, k = self.lanes
        chunk = offset // per
        if offset % per or chunk % k != lane or length != min(per, self.n - offset) or self.seen[chunk]:
            raise Internal(f"server answered elements {offset}..{offset + length} on lane {lane} of {k}, "
                           "not one chunk sent on that lane: it did not join the lanes of this array")
        self.seen[chunk] = 1

    def finish(self) -> Timing:
        if self.received != self.n:
            raise Internal(f"server returned {self.received} scan results for {self.n} elements")
        return self.timing or Timing()


class CompactAssembler:
    """Collects kept values and indices (zero-copy views onto the responses) with their
    kept_offset, then places each piece at its offset in one output array: one copy, and the
    same for one call (pieces in order) as for lanes (pieces in any order)."""

    def __init__(self, dtype: np.dtype):
        self.dtype = dtype
        self.values: List[Tuple[int, np.ndarray]] = []
        self.indices: List[Tuple[int, np.ndarray]] = []
        self.timing: Optional[Timing] = None
        self.kept_count: Optional[int] = None

    def feed(self, raw: bytes, lane: int = 0) -> None:
        f = _wire.parse(raw)
        offset = f.get(3, 0)
        if 1 in f:
            s, e = f[1]
            self.values.append((offset, np.frombuffer(raw, self.dtype, (e - s) // self.dtype.itemsize, s)))
        if 2 in f:
            s, e = f[2]
            self.indices.append((offset, np.frombuffer(raw, "<i8", (e - s) // 8, s)))
        if 4 in f:
            s, e = f[4]
            kept = f.get(5, 0)
            if self.kept_count is not None and kept != self.kept_count:  # lanes: every final has it
                raise Internal(f"server's lanes reported {self.kept_count} and {kept} kept elements")
            self.timing = Timing.from_bytes(memoryview(raw)[s:e])
            self.kept_count = kept

    def _place(self, pieces, dtype, what: str) -> np.ndarray:
        kept = self.kept_count or 0
        out = np.empty(kept, dtype)
        at = 0  # the pieces, by offset, must tile [0, kept) exactly
        for offset, piece in sorted(pieces, key=lambda p: p[0]):
            if offset != at or offset + len(piece) > kept:
                raise Internal(f"server's kept {what} at {offset}..{offset + len(piece)} do not continue "
                               f"at {at} of {kept} kept elements")
            out[at:at + len(piece)] = piece
            at += len(piece)
        if at != kept:
            raise Internal(f"server reported {kept} kept elements but sent {at} {what}")
        return out

    def result(self, want_values: bool, want_indices: bool):
        v = self._place(self.values, self.dtype.newbyteorder("="), "values") if want_values else None
        i = self._place(self.indices, np.int64, "indices") if want_indices else None
        return v, i


class ReduceByKeyAssembler:
    """Collects a reduction by key's runs (zero-copy views onto the responses) as they stream
    back, each response's run_offset continuing where the runs so far end, then joins them into
    (keys, values) with one copy each. Whatever does not add up (a gap or overlap in run_offset,
    keys and values of different counts or not whole elements, runs after the final response, a
    final run_count or element_count that disagrees, no final response, two adjacent runs with
    equal keys) is an Internal error rather than a wrong result."""

    def __init__(self, key_dtype: np.dtype, dtype: np.dtype, n: int):
        self.key_dtype = key_dtype.newbyteorder("<")
        self.dtype = dtype.newbyteorder("<")
        self.n = n
        self.keys: List[np.ndarray] = []
        self.values: List[np.ndarray] = []
        self.runs = 0
        self.timing: Optional[Timing] = None
        self.final = False

    def feed(self, raw: bytes) -> None:
        f = _wire.parse(raw)
        if self.final:
            raise Internal("server sent reduce-by-key responses after its final one")
        ks, ke = f.get(1, (0, 0))
        vs, ve = f.get(2, (0, 0))
        kbytes, vbytes = ke - ks, ve - vs
        ksz, vsz = self.key_dtype.itemsize, self.dtype.itemsize
        if kbytes % ksz or vbytes % vsz or kbytes // ksz != vbytes // vsz:
            raise Internal(f"server sent {kbytes} bytes of keys ({ksz} each) with {vbytes} bytes of values "
                           f"({vsz} each): not one key per run value")
        count = kbytes // ksz
        if count:
            offset = f.get(3, 0)
            if offset != self.runs:
                raise Internal(f"server sent runs {offset}..{offset + count} after {self.runs} runs: "
                               "run_offset does not continue")
            if self.runs + count > self.n:
                raise Internal(f"server sent more runs ({self.runs + count}) than elements ({self.n})")
            self.keys.append(np.frombuffer(raw, self.key_dtype, count, ks))
            self.values.append(np.frombuffer(raw, self.dtype, count, vs))
            self.runs += count
        if 4 in f or 5 in f or 6 in f:  # the final response (it carries no runs)
            if count:
                raise Internal("server's final reduce-by-key response carries runs")
            run_count, element_count = f.get(5, 0), f.get(6, 0)
            if run_count != self.runs or element_count != self.n:
                raise Internal(f"server reported {run_count} runs of {element_count} elements but sent "
                               f"{self.runs} runs for {self.n} elements")
            if 4 in f:
                s, e = f[4]
                self.timing = Timing.from_bytes(memoryview(raw)[s:e])
            self.final = True

    def result(self) -> Tuple[np.ndarray, np.ndarray]:
        if not self.final:
            raise Internal("server ended the reduce-by-key call without its final response")
        if (self.runs == 0) != (self.n == 0):
            raise Internal(f"server sent {self.runs} runs for {self.n} elements")
        keys = self._join(self.keys, self.key_dtype)
        if len(keys) > 1 and np.any(keys[1:] == keys[:-1]):
            at = int(np.flatnonzero(keys[1:] == keys[:-1])[0])
            raise Internal(f"server sent runs {at} and {at + 1} with the same key {keys[at]}: not whole runs")
        return keys, self._join(self.values, self.dtype)

    def _join(self, pieces, dtype) -> np.ndarray:
        out = np.empty(self.runs, dtype.newbyteorder("="))
        at = 0
        for p in pieces:
            out[at:at + len(p)] = p
            at += len(p)
        return out


class SortAssembler:
    """Writes a sort's results (keys, values, indices: those the output asked for, None for the
    others) into arrays of n elements as they stream back, each response's offset continuing where
    the elements so far end and carrying the same number of each wanted kind. Whatever does not add
    up (a gap or overlap in offset, pieces of different counts or not whole elements, a kind that
    was not asked for, more than n elements, elements after or in the final response, a final
    element_count that disagrees, no final response, fewer than n elements, keys out of order in
    Sort's total order, an index outside 0..n-1, equal keys whose indices are not increasing) is an
    Internal error rather than a wrong result."""

    def __init__(self, key_dtype: np.dtype, values_dtype: Optional[np.dtype], output: int, descending: bool,
                 n: int):
        self.n = n
        self.descending = descending
        want_keys = output in (pb.SORT_OUTPUT_KEYS, pb.SORT_OUTPUT_KEYS_AND_VALUES, pb.SORT_OUTPUT_KEYS_AND_INDICES)
        want_values = output == pb.SORT_OUTPUT_KEYS_AND_VALUES
        want_indices = output in (pb.SORT_OUTPUT_INDICES, pb.SORT_OUTPUT_KEYS_AND_INDICES)
        # (response field, name, wire dtype, asked for), in the order keys, values, indices
        self.kinds = [(1, "keys", key_dtype.newbyteorder("<"), want_keys),
                      (2, "values", values_dtype.newbyteorder("<") if values_dtype is not None else None, want_values),
                      (3, "indices", np.dtype("<i8"), want_indices)]
        self.out = [np.empty(n, d.newbyteorder("=")) if want else None for _, _, d, want in self.kinds]
        self.received = 0
        self.timing: Optional[Timing] = None
        self.final = False

    def feed(self, raw: bytes) -> None:
        f = _wire.parse(raw)
        if self.final:
            raise Internal("server sent sort responses after its final one")
        counts = []
        for field, what, dtype, want in self.kinds:
            s, e = f.get(field, (0, 0))
            if e > s and not want:
                raise Internal(f"server sent sorted {what}, which this sort did not ask for")
            if want and (e - s) % dtype.itemsize:
                raise Internal(f"server sent {e - s} bytes of sorted {what}: not whole {dtype.itemsize}-byte elements")
            if want:
                counts.append((e - s) // dtype.itemsize)
        if len(set(counts)) > 1:
            names = [what for _, what, _, want in self.kinds if want]
            raise Internal("server sent " + ", ".join(f"{c} sorted {w}" for c, w in zip(counts, names)) +
                           " in one response: not one of each per element")
        count = counts[0]
        if count:
            offset = f.get(4, 0)
            if offset != self.received:
                raise Internal(f"server sent sorted elements {offset}..{offset + count} after {self.received}: "
                               "offset does not continue")
            if self.received + count > self.n:
                raise Internal(f"server sent more sorted elements ({self.received + count}) than it was sent "
                               f"({self.n})")
            for (field, _, dtype, want), out in zip(self.kinds, self.out):
                if want:
                    s, _ = f[field]
                    out[self.received:self.received + count] = np.frombuffer(raw, dtype, count, s)
            self.received += count
        if 5 in f or 6 in f:  # the final response (it carries no elements)
            if count:
                raise Internal("server's final sort response carries elements")
            element_count = f.get(6, 0)
            if element_count != self.n or self.received != self.n:
                raise Internal(f"server reported {element_count} elements sorted but sent {self.received} "
                               f"for {self.n} elements")
            if 5 in f:
                s, e = f[5]
                self.timing = Timing.from_bytes(memoryview(raw)[s:e])
            self.final = True

    def result(self) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
        """(keys, values, indices), None for those not asked for, after the checks above."""
        if not self.final:
            raise Internal("server ended the sort call without its final response")
        keys, values, indices = self.out
        if indices is not None and self.n and (indices.min() < 0 or indices.max() >= self.n):
            raise Internal(f"server sent a sort index outside 0..{self.n - 1}")
        if keys is not None and self.n > 1:
            order = _types.sort_order(keys)
            a, b = (order[1:], order[:-1]) if self.descending else (order[:-1], order[1:])
            bad = a > b
            if indices is not None:
                bad |= (a == b) & (indices[1:] <= indices[:-1])
            if bad.any():
                at = int(np.flatnonzero(bad)[0])
                raise Internal(f"server sent sorted elements {at} and {at + 1} out of order "
                               f"({'descending' if self.descending else 'ascending'}, stable): keys "
                               f"{keys[at]!r}, {keys[at + 1]!r}" +
                               (f", indices {indices[at]}, {indices[at + 1]}" if indices is not None else ""))
        return keys, values, indices


class ScanIterFeeder:
    """scan_iter's side of the call: turns the caller's arrays into requests (all one dtype) and
    remembers each array's length, so the reader knows where one output array ends."""

    def __init__(self, chunks: Iterable, header_fn: Callable[[int], object], chunk_bytes: int):
        self._chunks = chunks
        self._header_fn = header_fn
        self._chunk_bytes = chunk_bytes
        self.lengths: Deque[int] = collections.deque()
        self.wire = None  # set by the first array

    def __iter__(self) -> Iterator[bytes]:
        for arr in self._chunks:
            yield from self.requests_for(arr)
        yield from self.finish()

    def requests_for(self, arr) -> Iterator[bytes]:
        """The requests of one caller array (the first also carries the header)."""
        x, wire = check_array(arr, "chunk")
        prefix_msg = _EMPTY
        if self.wire is None:
            self.wire = wire
            prefix_msg = self._header_fn(wire)
        elif wire != self.wire:
            raise ValueError(f"gpuscan: scan_iter chunks must share one dtype: got {x.dtype} after "
                             f"{numpy_dtype(self.wire).newbyteorder('=')}")
        if len(x) == 0:
            prefix = prefix_msg.SerializeToString()
            return iter([prefix] if prefix else [])
        self.lengths.append(len(x))
        return data_requests(prefix_msg, _wire.SCAN_DATA, x, chunk_elements(self._chunk_bytes, x.itemsize))

    def finish(self) -> Iterator[bytes]:
        if self.wire is None:  # no arrays at all: an empty scan (its dtype does not matter)
            self.wire = pb.DTYPE_INT32
            yield self._header_fn(pb.DTYPE_INT32).SerializeToString()


class _Empty:
    @staticmethod
    def SerializeToString() -> bytes:
        return b""


_EMPTY = _Empty()


class ScanIterAssembler:
    """Turns result chunks back into one output array per input array, in order."""

    def __init__(self, feeder: ScanIterFeeder):
        self.feeder = feeder
        self.current: Optional[np.ndarray] = None
        self.filled = 0
        self.timing: Optional[Timing] = None

    def feed(self, raw: bytes) -> List[np.ndarray]:
        """The output arrays this response completes (usually none or one)."""
        f = _wire.parse(raw)
        done = []
        if 1 in f:
            s, e = f[1]
            dtype = numpy_dtype(self.feeder.wire).newbyteorder("=")
            src = np.frombuffer(raw, dtype, (e - s) // dtype.itemsize, s)
            while len(src):
                if self.current is None:
                    if not self.feeder.lengths:
                        raise Internal("server returned more scan results than elements sent")
                    self.current = np.empty(self.feeder.lengths.popleft(), dtype)
                    self.filled = 0
                take = min(len(src), len(self.current) - self.filled)
                self.current[self.filled:self.filled + take] = src[:take]
                self.filled += take
                src = src[take:]
                if self.filled == len(self.current):
                    done.append(self.current)
                    self.current = None
        if 3 in f:
            s, e = f[3]
            self.timing = Timing.from_bytes(memoryview(raw)[s:e])
        return done


def transport_requests(total_bytes: int, chunk_bytes: int, echo: bool, lane: int = 0,
                       lanes: int = 1) -> Iterator[bytes]:
    """Transport's payload: total_bytes in chunk_bytes messages, built by a join as a scan's are;
    with lanes, the chunks k with k mod lanes == lane."""
    payload = np.random.default_rng(1).integers(1, 255, size=min(chunk_bytes, total_bytes) or 1,
                                                dtype=np.uint8)
    mv = memoryview(payload)
    first = _wire.varint_field(_wire.TRANSPORT_ECHO, 1) if echo else b""
    for start, end in lane_chunks(total_bytes, chunk_bytes, lane, lanes):
        yield b"".join((first, _wire.field_prefix(_wire.TRANSPORT_DATA, end - start), mv[:end - start]))
        first = b""
    if first or (total_bytes == 0 and not echo):
        yield first + _wire.field_prefix(_wire.TRANSPORT_DATA, 0)


def reduce_value(raw_response: bytes, dtype: np.dtype):
    """ReduceResponse -> (numpy scalar of dtype, element_count, Timing)."""
    r = pb.ReduceResponse.FromString(raw_response)
    if len(r.raw_value) == dtype.itemsize:
        value = np.frombuffer(r.raw_value, dtype.newbyteorder("<"))[0].astype(dtype.newbyteorder("="))
    else:
        which = r.value.WhichOneof("value")
        value = np.array(getattr(r.value, which) if which else 0).astype(dtype)[()]
    return value, r.element_count, Timing.from_proto(r.timing)


def histogram_result(raw_response: bytes) -> Tuple[HistogramResult, Timing]:
    """HistogramResponse -> (HistogramResult with its own writable arrays, Timing)."""
    r = pb.HistogramResponse.FromString(raw_response)
    counts = np.frombuffer(r.counts, "<u8").astype(np.uint64)
    edges = np.frombuffer(r.edges, "<f8").astype(np.float64)
    if len(edges) != len(counts) + 1:
        raise Internal(f"server returned {len(counts)} histogram counts with {len(edges)} edges")
    return (HistogramResult(counts, edges, r.below, r.above, r.nan_count, r.element_count),
            Timing.from_proto(r.timing))
