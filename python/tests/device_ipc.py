"""What the test_device_ipc_*.py suites share. They test device memory (header field 22): scan,
reduce, compact, histogram, sort and segmented scan of CUDA arrays (__cuda_array_interface__),
which the server reads and writes where they lie through CUDA IPC handles (gpuscan._device).

Everywhere (no GPU, no CuPy): FakeArray, the interface over made-up pointers; FakeDriver,
_device.Driver's calls over made-up allocations (fixture `fake`; `no_driver` fails a test that
reaches the driver); StandIn, a server that says it serves device memory and keeps the headers it
got; Malformed, answers the client must refuse; FakeNative, the C API's header call answered by a
StandIn. On a GPU: the fixtures `cp` (CuPy, else a skip) and `dev` (a client of a cuda server with
--allow-device-ipc on a unix socket, one per test module), and bit-for-bit comparisons.

A suite imports the fixtures it uses from here, pytest taking fixtures from a module's names (with
dev, the cp and sock_dir it asks for): they serve these suites alone, so conftest.py does not
carry them.
"""
import copy
import os
import re
import shutil
import tempfile

import grpc
import numpy as np
import pytest

import gpuscan
from gpuscan import _device
from gpuscan.testing import LoggedProcess
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

UUID = bytes(range(16))
OTHER_UUID = bytes(range(100, 116))
NOWHERE = "127.0.0.1:1"  # nothing listens: the checks below come before any call


class FakeArray:
    """An object with __cuda_array_interface__ over a made-up pointer (never dereferenced)."""

    def __init__(self, shape, dtype="int32", ptr=0x7F00_0000_0000, *, strides=None, readonly=False, stream=1,
                 version=3, mask=None):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ptr, self.strides, self.readonly, self.stream, self.version, self.mask = \
            ptr, strides, readonly, stream, version, mask

    @property
    def __cuda_array_interface__(self):
        d = {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly),
             "strides": self.strides, "version": self.version}
        if self.version >= 3:
            d["stream"] = self.stream
        if self.mask is not None:
            d["mask"] = self.mask
        return d

    def __getitem__(self, s):  # 1-D slices (compact returns its outputs [:kept])
        start, stop, step = s.indices(self.shape[0])
        assert step == 1
        return FakeArray(stop - start, self.dtype, self.ptr + start * self.dtype.itemsize, stream=self.stream)


class FakeDriver:
    """_device.Driver's three calls over made-up allocations (base, size, buffer id, device UUID)."""

    def __init__(self):
        self.allocations = []
        self.synchronized = []

    def array(self, n, dtype="int32", *, at=0, room=None, device=UUID, **kw) -> FakeArray:
        """n elements `at` elements into a new allocation of `room` elements (default n)."""
        dt = np.dtype(dtype)
        base = 0x7F00_0000_0000 + len(self.allocations) * (1 << 32)
        self.allocations.append((base, max(room or n, 1) * dt.itemsize, len(self.allocations) + 1, device))
        return FakeArray(n, dt, base + at * dt.itemsize, **kw)

    def empty(self, like, shape, dtype):  # stands in for _device.empty (CuPy's or PyTorch's)
        assert isinstance(like, FakeArray)
        return self.array(int(np.prod(shape)), dtype)

    def _find(self, ptr):
        for a in self.allocations:
            if a[0] <= ptr < a[0] + a[1]:
                return a
        raise AssertionError(f"no allocation at {ptr:#x}")

    def locate(self, ptr, what):
        _, _, buffer_id, device = self._find(ptr)
        return _device.Location(0, device, buffer_id)

    def synchronize(self, ordinal, stream):
        self.synchronized.append(stream)

    def export(self, ptr, nbytes, what, at):
        base, size, buffer_id, _ = self._find(ptr)
        assert ptr + nbytes <= base + size and at.allocation == buffer_id
        return _device.Exported(handle_of(buffer_id), ptr - base)


def handle_of(buffer_id):
    return buffer_id.to_bytes(8, "little") * 8


@pytest.fixture()
def no_driver(monkeypatch):
    """Any driver call fails the test: what these tests check comes before the driver."""
    def refuse():
        raise AssertionError("the CUDA driver was called")
    monkeypatch.setattr(_device, "driver", refuse)


@pytest.fixture()
def fake(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(_device, "driver", lambda: drv)
    monkeypatch.setattr(_device, "empty", drv.empty)
    return drv


class StandIn(pb_grpc.GpuScanServicer):
    """A server that says it serves device memory on one device (UUID) and answers every call with
    its final response alone, keeping the headers it got. Reduce answers `reduced[op]` (42 for an
    operator not there); Histogram counts 0, 1, 2, ... over the header's edges (and takes a streamed
    call too, to compare the headers of both paths)."""

    def __init__(self, devices=((0, "Stand-in GPU", UUID),), device_ipc=True):
        self.info = pb.ServerInfo(engine="cuda", limits=pb.Limits(device_ipc=device_ipc),
                                  devices=[pb.Device(ordinal=o, name=name, uuid=u) for o, name, u in devices])
        self.headers, self.info_calls, self.kept, self.reduced = [], 0, 0, {}

    def GetServerInfo(self, request, context):
        self.info_calls += 1
        return self.info

    def _header(self, requests):
        reqs = list(requests)
        assert len(reqs) == 1 and [f.name for f, _ in reqs[0].ListFields()] == ["header"], reqs  # the header alone
        self.headers.append(reqs[0].header)
        return reqs[0].header

    def Scan(self, requests, context):
        h = self._header(requests)
        yield pb.ScanResponse(element_count=h.element_count, timing=pb.Timing(total_us=7))

    def Reduce(self, requests, context):
        h = self._header(requests)
        dtype = gpuscan._types.numpy_dtype(h.dtype)
        return pb.ReduceResponse(raw_value=np.array(self.reduced.get(h.op, 42), dtype).tobytes(),
                                 element_count=h.element_count, timing=pb.Timing(total_us=7))

    def Compact(self, requests, context):
        h = self._header(requests)
        yield pb.CompactResponse(kept_count=self.kept, element_count=h.element_count, timing=pb.Timing(total_us=7))

    def Histogram(self, requests, context):
        reqs = list(requests)
        h = reqs[0].header
        if h.HasField("device_memory") or h.element_count == 0:
            assert len(reqs) == 1 and [f.name for f, _ in reqs[0].ListFields()] == ["header"], reqs
        self.headers.append(h)
        edges = histogram_edges(h)
        return pb.HistogramResponse(counts=np.arange(len(edges) - 1, dtype="<u8").tobytes(),
                                    edges=edges.astype("<f8").tobytes(), below=1, above=2, nan_count=3,
                                    element_count=h.element_count, timing=pb.Timing(total_us=8))

    def Sort(self, requests, context):
        h = self._header(requests)
        yield pb.SortResponse(element_count=h.element_count, timing=pb.Timing(total_us=9))

    def SegmentedScan(self, requests, context):
        h = self._header(requests)
        yield pb.ScanResponse(element_count=h.element_count, timing=pb.Timing(total_us=11))

    def PutArray(self, requests, context):
        h = self._header(requests)
        return pb.ArrayInfo(id=bytes(range(24)), dtype=h.dtype, element_count=h.element_count,
                            bytes=h.device_memory.bytes, device="0: Stand-in GPU", label=h.label)


def histogram_edges(h) -> np.ndarray:
    """The edges a server computes from a HistogramHeader (see HistogramHeader)."""
    if h.edges:
        return np.array(h.edges, np.float64)
    e = np.linspace(h.lo, h.hi, h.bins + 1)
    return e.astype(np.float32).astype(np.float64) if h.dtype == pb.DTYPE_FLOAT32 else e


def dm(h):
    return h.device_memory


class Malformed(StandIn):
    """Answers that a device-memory histogram, sort or segmented scan must not get (`how`): data
    streamed back, a wrong element count, no final response, counts for another number of bins;
    a segmented scan's UNIMPLEMENTED (a float sum the client did not refuse, had it been asked)."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def Histogram(self, requests, context):
        h = self._header(requests)
        if self.how == "count":
            return pb.HistogramResponse(counts=bytes(8), edges=bytes(16), element_count=h.element_count + 1)
        return pb.HistogramResponse(counts=bytes(16), edges=bytes(16), element_count=h.element_count)

    def _stream(self, h, response, data_field):
        if self.how == "data":
            yield response(**{data_field: bytes(4 * h.element_count)})
        if self.how != "no final":
            yield response(element_count=h.element_count + (self.how == "count"), timing=pb.Timing())

    def Sort(self, requests, context):
        yield from self._stream(self._header(requests), pb.SortResponse, "keys")

    def SegmentedScan(self, requests, context):
        h = self._header(requests)
        if self.how == "unimplemented":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "header.op=OPERATOR_SUM on float32: not served on device "
                                                         "memory")
        yield from self._stream(h, pb.ScanResponse, "data")


class FakeNative:
    """_native.NativeClient's header_call, answered by a StandIn's methods (no C API, no socket);
    timeouts: each call's deadline as timed() gave it (seconds, None: none)."""

    def __init__(self, srv: StandIn):
        self.srv, self.calls, self.timeouts, self.rooms, self._timeout = srv, [], [], [], None

    @property
    def room(self):  # the last call's response room (the views share the lists)
        return self.rooms[-1]

    def timed(self, timeout):
        view = copy.copy(self)
        view._timeout = timeout
        return view

    def header_call(self, rpc, request, interruptible=True, response_bytes=64 << 10):
        self.calls.append((rpc, interruptible))
        self.timeouts.append(self._timeout)
        self.rooms.append(response_bytes)
        kind, method = {gpuscan._native.RPC_SCAN: (pb.ScanRequest, self.srv.Scan),
                        gpuscan._native.RPC_REDUCE: (pb.ReduceRequest, self.srv.Reduce),
                        gpuscan._native.RPC_COMPACT: (pb.CompactRequest, self.srv.Compact),
                        gpuscan._native.RPC_HISTOGRAM: (pb.HistogramRequest, self.srv.Histogram),
                        gpuscan._native.RPC_SORT: (pb.SortRequest, self.srv.Sort),
                        gpuscan._native.RPC_SEGMENTED_SCAN: (pb.SegmentedScanRequest, self.srv.SegmentedScan)}[rpc]
        answer = method(iter([kind.FromString(request)]), None)
        return (answer if hasattr(answer, "SerializeToString") else list(answer)[-1]).SerializeToString()

    def close(self):
        pass


# -- a GPU and CuPy
@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, no device
        pytest.skip(f"no CUDA device: {e}")
    if count < 1:
        pytest.skip("no CUDA device")
    return cupy


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def raw_array(cp, ptr: int, n: int, dtype) -> "cp.ndarray":
    """n elements of dtype at ptr (memory this test allocated and frees itself) as a CuPy array."""
    dtype = np.dtype(dtype)
    return cp.ndarray((n,), dtype, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, n * dtype.itemsize, None), 0))


def same_histogram(got, want, where=""):
    """Two HistogramResults alike: counts and edges bit for bit, below/above/nan/element counts."""
    assert isinstance(got, gpuscan.HistogramResult), where
    assert same_bits(got.counts, want.counts) and same_bits(got.edges, want.edges), where
    assert (got.below, got.above, got.nan_count, got.element_count) == \
        (want.below, want.above, want.nan_count, want.element_count), where


# -- a GPU, CuPy and a server that serves device memory
def start_server(binary, sock_dir, *, allow=True) -> LoggedProcess:
    sock = os.path.join(sock_dir, "allow.sock" if allow else "plain.sock")
    args = [binary, "--address", f"unix:{sock}", "--engine", "cuda", "--log-level", "info",
            "--resident-bytes", str(1 << 30), *(["--allow-device-ipc"] if allow else [])]
    try:
        srv = LoggedProcess(args, re.compile(r"listening on (\S+)"), "gpuscan-server")
    except RuntimeError as e:
        if "allow-device-ipc" in str(e):
            pytest.skip(f"{binary} predates --allow-device-ipc")
        raise
    srv.target = f"unix:{sock}"
    return srv


@pytest.fixture(scope="module")
def sock_dir():
    d = tempfile.mkdtemp(prefix="gpuscan-ipc-")  # short: a unix socket's path has 107 bytes at most
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def dev(cp, server_binary, sock_dir):
    """A client of a cuda server with --allow-device-ipc, on a unix socket."""
    with start_server(server_binary, sock_dir) as srv:
        with gpuscan.Client(srv.target, timeout=300) as c:
            info = c.info()
            assert info["limits"]["device_ipc"] is True, info
            yield c
