"""Device memory (header field 22): scan, reduce, compact, histogram, sort and segmented scan of CUDA arrays
(__cuda_array_interface__), which the server reads and writes where they lie through CUDA IPC
handles (gpuscan._device).

Three parts:
- everywhere (no GPU, no CuPy): objects that expose the interface over made-up pointers. The
  interface's checks; host and CUDA arrays mixed; the operations with no device path; a server
  that does not serve device memory (the session's: FailedPrecondition before any driver call);
  and the client's requests and results against a stand-in server with a stand-in driver (the
  handles and offsets it sends, in place, compact's outputs, a histogram's header and the range
  found by two reductions on the device, a sort's outputs for every SortOutput and its values,
  the device check, the streams waited for, an empty array, malformed answers, which calls go
  through the C API and, where the library loads, the C API's header calls themselves; a
  segmented scan's keys or heads (keys_handle/keys_offset), in place, and its refusals).
- a GPU and CuPy, no server: the driver (gpuscan._device.Driver) on real allocations: the device's
  UUID, offsets and handles per allocation, memory it refuses, a child process that opens the
  handle and reads the array.
- a GPU, CuPy and a gpuscan-server that serves device memory ($GPUSCAN_SERVER or the build's, started
  here with the cuda engine and --allow-device-ipc on a unix socket): results against numpy on
  random data, floats bit for bit against the same server's streamed path; histograms against
  numpy.histogram and the streamed path (even bins, autodetected range, explicit edges; NaN and
  infinities); sorts of every dtype against the streamed path bit for bit (NaN of both signs and
  payloads, +-0, +-inf, subnormals; duplicates; ascending and descending; argsort, keys and
  indices, keys and values); offsets inside a larger allocation; a server without
  --allow-device-ipc; outputs too small or missing (raw requests); an allocation freed and
  replaced after its handle was used; PyTorch tensors; the async client; segmented scans of
  exact operators (keys of int32/int64 and heads) against the streamed path bit for bit, and a
  float sum's refusal (the client's, and the server's UNIMPLEMENTED on a raw request).
"""
import asyncio
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import grpc
import numpy as np
import pytest

import gpuscan
import reference as ref
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


def histogram_edges(h) -> np.ndarray:
    """The edges a server computes from a HistogramHeader (see HistogramHeader)."""
    if h.edges:
        return np.array(h.edges, np.float64)
    e = np.linspace(h.lo, h.hi, h.bins + 1)
    return e.astype(np.float32).astype(np.float64) if h.dtype == pb.DTYPE_FLOAT32 else e


# -- everywhere: the checks before any call
def test_interface_checks(no_driver):
    with gpuscan.Client(NOWHERE, native=False) as c:
        bad = [  # (call, the error's words)
            (lambda: c.scan(FakeArray(10, strides=(8,))), "not C-contiguous"),
            (lambda: c.scan(FakeArray((4, 5), strides=(4, 16))), "not C-contiguous"),
            (lambda: c.scan(FakeArray(10, "<f2")), "float16, which is not served"),
            (lambda: c.scan(FakeArray(10, "|b1")), "bool, which is not served"),
            (lambda: c.reduce(FakeArray(10, "|u1")), "uint8, which is not served"),
            (lambda: c.reduce(FakeArray(10, ">i4")), "big-endian"),
            (lambda: c.reduce(FakeArray(10, mask=FakeArray(10, "|b1"))), "masked"),
            (lambda: c.reduce(FakeArray(())), "0-d"),
            (lambda: c.reduce(FakeArray(10, ptr=0)), "null or not aligned"),
            (lambda: c.reduce(FakeArray(10, "<i8", ptr=0x7F00_0000_0004)), "null or not aligned"),
            (lambda: c.scan(FakeArray(10), out=FakeArray(10, readonly=True)), "out is read-only"),
            (lambda: c.scan(FakeArray(10), out=FakeArray(9)), "10 int32 elements like x, got 9 int32"),
            (lambda: c.scan(FakeArray(10), out=FakeArray(10, "<i8")), "10 int32 elements like x, got 10 int64"),
            (lambda: (lambda x: c.scan(x, out=x))(FakeArray(10, readonly=True)), "cannot be scanned in place"),
            (lambda: c.compact(FakeArray(10), where=FakeArray(10, "<i4")), "bool, int8 or uint8"),
            (lambda: c.compact(FakeArray(10), where=FakeArray(9, "|b1")), "where has 9 elements but x has 10"),
            (lambda: c.compact(FakeArray(10), where=FakeArray(10, "|b1"), predicate="nonzero"), "exactly one of"),
            (lambda: c.compact(FakeArray(10), predicate="nonzero", values=False), "needs indices=True"),
            (lambda: c.compact(FakeArray(10), predicate=("bogus", 1)), "predicate"),
            (lambda: c.histogram(FakeArray(10, "<f2"), 4, range=(0, 1)), "float16, which is not served"),
            (lambda: c.histogram(FakeArray(10), 0), "bins must be >= 1"),  # range=None: checked before any call
            (lambda: c.histogram(FakeArray(10), 2.5), "bins must be an integer"),
            (lambda: c.histogram(FakeArray(10), 4, range=(0, math.inf)), "not finite"),
            (lambda: c.histogram(FakeArray(10), 4, range=(0,)), "range must be a pair"),
            (lambda: c.histogram(FakeArray(10), [[0.0, 1.0]]), "1-D sequence of edges"),
            (lambda: c.histogram(FakeArray(10, strides=(8,)), 4), "not C-contiguous"),
            (lambda: c.sort(FakeArray((2, 5))), "sort takes a 1-D CUDA array, x has shape (2, 5)"),
            (lambda: c.argsort(FakeArray((2, 5)), return_keys=True), "sort takes a 1-D CUDA array"),
            (lambda: c.sort(FakeArray(10), values=FakeArray(9, "<f8")), "values has 9 elements but x has 10"),
            (lambda: c.sort(FakeArray(10), values=FakeArray((2, 5))), "values must be 1-D"),
            (lambda: c.sort(FakeArray(10), values=FakeArray(10, "<f2")), "values has dtype float16"),
            (lambda: c.sort(FakeArray(10), values=FakeArray(10, strides=(8,))), "values is not C-contiguous"),
            (lambda: c.sort(FakeArray(10), descending=1), "descending must be True or False"),
            (lambda: c.argsort(FakeArray(10, "|u1")), "uint8, which is not served"),
            (lambda: c.argsort(FakeArray(10, ">u8")), "big-endian"),
        ]
        for call, words in bad:
            with pytest.raises(ValueError, match=re.escape(words)):
                call()
        with pytest.raises(gpuscan.InvalidArgument):  # a bitwise operator on floats, as for host arrays
            c.scan(FakeArray(10, "<f4"), op="bit_or")
        with pytest.raises(ValueError, match="timeout"):
            c.reduce(FakeArray(10), timeout=-1)


def test_host_and_device_arrays_do_not_mix(no_driver):
    host = np.arange(10, dtype=np.int32)
    with gpuscan.Client(NOWHERE, native=False) as c:
        for call, words in [
            (lambda: c.scan(FakeArray(10), out=host), "x is a CUDA array but out is not (ndarray)"),
            (lambda: c.scan(host, out=FakeArray(10)), "out is a CUDA array but x is not (ndarray)"),
            (lambda: c.compact(FakeArray(10), where=host > 3), "x is a CUDA array but where is not"),
            (lambda: c.compact(host, where=FakeArray(10, "|b1")), "where is a CUDA array but x is not"),
            (lambda: c.sort(FakeArray(10), values=host), "x is a CUDA array but values is not (ndarray)"),
            (lambda: c.sort(host, values=FakeArray(10)), "values is a CUDA array but x is not (ndarray)"),
            (lambda: c.segmented_scan(FakeArray(10), host), "x is a CUDA array but keys is not (ndarray)"),
            (lambda: c.segmented_scan(host, FakeArray(10)), "keys is a CUDA array but x is not (ndarray)"),
            (lambda: c.segmented_scan(FakeArray(10), heads=host > 3), "x is a CUDA array but heads is not (ndarray)"),
            (lambda: c.segmented_scan(host, heads=FakeArray(10, "|b1")), "heads is a CUDA array but x is not"),
            (lambda: c.segmented_scan(host, host, out=FakeArray(10)), "out is a CUDA array but x is not"),
            (lambda: c.segmented_scan(FakeArray(10), FakeArray(10), out=host), "x is a CUDA array but out is not"),
        ]:
            with pytest.raises(TypeError, match=re.escape(words)):
                call()


def test_operations_without_a_device_path(client, no_driver):
    d, host = FakeArray(10), np.arange(10, dtype=np.int32)
    with pytest.raises(TypeError, match="scan_iter takes host arrays, and chunk is a CUDA array"):
        list(client.scan_iter([host, d]))  # refused as it comes, the call cancelled
    with gpuscan.Client(NOWHERE, native=False) as c:
        for name, call in [
            ("scan2d", lambda: c.scan2d(FakeArray((2, 5)))),
            ("reduce_by_key", lambda: c.reduce_by_key(d, host)),
            ("reduce_by_key", lambda: c.reduce_by_key(host, d)),
        ]:
            with pytest.raises(TypeError, match=f"{name} takes host arrays.*serves scan, reduce, compact, histogram, "
                                                "sort and segmented scan only"):
                call()

    async def main():
        async with gpuscan.AsyncClient(client.target) as ac:
            with pytest.raises(TypeError, match="reduce_by_key takes host arrays"):
                await ac.reduce_by_key(d, host)
            with pytest.raises(TypeError, match="scan2d takes host arrays"):
                await ac.scan2d(FakeArray((2, 5)))
            with pytest.raises(TypeError, match="scan_iter takes host arrays"):
                [y async for y in ac.scan_iter([host, d])]
            with pytest.raises(TypeError, match="x is a CUDA array but out is not"):
                await ac.scan(d, out=host)
    asyncio.run(main())


def test_server_without_device_memory(client, no_driver):
    """The session's server (cpu, or a cuda one without --allow-device-ipc): FailedPrecondition
    saying why, from the client's look at ServerInfo, before the driver; host arrays still stream."""
    info = client.info()
    if info["limits"]["device_ipc"]:
        pytest.skip("the session's server serves device memory")
    why = "cpu engine" if info["engine"] == "cpu" else "without --allow-device-ipc"
    for call in (lambda: client.scan(FakeArray(10)), lambda: client.scan(FakeArray(0), out=FakeArray(0)),
                 lambda: client.reduce(FakeArray(10, "<f8")),
                 lambda: client.compact(FakeArray(10), where=FakeArray(10, "|b1"), indices=True),
                 lambda: client.histogram(FakeArray(10), 4), lambda: client.histogram(FakeArray(10), 4, range=(0, 1)),
                 lambda: client.histogram(FakeArray(0), [0.0, 1.0]),
                 lambda: client.sort(FakeArray(10)), lambda: client.sort(FakeArray(10), values=FakeArray(10, "<f8")),
                 lambda: client.argsort(FakeArray(10), return_keys=True),
                 lambda: client.segmented_scan(FakeArray(10), FakeArray(10, "<i8")),
                 lambda: client.segmented_scan(FakeArray(10), heads=FakeArray(10, "|u1"), op="max", exclusive=True)):
        with pytest.raises(gpuscan.FailedPrecondition, match=f"does not serve device memory: .*{why}"):
            call()
    assert client.reduce(np.arange(5, dtype=np.int32)) == 10

    async def main():
        async with gpuscan.AsyncClient(client.target) as ac:
            with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
                await ac.reduce(FakeArray(10))
            with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
                await ac.histogram(FakeArray(10), 4)
            with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
                await ac.argsort(FakeArray(10))
            with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
                await ac.segmented_scan(FakeArray(10), heads=FakeArray(10, "|b1"))
    asyncio.run(main())


# -- everywhere: requests and results against a stand-in server and driver
def dm(h):
    return h.device_memory


def test_scan_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x, out = fake.array(100, "float32", at=250, room=1000), fake.array(100, "float32", at=3, room=103)
        assert c.scan(x, op="max", exclusive=True, out=out) is out
        h = srv.headers[-1]
        assert h.dtype == pb.DTYPE_FLOAT32 and h.op == pb.OPERATOR_MAX and h.kind == pb.SCAN_KIND_EXCLUSIVE
        assert h.element_count == 100 and dm(h).device_uuid == UUID and dm(h).bytes == 400
        assert (dm(h).handle, dm(h).offset) == (handle_of(1), 1000)  # x lies 250 elements into its allocation
        assert (dm(h).output_handle, dm(h).output_offset) == (handle_of(2), 12)
        assert c.last_timing.total_us == 7
        assert c.scan(x, out=x) is x and not dm(srv.headers[-1]).output_handle  # in place
        same = FakeArray(100, "float32", x.ptr)  # another object over x's memory: in place too
        assert c.scan(x, out=same) is same and not dm(srv.headers[-1]).output_handle
        y = c.scan(x)  # a new array like x (CuPy's or PyTorch's; here the stand-in's)
        assert isinstance(y, FakeArray) and y.shape == (100,) and y.dtype == np.float32
        assert (dm(srv.headers[-1]).output_handle, dm(srv.headers[-1]).output_offset) == (handle_of(3), 0)
        m = fake.array(12, "int64")
        m.shape = (3, 4)  # any shape, C-contiguous: its elements in order
        c.scan(m, out=fake.array(12, "int64"))
        assert srv.headers[-1].element_count == 12 and dm(srv.headers[-1]).bytes == 96
        assert srv.info_calls == 1  # kept once it serves device memory
        assert fake.synchronized == [1] * 5  # each call waited for the arrays' stream (one, 1: legacy default)


def test_reduce_and_compact_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(50, "uint64", at=7, room=64)
        got = c.reduce(x, op="min")
        assert type(got) is np.uint64 and got == 42
        h = srv.headers[-1]
        assert h.op == pb.OPERATOR_MIN and h.element_count == 50 and (dm(h).offset, dm(h).bytes) == (56, 400)
        assert not dm(h).output_handle and not dm(h).indices_handle and not dm(h).flags_handle

        srv.kept = 3
        flags = fake.array(50, "bool", at=10, room=80)
        v, i = c.compact(x, where=flags, indices=True)
        h = srv.headers[-1]
        assert h.use_flags and h.output == pb.COMPACT_OUTPUT_VALUES_AND_INDICES and h.element_count == 50
        assert (dm(h).flags_handle, dm(h).flags_offset) == (handle_of(2), 10)
        assert (dm(h).output_handle, dm(h).output_offset, dm(h).indices_handle) == (handle_of(3), 0, handle_of(4))
        assert v.shape == (3,) and v.dtype == np.uint64 and i.shape == (3,) and i.dtype == np.int64
        assert v.ptr == fake.allocations[2][0] and fake.allocations[2][1] == 400  # room for every element
        assert fake.allocations[3][1] == 400  # int64 indices of every element

        srv.kept = 0
        i = c.compact(x, predicate=("gt", 5), values=False, indices=True)
        h = srv.headers[-1]
        assert h.WhichOneof("selector") == "predicate" and h.predicate.op == pb.PREDICATE_OP_GT
        assert h.output == pb.COMPACT_OUTPUT_INDICES and not dm(h).output_handle and dm(h).indices_handle
        assert i.shape == (0,) and i.dtype == np.int64


def test_histogram_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(100, "float64", at=20, room=200)
        got = c.histogram(x, 8, range=(-1.5, 2.5))
        h = srv.headers[-1]
        assert (h.dtype, h.bins, h.lo, h.hi, list(h.edges), h.element_count) == \
            (pb.DTYPE_FLOAT64, 8, -1.5, 2.5, [], 100)
        assert (dm(h).device_uuid, dm(h).handle, dm(h).offset, dm(h).bytes) == (UUID, handle_of(1), 160, 800)
        for field in ("output", "indices", "flags", "values", "values_output"):  # a histogram writes nothing
            assert not getattr(dm(h), f"{field}_handle") and not getattr(dm(h), f"{field}_offset"), field
        assert isinstance(got, gpuscan.HistogramResult) and got.counts.dtype == np.uint64
        assert got.counts.tolist() == list(range(8)) and got.edges.tolist() == np.linspace(-1.5, 2.5, 9).tolist()
        assert (got.below, got.above, got.nan_count, got.element_count) == (1, 2, 3, 100)
        assert c.last_timing.total_us == 8 and len(fake.allocations) == 1  # nothing allocated

        counts, edges = c.histogram(x, [0, 1, 1, 5.5])  # explicit edges, as float64
        h = srv.headers[-1]
        assert list(h.edges) == [0.0, 1.0, 1.0, 5.5] and h.bins == 0 and dm(h).handle == handle_of(1)
        assert counts.tolist() == [0, 1, 2] and edges.tolist() == [0.0, 1.0, 1.0, 5.5]

        # range=None: x's min and max, from two reductions of x where it lies, then the header the
        # host path sends for an array of those extremes (numpy's bins of a float32 array's range)
        for dtype, lo, hi, bins in (("int32", -3, 42, 5), ("uint64", 2**63 + 5, 2**64 - 1, 3),
                                    ("float32", -1.3, 2.7, 7), ("float64", 0.1, 0.7, 1000), ("int64", 9, 9, 2)):
            xs = fake.array(77, dtype, at=5, room=90)
            srv.reduced = {pb.OPERATOR_MIN: lo, pb.OPERATOR_MAX: hi}
            before = len(srv.headers)
            got = c.histogram(xs, bins)
            mn, mx, hd = srv.headers[before:]
            assert isinstance(mn, pb.ReduceHeader) and isinstance(mx, pb.ReduceHeader), (mn, mx)
            assert (mn.op, mx.op) == (pb.OPERATOR_MIN, pb.OPERATOR_MAX)
            assert mn.dtype == mx.dtype == hd.dtype and mn.element_count == mx.element_count == 77
            assert mn.device_memory == mx.device_memory == hd.device_memory and dm(hd).offset == 5 * xs.dtype.itemsize
            host = np.array([hi, lo] + [lo] * 75, dtype)  # the same extremes on the host: streamed
            want = c.histogram(host, bins)
            hh = srv.headers[-1]
            assert not hh.HasField("device_memory") and hh.element_count == 77
            hd.ClearField("device_memory")
            assert hd == hh, (dtype, hd, hh)
            assert got.edges.tolist() == want.edges.tolist() and got.counts.tolist() == want.counts.tolist()

        srv.reduced = {pb.OPERATOR_MIN: np.nan, pb.OPERATOR_MAX: 1.0}  # NaN in x: numpy's autodetected range fails
        before = len(srv.headers)
        with pytest.raises(ValueError, match="autodetected range of .* is not finite"):
            c.histogram(fake.array(10, "float32"), 4)
        assert all(isinstance(h, pb.ReduceHeader) for h in srv.headers[before:])  # no histogram call
        srv.reduced = {}
        c.histogram(x, 3, range=(0, 1), retries=2, copy=True)  # retries= checked, copy= ignored: one call
        assert len(srv.headers) == 25  # 1 + 1 + 5 x (2 reductions, the histogram, the host's) + 2 + 1
        assert fake.synchronized == [1] * 9  # one wait per histogram of a device array, before its reductions


SORT_OUTPUTS = {  # output: (what sort/argsort are asked, the DeviceMemory outputs set)
    pb.SORT_OUTPUT_KEYS: ("sort", {"output"}),
    pb.SORT_OUTPUT_KEYS_AND_VALUES: ("sort values=", {"output", "values", "values_output"}),
    pb.SORT_OUTPUT_INDICES: ("argsort", {"indices"}),
    pb.SORT_OUTPUT_KEYS_AND_INDICES: ("argsort return_keys=", {"output", "indices"}),
}


def test_sort_requests(serve_servicer, fake):
    assert set(SORT_OUTPUTS) == set(pb.SortOutput.values())  # every output
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        for output, (how, fields) in SORT_OUTPUTS.items():
            for descending in (False, True):
                fake.allocations.clear()
                x = fake.array(40, "uint32", at=6, room=60)  # allocation 1
                v = fake.array(40, "float64", at=3, room=50)  # allocation 2 (made for every output)
                if how == "sort":
                    got = c.sort(x, descending=descending)
                elif how == "sort values=":
                    got = c.sort(x, values=v, descending=descending)
                elif how == "argsort":
                    got = c.argsort(x, descending=descending)
                else:
                    got = c.argsort(x, descending=descending, return_keys=True)
                h = srv.headers[-1]
                where = (pb.SortOutput.Name(output), descending)
                assert (h.dtype, h.descending, h.output, h.element_count) == (pb.DTYPE_UINT32, descending, output,
                                                                             40), where
                assert h.values_dtype == (pb.DTYPE_FLOAT64 if "values" in fields else pb.DTYPE_UNSPECIFIED), where
                assert (dm(h).device_uuid, dm(h).handle, dm(h).offset, dm(h).bytes) == (UUID, handle_of(1), 24, 160)
                assert not dm(h).flags_handle, where
                for field in ("output", "indices", "values", "values_output"):
                    assert bool(getattr(dm(h), f"{field}_handle")) == (field in fields), (where, field)
                # the new outputs: allocations 3, 4, ... in the order keys, sorted values, indices; n
                # uint32 keys, n float64 values, n int64 indices
                order = [f for f in ("output", "values_output", "indices") if f in fields]
                assert len(fake.allocations) == 2 + len(order), where
                made = {}
                for field, (base, size, buffer_id, _) in zip(order, fake.allocations[2:]):
                    assert (getattr(dm(h), f"{field}_handle"), getattr(dm(h), f"{field}_offset")) == \
                        (handle_of(buffer_id), 0), (where, field)
                    assert size == {"output": 160, "values_output": 320, "indices": 320}[field], (where, field)
                    made[field] = base
                if "values" in fields:
                    assert (dm(h).values_handle, dm(h).values_offset) == (handle_of(2), 24), where
                keys = got[0] if how in ("sort values=", "argsort return_keys=") else got
                if how == "sort values=":
                    assert got[1].dtype == np.float64 and got[1].shape == (40,) and got[1].ptr == made["values_output"]
                if how == "argsort":
                    assert keys.dtype == np.int64 and keys.shape == (40,) and keys.ptr == made["indices"]
                else:
                    assert keys.dtype == np.uint32 and keys.shape == (40,) and keys.ptr == made["output"], where
                if how == "argsort return_keys=":
                    assert got[1].dtype == np.int64 and got[1].ptr == made["indices"]
                assert c.last_timing.total_us == 9
        assert srv.info_calls == 1


def test_device_memory_fields_are_a_handle_and_an_offset_each():
    """Each array a call names is <field>_handle (bytes) and <field>_offset (uint64) in DeviceMemory:
    what Call.export sets by name."""
    names = {f.name: f.type for f in pb.DeviceMemory.DESCRIPTOR.fields}
    for field in _device._FIELD_WORDS:
        assert names[f"{field}_handle"] == names["handle"] and names[f"{field}_offset"] == names["offset"], field

def test_device_and_stream_checks(serve_servicer, fake):
    srv = StandIn(devices=((0, "GPU zero", OTHER_UUID), (3, "GPU three", bytes(16))))
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        with pytest.raises(gpuscan.FailedPrecondition,
                           match=r"x is on GPU-00010203-0405-0607-0809-0a0b0c0d0e0f, which the server .* does not "
                                 r"serve \(its devices: 0: GPU zero GPU-64656667-.*, 3: GPU three GPU-0000"):
            c.reduce(fake.array(10))
        assert srv.headers == []
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(10)
        with pytest.raises(ValueError, match="the output array is on another GPU than x"):
            c.scan(x, out=fake.array(10, device=OTHER_UUID))
        with pytest.raises(ValueError, match="the flags array is on another GPU"):
            c.compact(x, where=fake.array(10, "uint8", device=OTHER_UUID))
        with pytest.raises(ValueError, match="the values array is on another GPU"):
            c.sort(x, values=fake.array(10, "float32", device=OTHER_UUID))
        with pytest.raises(gpuscan.FailedPrecondition, match="x is on GPU-6465.*which the server .* does not serve"):
            c.histogram(fake.array(10, device=OTHER_UUID), 4)  # before the reductions that find its range
        assert srv.headers == []
        fake.synchronized.clear()
        c.scan(fake.array(10, stream=7), out=fake.array(10, stream=None))  # None: nothing to wait for
        c.scan(fake.array(10, version=2), out=fake.array(10, stream=2))  # before v3: the whole device
        assert fake.synchronized[0] == 7 and sorted(fake.synchronized[1:]) == sorted([_device.ALL_STREAMS, 2])
        fake.synchronized.clear()
        c.sort(fake.array(10, stream=5), values=fake.array(10, "int64", stream=6))  # the values' stream too
        assert sorted(fake.synchronized) == [1, 5, 6]  # (1: the new outputs')


def test_empty_arrays_name_no_memory(serve_servicer, fake):
    """An empty array has no memory to name (its pointer may be 0): its header goes without
    device_memory, a call of no elements, and the driver is not asked."""
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = FakeArray(0, "int64", ptr=0)
        y = c.scan(x)
        assert isinstance(y, FakeArray) and y.shape == (0,)
        assert c.reduce(x) == 42 and c.compact(x, predicate="nonzero").shape == (0,)
        got = c.histogram(x, 3)  # numpy's range of an empty array, (0, 1): no reductions
        assert got.element_count == 0 and got.edges.tolist() == np.linspace(0, 1, 4).tolist()
        assert (srv.headers[-1].bins, srv.headers[-1].lo, srv.headers[-1].hi) == (3, 0.0, 1.0)
        assert c.histogram(x, [1.0, 2.0]).counts.tolist() == [0]
        y = c.sort(x)
        assert isinstance(y, FakeArray) and y.shape == (0,) and y.dtype == np.int64
        k, v = c.sort(x, values=FakeArray(0, "float32", ptr=0), descending=True)
        assert k.shape == v.shape == (0,) and v.dtype == np.float32
        h = srv.headers[-1]
        assert h.output == pb.SORT_OUTPUT_KEYS_AND_VALUES and h.values_dtype == pb.DTYPE_FLOAT32
        k, i = c.argsort(x, return_keys=True)
        assert k.shape == i.shape == (0,) and i.dtype == np.int64
        assert len(srv.headers) == 8 and not any(isinstance(h, pb.ReduceHeader) for h in srv.headers[3:])
        assert all(not h.HasField("device_memory") and h.element_count == 0 for h in srv.headers)
        assert fake.synchronized == []


def test_async_client_requests(serve_servicer, fake):
    srv = StandIn()
    target = serve_servicer(srv)

    async def main():
        async with gpuscan.AsyncClient(target) as c:
            x, out = fake.array(30, "int32", at=2, room=40), fake.array(30, "int32")
            assert await c.scan(x, out=out) is out
            assert (dm(srv.headers[-1]).offset, dm(srv.headers[-1]).output_handle) == (8, handle_of(2))
            assert await c.reduce(x, op="max") == 42
            srv.kept = 2
            v = await c.compact(x, where=fake.array(30, "uint8"))
            assert v.shape == (2,) and dm(srv.headers[-1]).flags_handle == handle_of(3)
            srv.reduced = {pb.OPERATOR_MIN: -7, pb.OPERATOR_MAX: 3}
            got = await c.histogram(x, 5)  # range=None: the two reductions, then the histogram
            mn, mx, h = srv.headers[-3:]
            assert (mn.op, mx.op) == (pb.OPERATOR_MIN, pb.OPERATOR_MAX)
            assert (h.bins, h.lo, h.hi, h.element_count) == (5, -7, 3, 30)
            assert mn.device_memory == mx.device_memory == h.device_memory and dm(h).offset == 8
            assert got.counts.tolist() == [0, 1, 2, 3, 4] and c.last_timing.total_us == 8
            counts, _ = await c.histogram(x, [0, 1, 2])
            assert counts.tolist() == [0, 1] and list(srv.headers[-1].edges) == [0, 1, 2]
            k, vals = await c.sort(x, values=fake.array(30, "float64"), descending=True)
            h = srv.headers[-1]
            assert h.output == pb.SORT_OUTPUT_KEYS_AND_VALUES and h.descending and h.values_dtype == pb.DTYPE_FLOAT64
            assert dm(h).values_handle and dm(h).values_output_handle and dm(h).output_handle
            assert k.dtype == np.int32 and vals.dtype == np.float64 and c.last_timing.total_us == 9
            i = await c.argsort(x)
            assert i.dtype == np.int64 and srv.headers[-1].output == pb.SORT_OUTPUT_INDICES
            k, i = await c.argsort(x, return_keys=True)
            assert srv.headers[-1].output == pb.SORT_OUTPUT_KEYS_AND_INDICES and k.dtype == np.int32
            assert srv.info_calls == 1
    asyncio.run(main())


def test_segmented_scan_checks(no_driver):
    """A segmented scan's arguments, checked before any call (the client's target has no server):
    a float sum or product is gpuscan.Unimplemented there, naming the host path."""
    d, ro = FakeArray(10), FakeArray(10, readonly=True)
    with gpuscan.Client(NOWHERE, native=False) as c:
        for call, error, words in [
            (lambda: c.segmented_scan(d), ValueError, "exactly one of keys= .* or heads="),
            (lambda: c.segmented_scan(d, FakeArray(10), heads=FakeArray(10, "|b1")), ValueError, "exactly one of"),
            (lambda: c.segmented_scan(d, FakeArray(10, "<f4")), ValueError,
             r"keys must be a CUDA array of int32, int64, uint32, uint64, got dtype float32: .*never widened"),
            (lambda: c.segmented_scan(d, FakeArray(10, "<i2")), ValueError, "keys has dtype int16, which is not served"),
            (lambda: c.segmented_scan(d, FakeArray(10, "|b1")), ValueError, "keys has dtype bool, which is not served"),
            (lambda: c.segmented_scan(d, heads=FakeArray(10)), ValueError,
             "heads must be a bool, int8 or uint8 CUDA array .* got dtype int32"),
            (lambda: c.segmented_scan(d, FakeArray(9)), ValueError, "keys has 9 elements but x has 10"),
            (lambda: c.segmented_scan(d, heads=FakeArray(11, "|u1")), ValueError, "heads has 11 elements but x has 10"),
            (lambda: c.segmented_scan(d, FakeArray((2, 5))), ValueError, r"keys must be 1-D, got shape \(2, 5\)"),
            (lambda: c.segmented_scan(FakeArray((2, 5)), FakeArray(10)), ValueError,
             r"segmented_scan takes a 1-D CUDA array, x has shape \(2, 5\)"),
            (lambda: c.segmented_scan(d, FakeArray(10, strides=(8,))), ValueError, "keys is not C-contiguous"),
            (lambda: c.segmented_scan(d, FakeArray(10), out=FakeArray(10, "<i8")), ValueError,
             "out must be a CUDA array of 10 int32 elements like x, got 10 int64"),
            (lambda: c.segmented_scan(d, FakeArray(10), out=FakeArray(10, readonly=True)), ValueError,
             "out is read-only"),
            (lambda: c.segmented_scan(ro, FakeArray(10), out=ro), ValueError, "cannot be scanned in place"),
            (lambda: c.segmented_scan(d, FakeArray(10), op="nope"), ValueError, "unknown operator"),
            (lambda: c.segmented_scan(FakeArray(10, "<f4"), FakeArray(10), op="bit_xor"), gpuscan.InvalidArgument,
             "not defined for dtype float32"),
            (lambda: c.segmented_scan(d, FakeArray(10), timeout=-1), ValueError, "timeout"),
        ]:
            with pytest.raises(error, match=words):
                call()
        x32, x64 = FakeArray(10, "<f4"), FakeArray(10, "<f8")
        for call, words in [
            (lambda: c.segmented_scan(x32, FakeArray(10)), "a float32 sum segmented scan of device memory"),
            (lambda: c.segmented_scan(x64, heads=FakeArray(10, "|b1"), op="product", exclusive=True),
             "a float64 product segmented scan of device memory"),
            (lambda: c.segmented_scan(x32, FakeArray(10, "<u8"), op="add", out=x32), "a float32 sum segmented"),
        ]:
            with pytest.raises(gpuscan.Unimplemented, match=words) as e:
                call()
            assert e.value.code == grpc.StatusCode.UNIMPLEMENTED
            assert "not served yet" in str(e.value) and "the host path serves them" in str(e.value)

    async def main():
        async with gpuscan.AsyncClient(NOWHERE) as ac:
            with pytest.raises(gpuscan.Unimplemented, match="float32 sum segmented scan of device memory"):
                await ac.segmented_scan(FakeArray(10, "<f4"), FakeArray(10))
            with pytest.raises(TypeError, match="x is a CUDA array but keys is not"):
                await ac.segmented_scan(FakeArray(10), np.zeros(10, np.int32))
    asyncio.run(main())


def test_segmented_scan_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x, keys = fake.array(100, "int32", at=250, room=1000), fake.array(100, "int64", at=5, room=105)
        out = fake.array(100, "int32", at=3, room=103)
        assert c.segmented_scan(x, keys, op="bit_xor", exclusive=True, out=out) is out
        h = srv.headers[-1]
        assert isinstance(h, pb.SegmentedScanHeader) and h.WhichOneof("segments") == "key_dtype"
        assert (h.dtype, h.op, h.kind, h.key_dtype) == (pb.DTYPE_INT32, pb.OPERATOR_BIT_XOR, pb.SCAN_KIND_EXCLUSIVE,
                                                        pb.DTYPE_INT64)
        assert h.element_count == 100 and dm(h).device_uuid == UUID and dm(h).bytes == 400
        assert (dm(h).handle, dm(h).offset) == (handle_of(1), 1000)
        assert (dm(h).keys_handle, dm(h).keys_offset) == (handle_of(2), 40)  # 5 int64 into its allocation
        assert (dm(h).output_handle, dm(h).output_offset) == (handle_of(3), 12)
        assert not (dm(h).indices_handle or dm(h).flags_handle or dm(h).values_handle or dm(h).values_output_handle)
        assert c.last_timing.total_us == 11

        heads = fake.array(100, "bool", at=7, room=107)
        assert c.segmented_scan(x, heads=heads, op="max", out=x) is x  # in place
        h = srv.headers[-1]
        assert h.WhichOneof("segments") == "heads" and h.heads and h.kind == pb.SCAN_KIND_INCLUSIVE
        assert h.op == pb.OPERATOR_MAX and not dm(h).output_handle and dm(h).output_offset == 0
        assert (dm(h).keys_handle, dm(h).keys_offset) == (handle_of(4), 7)  # one byte a head
        same = FakeArray(100, "int32", x.ptr)  # another object over x's memory: in place too
        assert c.segmented_scan(x, heads=fake.array(100, "uint8"), out=same) is same
        assert not dm(srv.headers[-1]).output_handle

        # x as its own keys (int32 values, runs of equal values), in place: keys_handle is x's, the
        # output unset
        assert c.segmented_scan(x, x, out=x) is x
        h = srv.headers[-1]
        assert h.key_dtype == pb.DTYPE_INT32 and (dm(h).keys_handle, dm(h).keys_offset) == (handle_of(1), 1000)
        assert not dm(h).output_handle

        y = c.segmented_scan(fake.array(20, "float32"), fake.array(20, "uint32"), op="min")  # a new array like x
        assert isinstance(y, FakeArray) and y.shape == (20,) and y.dtype == np.float32
        h = srv.headers[-1]
        assert h.dtype == pb.DTYPE_FLOAT32 and h.key_dtype == pb.DTYPE_UINT32 and h.op == pb.OPERATOR_MIN
        assert dm(h).output_handle == handle_of(8) and dm(h).keys_handle == handle_of(7)

        # every other RPC leaves keys_handle unset
        c.scan(x, out=out)
        c.sort(x, values=fake.array(100, "float32"))
        assert c.reduce(x) == 42
        assert all(not dm(h).keys_handle and dm(h).keys_offset == 0 for h in srv.headers[-3:])

        # keys or heads on another GPU than x
        for kw, words in [({"keys": fake.array(100, "int64", device=OTHER_UUID)}, "the keys array"),
                          ({"heads": fake.array(100, "uint8", device=OTHER_UUID)}, "the heads array")]:
            with pytest.raises(ValueError, match=f"{words} is on another GPU than x"):
                c.segmented_scan(x, out=out, **kw)
        fake.synchronized.clear()
        c.segmented_scan(fake.array(10, stream=5), fake.array(10, "int64", stream=6), out=fake.array(10, stream=None))
        assert sorted(fake.synchronized) == [5, 6]  # the keys' stream too

        # an empty x: no memory named, the segments' kind still in the header
        n_headers = len(srv.headers)
        y = c.segmented_scan(FakeArray(0, "int64", ptr=0), FakeArray(0, "uint64", ptr=0))
        assert isinstance(y, FakeArray) and y.shape == (0,) and y.dtype == np.int64
        z = FakeArray(0, "int32", ptr=0)
        assert c.segmented_scan(z, heads=FakeArray(0, "|b1", ptr=0), out=z) is z
        k, hd = srv.headers[n_headers:]
        assert k.key_dtype == pb.DTYPE_UINT64 and hd.heads and k.element_count == hd.element_count == 0
        assert not k.HasField("device_memory") and not hd.HasField("device_memory")
        assert srv.info_calls == 1


def test_segmented_scan_async_requests(serve_servicer, fake):
    srv = StandIn()
    target = serve_servicer(srv)

    async def main():
        async with gpuscan.AsyncClient(target) as c:
            x, keys = fake.array(30, "uint32", at=2, room=40), fake.array(30, "int32")
            y = await c.segmented_scan(x, keys, exclusive=True)
            h = srv.headers[-1]
            assert isinstance(y, FakeArray) and y.dtype == np.uint32 and y.shape == (30,)
            assert (dm(h).offset, dm(h).keys_handle, dm(h).output_handle) == (8, handle_of(2), handle_of(3))
            assert h.key_dtype == pb.DTYPE_INT32 and h.kind == pb.SCAN_KIND_EXCLUSIVE and c.last_timing.total_us == 11
            assert await c.segmented_scan(x, heads=fake.array(30, "int8"), op="max", out=x) is x
            h = srv.headers[-1]
            assert h.heads and not dm(h).output_handle and dm(h).keys_handle == handle_of(4)
    asyncio.run(main())


class MalformedSegmented(StandIn):
    def __init__(self, how):
        super().__init__()
        self.how = how

    def SegmentedScan(self, requests, context):
        h = self._header(requests)
        if self.how == "data":
            yield pb.ScanResponse(data=bytes(4 * h.element_count))
        if self.how == "unimplemented":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "header.op=OPERATOR_SUM on float32: not served on device "
                                                         "memory")
        if self.how != "no final":
            yield pb.ScanResponse(element_count=h.element_count + (self.how == "count"), timing=pb.Timing())


@pytest.mark.parametrize("how, error, words", [
    ("data", gpuscan.Internal, "streamed scan data back"), ("count", gpuscan.Internal, "scan counted 11 elements"),
    ("no final", gpuscan.Internal, "without its final response"),
    ("unimplemented", gpuscan.Unimplemented, "not served on device memory")])
def test_malformed_segmented_scan_answers(serve_servicer, fake, how, error, words):
    """The server's answers checked; its UNIMPLEMENTED (a float sum the client did not refuse, had
    it one day been asked) is gpuscan.Unimplemented."""
    with gpuscan.Client(serve_servicer(MalformedSegmented(how)), native=False) as c:
        with pytest.raises(error, match=words):
            c.segmented_scan(fake.array(10), heads=fake.array(10, "uint8"))


def test_segmented_scan_takes_the_c_api(serve_servicer, fake):
    """With the C API loaded, a device segmented scan goes through gpuscan_header_call with
    GPUSCAN_RPC_SEGMENTED_SCAN (5), on the caller's thread; a timeout of its own: grpcio."""
    assert gpuscan._native.RPC_SEGMENTED_SCAN == 5  # GPUSCAN_RPC_SEGMENTED_SCAN of gpuscan_capi.h
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False, timeout=30) as c:
        c._native = native = FakeNative(srv)
        x = fake.array(50, "int64")
        assert c.segmented_scan(x, fake.array(50, "int32"), out=x) is x
        y = c.segmented_scan(x, heads=fake.array(50, "bool"), op="min", exclusive=True)
        assert y.shape == (50,) and c.last_timing.total_us == 11
        R = gpuscan._native
        assert native.calls == [(R.RPC_SEGMENTED_SCAN, False)] * 2 and len(srv.headers) == 2
        c.segmented_scan(x, heads=fake.array(50, "bool"), timeout=5)  # a timeout of its own: grpcio
        assert len(native.calls) == 2 and len(srv.headers) == 3 and srv.headers[-1].heads
        c._native = None


class Malformed(StandIn):
    """Answers that a device-memory histogram or sort must not get."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def Histogram(self, requests, context):
        h = self._header(requests)
        if self.how == "count":
            return pb.HistogramResponse(counts=bytes(8), edges=bytes(16), element_count=h.element_count + 1)
        return pb.HistogramResponse(counts=bytes(16), edges=bytes(16), element_count=h.element_count)

    def Sort(self, requests, context):
        h = self._header(requests)
        if self.how == "data":
            yield pb.SortResponse(keys=bytes(4 * h.element_count))
        if self.how != "no final":
            yield pb.SortResponse(element_count=h.element_count + (self.how == "count"), timing=pb.Timing())


@pytest.mark.parametrize("how, words", [("data", "streamed sorted elements back"), ("count", "counted 11 elements"),
                                        ("no final", "without its final response")])
def test_malformed_sort_answers(serve_servicer, fake, how, words):
    with gpuscan.Client(serve_servicer(Malformed(how)), native=False) as c:
        with pytest.raises(gpuscan.Internal, match=words):
            c.argsort(fake.array(10))


@pytest.mark.parametrize("how, words", [("count", "histogram counted 11 elements"), ("edges", "2 histogram counts")])
def test_malformed_histogram_answers(serve_servicer, fake, how, words):
    with gpuscan.Client(serve_servicer(Malformed(how)), native=False) as c:
        with pytest.raises(gpuscan.Internal, match=words):
            c.histogram(fake.array(10), 1, range=(0, 1))


class FakeNative:
    """_native.NativeClient's header_call, answered by a StandIn's methods (no C API, no socket)."""

    def __init__(self, srv: StandIn):
        self.srv, self.calls = srv, []

    def header_call(self, rpc, request, interruptible=True, response_bytes=64 << 10):
        self.calls.append((rpc, interruptible))
        self.room = response_bytes
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


def test_which_calls_take_the_c_api(serve_servicer, fake):
    """With the C API loaded, a device call goes through its gpuscan_header_call (on the caller's
    thread: not interruptible) with the RPC's number: the histogram's reductions too. Not: a call
    with a timeout of its own, a histogram whose response may exceed the C API's buffer."""
    assert (gpuscan._native.RPC_HISTOGRAM, gpuscan._native.RPC_SORT) == (3, 4)  # GPUSCAN_RPC_* of gpuscan_capi.h
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False, timeout=30) as c:
        c._native = native = FakeNative(srv)
        x = fake.array(50, "int64")
        srv.reduced = {pb.OPERATOR_MIN: -5, pb.OPERATOR_MAX: 5}
        assert c.histogram(x, 10).counts.tolist() == list(range(10))
        assert c.histogram(x, [0.0, 1.0, 2.0]).counts.tolist() == [0, 1]
        k, v = c.sort(x, values=fake.array(50, "float32"))
        c.argsort(x)
        assert c.reduce(x) == 42 and c.scan(x) is not None
        R = gpuscan._native
        assert native.calls == [(R.RPC_REDUCE, False), (R.RPC_REDUCE, False), (R.RPC_HISTOGRAM, False),
                                (R.RPC_HISTOGRAM, False), (R.RPC_SORT, False), (R.RPC_SORT, False),
                                (R.RPC_REDUCE, False), (R.RPC_SCAN, False)]
        assert len(srv.headers) == 8  # (the stand-in's methods, called by FakeNative)
        native.calls.clear()
        bins = (gpuscan.client.NATIVE_RESPONSE_BYTES // 16)  # counts and edges: 16 bytes a bin
        got = c.histogram(x, bins)  # through the C API too, with room for its response
        assert len(got.counts) == bins and native.calls == [(R.RPC_REDUCE, False)] * 2 + [(R.RPC_HISTOGRAM, False)]
        assert native.room >= 16 * bins
        native.calls.clear()
        c.histogram(x, 1000, range=(0, 1))  # 16 KB: fits
        c.sort(x, timeout=5)  # a timeout of its own: grpcio
        c.histogram(x, 3, range=(0, 1), timeout=5)
        assert native.calls == [(R.RPC_HISTOGRAM, False)] and len(srv.headers) == 8 + 3 + 3
        c._native = None


def test_c_api_header_calls(serve_servicer, fake):
    """The C API's gpuscan_header_call itself (where the library loads) against the stand-in: every
    RPC's request goes out with its device_memory and the final response comes back."""
    lib, why = gpuscan._native.library()
    if lib is None:
        pytest.skip(f"no C API: {why}")
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=True, timeout=30) as c:
        x = fake.array(64, "float32", at=4, room=80)
        srv.reduced = {pb.OPERATOR_MIN: -2.0, pb.OPERATOR_MAX: 6.0}
        try:
            got = c.histogram(x, 4)
        except gpuscan.Error as e:
            if "is none of GPUSCAN_RPC_" in str(e):
                pytest.skip(f"the C API at {gpuscan._native.library_path()} predates GPUSCAN_RPC_HISTOGRAM: {e}")
            raise
        assert got.counts.tolist() == [0, 1, 2, 3] and got.element_count == 64 and c.last_timing.total_us == 8
        h = srv.headers[-1]
        assert (h.bins, h.lo, h.hi, dm(h).offset, dm(h).bytes) == (4, -2.0, 6.0, 16, 256)
        k, v = c.sort(x, values=fake.array(64, "uint32"), descending=True)
        h = srv.headers[-1]
        assert h.output == pb.SORT_OUTPUT_KEYS_AND_VALUES and dm(h).values_output_handle and h.descending
        assert k.shape == v.shape == (64,) and c.last_timing.total_us == 9
        assert c.argsort(x).dtype == np.int64 and srv.headers[-1].output == pb.SORT_OUTPUT_INDICES
        assert c.reduce(x) == 42 and c.scan(x) is not None


def test_c_api_segmented_scan_header_call(serve_servicer, fake):
    """The C API's gpuscan_header_call with GPUSCAN_RPC_SEGMENTED_SCAN (where the library loads)."""
    lib, why = gpuscan._native.library()
    if lib is None:
        pytest.skip(f"no C API: {why}")
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=True, timeout=30) as c:
        x, keys = fake.array(64, "uint32", at=4, room=80), fake.array(64, "uint64", at=1, room=65)
        try:
            y = c.segmented_scan(x, keys, op="bit_xor")
        except gpuscan.Error as e:
            if "is none of GPUSCAN_RPC_" in str(e):
                pytest.skip(f"the C API at {gpuscan._native.library_path()} predates GPUSCAN_RPC_SEGMENTED_SCAN: {e}")
            raise
        h = srv.headers[-1]
        assert isinstance(h, pb.SegmentedScanHeader) and h.key_dtype == pb.DTYPE_UINT64 and h.op == pb.OPERATOR_BIT_XOR
        assert (dm(h).offset, dm(h).bytes, dm(h).keys_handle, dm(h).keys_offset) == (16, 256, handle_of(2), 8)
        assert y.shape == (64,) and y.dtype == np.uint32 and c.last_timing.total_us == 11
        assert c.segmented_scan(x, heads=fake.array(64, "uint8"), out=x) is x and not dm(srv.headers[-1]).output_handle


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


def same_device_uuid(cp, ordinal: int, device_uuid: bytes) -> bool:
    """device_uuid is CuPy's UUID of device `ordinal` (CuPy's bytes stop at the first zero byte)."""
    u = cp.cuda.runtime.getDeviceProperties(ordinal)["uuid"]
    return len(device_uuid) == _device.UUID_BYTES and device_uuid.startswith(u if isinstance(u, bytes) else bytes(u))


_CHILD_READS = """
import sys, cupy
handle, offset, n = bytes.fromhex(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
base = cupy.cuda.runtime.ipcOpenMemHandle(handle)
mem = cupy.cuda.UnownedMemory(base + offset, n * 4, None)
print(int(cupy.ndarray((n,), cupy.int32, cupy.cuda.MemoryPointer(mem, 0)).astype(cupy.int64).sum()))
"""


def child_sum(e: _device.Exported, n: int) -> int:
    """The int32 sum of n elements at e's handle and offset, as another process reads them."""
    r = subprocess.run([sys.executable, "-c", _CHILD_READS, e.handle.hex(), str(e.offset), str(n)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def test_driver_on_real_allocations(cp, rng):
    drv = _device.driver()
    big = cp.asarray(rng.integers(-1000, 1000, 20_000, dtype=np.int32))
    x = big[1000:3000]
    at = drv.locate(x.data.ptr, "x")
    assert at.ordinal == big.device.id and same_device_uuid(cp, at.ordinal, at.device_uuid)
    assert drv.locate(big.data.ptr, "big").allocation == at.allocation
    eb, ex = drv.export(big.data.ptr, big.nbytes, "big", at), drv.export(x.data.ptr, x.nbytes, "x", at)
    assert len(ex.handle) == _device.HANDLE_BYTES and ex.handle == eb.handle and ex.offset == eb.offset + 4000
    assert child_sum(ex, 2000) == int(cp.asnumpy(x).astype(np.int64).sum())
    with pytest.raises(ValueError, match="extends past its"):
        drv.export(x.data.ptr, 1 << 40, "x", at)
    drv.synchronize(at.ordinal, 1)
    drv.synchronize(at.ordinal, _device.ALL_STREAMS)

    # memory freed and allocated again (often at the same address): another allocation, its own handle
    raw = cp.cuda.runtime.malloc(1 << 20)
    first = drv.locate(raw, "raw")
    drv.export(raw, 4, "raw", first)
    cp.cuda.runtime.free(raw)
    again = cp.cuda.runtime.malloc(1 << 20)
    try:
        second = drv.locate(again, "again")
        assert second.allocation != first.allocation
        cp.cuda.runtime.memset(again, 1, 16)  # four int32 of 0x01010101
        assert child_sum(drv.export(again, 16, "again", second), 4) == 4 * 0x01010101
    finally:
        cp.cuda.runtime.free(again)

    # from a thread with no current context: pointer attributes need none; a stream's wait (and a
    # handle not taken yet) runs in the device's primary context, pushed for it
    seen = []

    def in_thread():
        where = drv.locate(x.data.ptr, "x")
        drv.synchronize(where.ordinal, 1)
        seen.append((where, drv.export(x.data.ptr, 8, "x", where)))
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert seen == [(at, ex)]

    managed = cp.cuda.malloc_managed(1 << 12)
    with pytest.raises(ValueError, match="managed memory"):
        drv.locate(managed.ptr, "m")
    pinned = cp.cuda.alloc_pinned_memory(1 << 12)
    with pytest.raises(ValueError, match="pinned host memory"):
        drv.locate(pinned.ptr, "p")
    with pytest.raises(ValueError, match="no memory CUDA knows"):
        drv.locate(0x10, "bogus")


# -- a GPU, CuPy and a server that serves device memory
def start_server(binary, sock_dir, *, allow=True) -> LoggedProcess:
    sock = os.path.join(sock_dir, "allow.sock" if allow else "plain.sock")
    args = [binary, "--address", f"unix:{sock}", "--engine", "cuda", "--log-level", "info",
            *(["--allow-device-ipc"] if allow else [])]
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


SIZES = [0, 1, 4095, 4096, 4097, (1 << 20) + 3, (1 << 24) + 1]


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan(cp, dev, rng, dtype):
    for n in SIZES:
        for op in ("sum", "max"):
            for exclusive in (False, True):
                where = f"{dtype} {op} exclusive={exclusive} n={n}"
                x = ref.random_array(rng, dtype, n, op)
                xd, out = cp.asarray(x), cp.full(n, 7, dtype)
                assert dev.scan(xd, op=op, exclusive=exclusive, out=out) is out, where
                t = dev.last_timing
                assert t.engine == "cuda" and t.h2d_us == 0 and t.d2h_us == 0, (where, t)  # nothing crossed the host
                got = cp.asnumpy(out)
                assert same_bits(cp.asnumpy(xd), x), where  # the input is left as it was
                if dtype.kind == "f" and op == "sum":  # the server's float sums: the same bits on every path
                    assert same_bits(got.view(f"u{dtype.itemsize}"),
                                     dev.scan(x, op=op, exclusive=exclusive).view(f"u{dtype.itemsize}")), where
                    ref.assert_scan_close(got, ref.scan(x, op, exclusive), x, op)
                else:
                    assert same_bits(got, ref.scan(x, op, exclusive)), where
                assert dev.scan(xd, op=op, exclusive=exclusive, out=xd) is xd, where  # in place
                assert same_bits(cp.asnumpy(xd), got), where
        y = dev.scan(cp.asarray(ref.random_array(rng, dtype, n)))  # no out=: a new CuPy array
        assert isinstance(y, cp.ndarray) and y.shape == (n,) and y.dtype == dtype


def test_reduce(cp, dev, rng):
    for dtype in ref.DTYPES:
        for n in (0, 1, 4097, (1 << 20) + 3):
            for op in ("sum", "min", "max"):
                x = ref.random_array(rng, dtype, n, op)
                got = dev.reduce(cp.asarray(x), op=op)
                where = (str(dtype), n, op, got)
                assert type(got) is dtype.type, where
                if dtype.kind == "f" and op == "sum":
                    assert got.tobytes() == dev.reduce(x, op=op).tobytes(), where
                else:
                    assert got.tobytes() == ref.reduce(x, op).tobytes(), where


def test_compact(cp, dev, rng):
    for dtype in ref.DTYPES:
        for n in (0, 1, 4097, (1 << 20) + 3):
            x = ref.random_array(rng, dtype, n)
            xd, mask = cp.asarray(x), rng.random(n) < 0.4
            where = f"{dtype} n={n}"
            v, i = dev.compact(xd, where=cp.asarray(mask), indices=True)
            assert isinstance(v, cp.ndarray) and isinstance(i, cp.ndarray), where
            assert same_bits(cp.asnumpy(v), x[mask]) and same_bits(cp.asnumpy(i), np.flatnonzero(mask)), where
            byte_flags = rng.integers(0, 4, n, dtype=np.uint8)  # any nonzero byte keeps
            i = dev.compact(xd, where=cp.asarray(byte_flags), values=False, indices=True)
            assert same_bits(cp.asnumpy(i), np.flatnonzero(byte_flags)), where
            v = dev.compact(xd, predicate=("gt", 0))
            assert same_bits(cp.asnumpy(v), x[x > 0]), where
            lo, hi = (0, 1 << 31) if dtype.kind == "u" else (-1, 1)
            v, i = dev.compact(xd, predicate=("in_range", lo, hi), indices=True)
            keep = (x >= lo) & (x < hi)
            assert same_bits(cp.asnumpy(v), x[keep]) and same_bits(cp.asnumpy(i), np.flatnonzero(keep)), where


def test_offsets_inside_an_allocation(cp, dev, rng):
    n = (1 << 20) + 3
    whole = ref.random_array(rng, np.dtype(np.int32), n + 5000)
    big = cp.asarray(whole)
    x = big[1000:1000 + n]  # 4000 bytes into big's allocation
    out = cp.zeros(n + 10, np.int32)
    assert dev.scan(x, out=out[3:3 + n]) is not None
    assert same_bits(cp.asnumpy(out[3:3 + n]), ref.scan(whole[1000:1000 + n], "sum", False))
    assert not cp.asnumpy(out[:3]).any() and not cp.asnumpy(out[3 + n:]).any()  # nothing written outside
    assert dev.reduce(x, op="max") == whole[1000:1000 + n].max()
    flags = cp.asarray(rng.random(n + 77) < 0.5)
    v, i = dev.compact(x, where=flags[77:], indices=True)
    sel = cp.asnumpy(flags[77:])
    assert same_bits(cp.asnumpy(v), whole[1000:1000 + n][sel]) and same_bits(cp.asnumpy(i), np.flatnonzero(sel))
    dev.scan(x, op="min", out=x)  # in place on the slice: big outside it unchanged
    want = whole.copy()
    want[1000:1000 + n] = ref.scan(whole[1000:1000 + n], "min", False)
    assert same_bits(cp.asnumpy(big), want)


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


def inner_range(x):
    """A range that leaves some of x out on both sides (as test_histogram's)."""
    lo, hi = np.quantile(x.astype(np.float64), [0.2, 0.7])
    d = max(1.0, 1e5 * float(np.spacing(abs(lo))))
    return (float(lo), float(hi)) if lo < hi else (float(lo) - d, float(lo) + d)


def collapses(x) -> bool:
    """x's autodetected range stays one point in float64 widened by 0.5 (one value beyond 2^53)."""
    lo, hi = float(x.min()), float(x.max())
    return lo == hi and lo - 0.5 == hi + 0.5


def histogram_cases(rng, x):
    """(bins, range) pairs for x (finite): even bins over an inner range, one bin, the autodetected
    range (None), explicit edges (repeated, infinite)."""
    r = inner_range(x)
    q = np.quantile(x.astype(np.float64), [0.0, 0.1, 0.1, 0.5, 0.9, 1.0])
    return [(16, r), (1, r), (int(rng.integers(2, 300)), None), (q, None),
            (np.array([-np.inf, q[1], q[3], np.inf]), None), (np.array([q[2], q[2]]), (0.0, 1.0))]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_histogram(cp, dev, rng, dtype):
    """Every dtype at 1, 4097 and 2^20 + 3 elements against the same server's streamed path (bit
    for bit), and numpy.histogram's counts except for a float32 array's even bins (numpy's float32
    edge arithmetic: the streamed path's test_histogram checks those against numpy); floats again
    with NaN and +-inf (an autodetected range then fails, as numpy's)."""
    for n in (1, 4097, (1 << 20) + 3):
        x = ref.random_array(rng, dtype, n)
        passes = [x]
        if dtype.kind == "f":
            special = x.copy()
            at = rng.integers(0, n, max(n // 50, 1))
            special[at] = rng.choice(np.array([np.nan, np.inf, -np.inf], dtype), len(at))
            passes.append(special)
        cases = histogram_cases(rng, x)
        for xs in passes:
            xd = cp.asarray(xs)
            for bins, r in cases:
                where = f"{dtype} n={n} bins={bins} range={r} specials={xs is not x}"
                finite = dtype.kind != "f" or np.isfinite(xs).all()
                if r is None and np.ndim(bins) == 0 and not finite:
                    for arr in (xd, xs):  # NaN or inf in x.min()/x.max(), as numpy
                        with pytest.raises(ValueError, match="autodetected range"):
                            dev.histogram(arr, bins)
                    continue
                if r is None and np.ndim(bins) == 0 and collapses(xs):  # the server refuses lo >= hi, both paths
                    for arr in (xd, xs):
                        with pytest.raises(gpuscan.InvalidArgument, match=r"\blo\b"):
                            dev.histogram(arr, bins)
                    continue
                got = dev.histogram(xd, bins, range=r)
                assert dev.last_timing.engine == "cuda", (where, dev.last_timing)
                same_histogram(got, dev.histogram(xs, bins, range=r), where)
                if dtype != np.float32 or np.ndim(bins) != 0:
                    with np.errstate(invalid="ignore"):
                        counts, edges = np.histogram(xs, bins, r)
                    assert same_bits(got.counts, counts.astype(np.uint64)), where
                    np.testing.assert_array_equal(got.edges, edges.astype(np.float64), err_msg=where)
            assert same_bits(cp.asnumpy(xd), xs)  # read, never written
    m = ref.random_array(rng, dtype, 7000)
    for bins, r in ((10, (-1.0, 1.0)), (10, None)):  # any shape: all its elements, as numpy's
        same_histogram(dev.histogram(cp.asarray(m).reshape(7, 1000), bins, range=r), dev.histogram(m, bins, range=r))


NAN_PAYLOADS = {4: np.array([0x7FC00001, 0xFFC00002, 0x7FC00003], np.uint32),
                8: np.array([0x7FF8000000000001, 0xFFF8000000000002, 0x7FF8000000000003], np.uint64)}


def sort_keys(rng, dtype, n, distinct=None):
    """Random keys of dtype; `distinct`: drawn from that many values (many duplicates: stability
    shows); floats with NaN of both signs and several payloads, +-inf, +-0, subnormals, the
    extremes; integers with their extremes and 0."""
    if dtype.kind == "f":
        pool = (rng.standard_normal(max(distinct or n, 1)) * 100).astype(dtype)
        fi = np.finfo(dtype)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny / 4, -fi.tiny / 4, fi.max, fi.min, fi.tiny,
                            -fi.tiny], dtype)
        special[0] = -np.abs(special[0])  # -NaN: sign bit set
        pool = np.concatenate((pool, special, NAN_PAYLOADS[dtype.itemsize].view(dtype)))
    else:
        info = np.iinfo(dtype)
        pool = rng.integers(info.min, info.max, max(distinct or n, 1), dtype=dtype, endpoint=True)
        pool = np.concatenate((pool, np.array([info.min, info.max, 0], dtype)))
    return pool[rng.integers(0, len(pool), n)] if n else np.zeros(0, dtype)


SORT_SIZES = [0, 1, 2, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, (1 << 20) + 7]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_sort(cp, dev, rng, dtype):
    """sort, argsort and argsort(return_keys=True) of every dtype, ascending and descending, with
    and without many duplicates, against the same server's streamed path bit for bit (floats in
    total order: NaN of both signs and payloads, +-0, +-inf, subnormals); new CuPy arrays on x's
    device; x left as it was."""
    for n in SORT_SIZES:
        for distinct in (None, 7):
            x = sort_keys(rng, dtype, n, distinct)
            xd = cp.asarray(x)
            for descending in (False, True):
                where = f"{dtype} n={n} distinct={distinct} descending={descending}"
                got = dev.sort(xd, descending=descending)
                t = dev.last_timing
                assert t.engine == "cuda", (where, t)
                assert isinstance(got, cp.ndarray) and got.device.id == xd.device.id, where
                want = dev.sort(x, descending=descending)
                assert same_bits(cp.asnumpy(got), want), where
                idx = dev.argsort(xd, descending=descending)
                want_idx = dev.argsort(x, descending=descending)
                assert isinstance(idx, cp.ndarray) and same_bits(cp.asnumpy(idx), want_idx), where
                k, idx = dev.argsort(xd, descending=descending, return_keys=True)
                assert same_bits(cp.asnumpy(k), want) and same_bits(cp.asnumpy(idx), want_idx), where
                assert same_bits(cp.asnumpy(xd), x), where  # the input is left as it was


def test_sort_with_values(cp, dev, rng):
    """Keys of every dtype with values of another (and int64 positions: the permutation), inside
    larger allocations, against the streamed path bit for bit."""
    for i, key_dtype in enumerate(ref.DTYPES):
        value_dtype = ref.DTYPES[(i + 1) % len(ref.DTYPES)]
        for n in ((1 << 16) + 3, (1 << 20) + 7):
            x = sort_keys(rng, key_dtype, n, distinct=100)
            v = sort_keys(rng, value_dtype, n)
            big_keys, big_values = cp.asarray(np.concatenate([x, x[:1000]])), cp.asarray(np.concatenate([v[:77], v]))
            xd, vals = big_keys[:n], big_values[77:]  # the keys at their allocation's start, the values 77 in
            for descending in (False, True):
                where = f"keys {key_dtype} values {value_dtype} n={n} descending={descending}"
                k, sv = dev.sort(xd, values=vals, descending=descending)
                assert isinstance(sv, cp.ndarray) and sv.dtype == value_dtype and sv.shape == (n,), where
                wk, wv = dev.sort(x, values=v, descending=descending)
                assert same_bits(cp.asnumpy(k), wk) and same_bits(cp.asnumpy(sv), wv), where
                _, pos = dev.sort(xd, values=cp.arange(n, dtype=cp.int64), descending=descending)
                assert same_bits(cp.asnumpy(pos), cp.asnumpy(dev.argsort(xd, descending=descending))), where
            assert same_bits(cp.asnumpy(big_values[77:]), v) and same_bits(cp.asnumpy(big_keys[:n]), x)


def test_sort_and_histogram_server_errors(cp, dev, rng, request):
    """The server's own checks of a device sort's and histogram's DeviceMemory, past the client's:
    requests made by hand on an allocation of 2 MiB holding 1024 int32 keys at offset 0."""
    drv = _device.driver()
    size = 2 << 20
    raw = cp.cuda.runtime.malloc(size)
    request.addfinalizer(lambda: cp.cuda.runtime.free(raw))
    at = drv.locate(raw, "raw")
    e = drv.export(raw, size, "raw", at)
    H = e.handle
    keys = raw_array(cp, raw, 1024, np.int32)
    x = rng.integers(-50, 50, 1024, dtype=np.int32)

    def memory(**fields):
        m = dict(device_uuid=at.device_uuid, handle=H, offset=0, bytes=4096)
        m.update(fields)
        return pb.DeviceMemory(**m)

    def sort_call(output, values_dtype=pb.DTYPE_UNSPECIFIED, **fields):
        req = pb.SortRequest(header=pb.SortHeader(dtype=pb.DTYPE_INT32, output=output, values_dtype=values_dtype,
                                                  device_memory=memory(**fields)))
        with grpc.insecure_channel(dev.target) as ch:
            try:
                responses = list(pb_grpc.GpuScanStub(ch).Sort(iter([req]), timeout=60))
            except grpc.RpcError as err:
                return err.code(), err.details()
        assert responses[-1].element_count == 1024 and responses[-1].HasField("timing"), responses
        assert not any(r.keys or r.values or r.indices for r in responses), responses  # nothing streamed back
        return grpc.StatusCode.OK, ""

    def histogram_call(data=b"", **fields):
        req = pb.HistogramRequest(header=pb.HistogramHeader(dtype=pb.DTYPE_INT32, bins=4, lo=-50.0, hi=50.0,
                                                            device_memory=memory(**fields)), data=data)
        with grpc.insecure_channel(dev.target) as ch:
            try:
                r = pb_grpc.GpuScanStub(ch).Histogram(iter([req]), timeout=60)
            except grpc.RpcError as err:
                return err.code(), err.details()
        assert r.element_count == 1024 and sum(np.frombuffer(r.counts, "<u8")) == 1024, r
        return grpc.StatusCode.OK, ""

    KEYS, KV, IDX, KI = (pb.SORT_OUTPUT_KEYS, pb.SORT_OUTPUT_KEYS_AND_VALUES, pb.SORT_OUTPUT_INDICES,
                         pb.SORT_OUTPUT_KEYS_AND_INDICES)
    out, ind, val, vout = (dict(output_handle=H, output_offset=8192), dict(indices_handle=H, indices_offset=16384),
                           dict(values_handle=H, values_offset=32768), dict(values_output_handle=H,
                                                                            values_output_offset=40960))
    invalid = [  # (the call's arguments, the field the error names): a required output missing, one set that
        ((KEYS,), {}, "output_handle"),  # must stay unset
        ((IDX,), {}, "indices_handle"),
        ((KI,), out, "indices_handle"),
        ((KI,), ind, "output_handle"),
        ((IDX,), {**ind, **out}, "output_handle"),
        ((KEYS,), {**out, **ind}, "indices_handle"),
        ((KV, pb.DTYPE_INT32), {**out, **vout}, "values_handle"),
        ((KV, pb.DTYPE_INT32), {**out, **val}, "values_output_handle"),
        ((KEYS,), {**out, **val}, "values_handle"),
        ((KEYS,), {**out, **vout}, "values_output_handle"),
        ((KEYS,), {**out, "flags_handle": H, "flags_offset": 49152}, "flags_handle"),
    ]
    for args, fields, name in invalid:
        code, details = sort_call(*args, **fields)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and name in details, (args, fields, code, details)
    for fields in (dict(output_handle=H, output_offset=2048), {**out, "indices_handle": H, "indices_offset": 1024}):
        code, details = sort_call(KI, **{**out, **ind, **fields})  # overlapping the keys (not the same range)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "overlap" in details, (fields, code, details)
    code, details = sort_call(KI, **out, indices_handle=H, indices_offset=size - 4096)  # 8192 bytes of int64
    assert code == grpc.StatusCode.OUT_OF_RANGE and "indices" in details, details

    keys[:] = cp.asarray(x)
    code, details = sort_call(KEYS, output_handle=H, output_offset=0)  # in place: the same range
    assert code == grpc.StatusCode.OK, details
    assert same_bits(cp.asnumpy(keys), np.sort(x, kind="stable"))
    keys[:] = cp.asarray(x)
    code, details = sort_call(KV, pb.DTYPE_INT32, output_handle=H, output_offset=0, values_handle=H,
                              values_offset=32768, values_output_handle=H, values_output_offset=40960)
    assert code == grpc.StatusCode.OK, details
    pos = raw_array(cp, raw + 32768, 1024, np.int32)
    pos[:] = cp.arange(1024, dtype=cp.int32)
    keys[:] = cp.asarray(x)
    assert sort_call(KV, pb.DTYPE_INT32, **out, **val, **vout)[0] == grpc.StatusCode.OK
    assert same_bits(cp.asnumpy(raw_array(cp, raw + 40960, 1024, np.int32)),
                     np.argsort(x, kind="stable").astype(np.int32))

    assert histogram_call() == (grpc.StatusCode.OK, "")
    for fields in (out, ind, val, vout, dict(flags_handle=H, flags_offset=49152)):
        code, details = histogram_call(**fields)  # a histogram writes nothing
        name = next(k for k in fields if k.endswith("_handle"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and name in details, (fields, code, details)
    code, details = histogram_call(data=bytes(16))  # the header alone
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    code, details = histogram_call(offset=size - 2048)
    assert code == grpc.StatusCode.OUT_OF_RANGE, details
    assert dev.histogram(keys, 4, range=(-50.0, 50.0)).counts.sum() == 1024  # the server serves on


def test_freed_allocation_after_its_handle_was_used(cp, dev, rng):
    """An allocation freed and another made at its place while the server still holds the first's
    handle open (its idle time): the new one has its own handle, and the server reads the new
    memory. Small allocations share the driver's 2 MiB regions: a new one of another size at a freed
    one's place overlaps the range the server still maps (cuIpcOpenMemHandle: ALREADY_MAPPED unless
    the server closes its idle handles and opens again); one of the same size has the same handle."""
    keep = cp.cuda.runtime.malloc(4096)  # a live neighbour: the region stays, freed places come back
    try:
        for first, second in ((100_352, 400_384), (400_384, 100_352), (400_384, 400_384), (8 << 20, 16 << 20)):
            where = f"{first} then {second} bytes"
            for nbytes in (first, second):
                n = nbytes // 8
                x = ref.random_array(rng, np.dtype(np.int64), n)
                ptr = cp.cuda.runtime.malloc(nbytes)
                try:
                    a = raw_array(cp, ptr, n, np.int64)
                    a[:] = cp.asarray(x)
                    assert dev.reduce(a) == ref.reduce(x, "sum"), where
                    assert dev.scan(a, out=a) is a and same_bits(cp.asnumpy(a), ref.scan(x, "sum", False)), where
                    del a
                finally:
                    cp.cuda.runtime.free(ptr)
    finally:
        cp.cuda.runtime.free(keep)
    pool = cp.get_default_memory_pool()  # the same through CuPy's pool, given back to the driver each time
    for n in (1 << 20, 12_544, 50_048, 1 << 20):
        x = ref.random_array(rng, np.dtype(np.int64), n)
        a, out = cp.asarray(x), cp.empty(n, np.int64)
        dev.scan(a, out=out)
        assert same_bits(cp.asnumpy(out), ref.scan(x, "sum", False)), n
        assert dev.reduce(a) == ref.reduce(x, "sum"), n
        del a, out
        pool.free_all_blocks()


def test_server_errors(cp, dev, server_binary, sock_dir, rng, request):
    x = cp.asarray(ref.random_array(rng, np.dtype(np.int32), 1000))
    with pytest.raises(ValueError, match="1000 int32 elements like x, got 999"):
        dev.scan(x, out=cp.empty(999, np.int32))  # an output too small: refused here
    with pytest.raises(ValueError, match="not C-contiguous"):
        dev.scan(x[::2])
    with pytest.raises(TypeError, match="reduce_by_key takes host arrays"):
        dev.reduce_by_key(x, x)
    # The server's own checks, past the client's: requests made by hand, on an allocation of 2 MiB.
    drv = _device.driver()
    size = 2 << 20
    raw = cp.cuda.runtime.malloc(size)
    request.addfinalizer(lambda: cp.cuda.runtime.free(raw))
    at = drv.locate(raw, "raw")
    device_uuid, e = at.device_uuid, drv.export(raw, size, "raw", at)

    def scan_request(**fields):
        m = dict(device_uuid=device_uuid, handle=e.handle, offset=0, bytes=4096)
        m.update(fields)
        return pb.ScanRequest(header=pb.ScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM,
                                                   device_memory=pb.DeviceMemory(**m)))

    def code_of(target, request):
        with grpc.insecure_channel(target) as ch:
            try:
                list(pb_grpc.GpuScanStub(ch).Scan(iter([request]), timeout=60))
            except grpc.RpcError as err:
                return err.code(), err.details()
        return grpc.StatusCode.OK, ""

    code, details = code_of(dev.target, scan_request(output_handle=e.handle, output_offset=size - 2048))
    assert code == grpc.StatusCode.OUT_OF_RANGE and "output_offset" in details, details  # an output too small
    code, details = code_of(dev.target, scan_request(offset=size - 2048))
    assert code == grpc.StatusCode.OUT_OF_RANGE, details
    code, details = code_of(dev.target, scan_request(output_handle=e.handle, output_offset=1024))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "overlaps" in details, details
    code, details = code_of(dev.target, scan_request(device_uuid=bytes(16)))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "device_uuid" in details, details
    code, details = code_of(dev.target, scan_request(handle=b"\x01" * 64))
    assert code == grpc.StatusCode.FAILED_PRECONDITION, details
    assert dev.reduce(x) == ref.reduce(cp.asnumpy(x), "sum")  # the server serves on
    with start_server(server_binary, sock_dir, allow=False) as plain:
        with gpuscan.Client(plain.target, timeout=60) as c:
            for call in (lambda: c.scan(x), lambda: c.histogram(x, 4), lambda: c.argsort(x)):
                with pytest.raises(gpuscan.FailedPrecondition, match="without --allow-device-ipc"):
                    call()
        code, details = code_of(plain.target, scan_request())
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "--allow-device-ipc" in details, details


def test_torch_tensors(cp, dev, rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    x = ref.random_array(rng, np.dtype(np.float32), 5000)
    t = torch.from_numpy(x).cuda() * 2  # queued on PyTorch's stream: its interface (v2) names none
    y = dev.scan(t)
    assert isinstance(y, torch.Tensor) and y.device == t.device and y.dtype == torch.float32
    assert same_bits(y.cpu().numpy(), dev.scan(x * 2))
    v, i = dev.compact(t, where=t > 0, indices=True)
    assert same_bits(v.cpu().numpy(), (x * 2)[x > 0]) and same_bits(i.cpu().numpy(), np.flatnonzero(x > 0))
    same_histogram(dev.histogram(t, 10), dev.histogram(x * 2, 10))  # its range from the device
    k, i = dev.argsort(t, descending=True, return_keys=True)
    assert isinstance(k, torch.Tensor) and i.dtype == torch.int64 and i.device == t.device
    assert same_bits(k.cpu().numpy(), dev.sort(x * 2, descending=True))
    assert same_bits(i.cpu().numpy(), dev.argsort(x * 2, descending=True))
    k, sv = dev.sort(t, values=torch.arange(5000, device=t.device, dtype=torch.int32))
    assert same_bits(sv.cpu().numpy(), dev.argsort(x * 2).astype(np.int32))


def test_async_client(cp, dev, rng):
    x = ref.random_array(rng, np.dtype(np.uint32), 3000)

    async def main():
        async with gpuscan.AsyncClient(dev.target, timeout=60) as c:
            xd = cp.asarray(x)
            y = await c.scan(xd, exclusive=True)
            assert same_bits(cp.asnumpy(y), ref.scan(x, "sum", True))
            assert await c.reduce(xd, op="max") == x.max()
            v = await c.compact(xd, predicate=("lt", 1000))
            assert same_bits(cp.asnumpy(v), x[x < 1000])
            same_histogram(await c.histogram(xd, 7), dev.histogram(x, 7))
            same_histogram(await c.histogram(xd, [0.0, 1e9, 4e9]), dev.histogram(x, [0.0, 1e9, 4e9]))
            k, sv = await c.sort(xd, values=xd.copy(), descending=True)
            assert same_bits(cp.asnumpy(k), dev.sort(x, descending=True)) and same_bits(cp.asnumpy(sv), cp.asnumpy(k))
            assert same_bits(cp.asnumpy(await c.argsort(xd)), dev.argsort(x))
    asyncio.run(main())


SEGMENTED_SIZES = [1, 4097, (1 << 20) + 3]


def segment_cases(rng, n):
    """(name, host segments, as keys= or heads=): int32 and int64 keys (runs of ~100 equal keys,
    and keys that change at every element at the start), head bytes."""
    runs = np.cumsum(rng.random(n) < 0.01)
    runs[: min(n, 50)] = np.arange(min(n, 50)) + 10**6  # singletons at the start
    k32 = (runs * 7 - 3).astype(np.int32)
    k64 = (runs.astype(np.int64) << 33) - 5  # differ above the low 32 bits only
    heads = (rng.random(n) < 0.02).astype(np.uint8) * rng.integers(1, 256, n, dtype=np.uint8)
    return [("int32 keys", "keys", k32), ("int64 keys", "keys", k64), ("heads", "heads", heads)]


def test_segmented_scan(cp, dev, rng):
    """Exact operators on the device against the same server's streamed path, bit for bit."""
    for n in SEGMENTED_SIZES:
        cases = segment_cases(rng, n)
        for dtype in (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32)):
            for op in ("sum", "max", "bit_xor"):
                x = ref.random_array(rng, dtype, n, op)
                xd = cp.asarray(x)
                for name, kw, segs in cases:
                    segs_d = cp.asarray(segs)
                    for exclusive in (False, True):
                        where = f"{dtype} {op} {name} exclusive={exclusive} n={n}"
                        want = dev.segmented_scan(x, **{kw: segs}, op=op, exclusive=exclusive)
                        out = cp.full(n, 7, dtype)
                        assert dev.segmented_scan(xd, **{kw: segs_d}, op=op, exclusive=exclusive, out=out) is out, where
                        t = dev.last_timing
                        assert t.h2d_us == 0 and t.d2h_us == 0, (where, t)  # nothing crossed the host
                        assert same_bits(cp.asnumpy(out), want), where
                        assert same_bits(cp.asnumpy(xd), x) and same_bits(cp.asnumpy(segs_d), segs), where
                y = dev.segmented_scan(xd, heads=cp.asarray(cases[2][2]), op=op)  # no out=: a new CuPy array
                assert isinstance(y, cp.ndarray) and y.dtype == dtype
                assert same_bits(cp.asnumpy(y), dev.segmented_scan(x, heads=cases[2][2], op=op)), (dtype, op, n)
                # in place
                name, kw, segs = cases[0]
                assert dev.segmented_scan(xd, **{kw: cp.asarray(segs)}, op=op, exclusive=True, out=xd) is xd
                assert same_bits(cp.asnumpy(xd), dev.segmented_scan(x, **{kw: segs}, op=op, exclusive=True)), \
                    (dtype, op, n, "in place")


def test_segmented_scan_more(cp, dev, rng):
    """uint32/uint64 keys, bool heads, x as its own keys; float min/max served (bit for bit
    against the streamed path); offsets inside an allocation; the async client."""
    n = 10_000
    x = ref.random_array(rng, np.dtype(np.int64), n)
    runs = np.cumsum(rng.random(n) < 0.05)
    for keys in (runs.astype(np.uint32), runs.astype(np.uint64)):
        got = dev.segmented_scan(cp.asarray(x), cp.asarray(keys), op="max")
        assert same_bits(cp.asnumpy(got), dev.segmented_scan(x, keys, op="max")), keys.dtype
    heads = rng.random(n) < 0.03
    got = dev.segmented_scan(cp.asarray(x), heads=cp.asarray(heads), exclusive=True)
    assert same_bits(cp.asnumpy(got), dev.segmented_scan(x, heads=heads, exclusive=True))
    k = (x >> 60).astype(np.int64)  # runs of equal top bits
    xk = cp.asarray(k)
    assert dev.segmented_scan(xk, xk, out=xk) is xk  # its own keys, in place
    assert same_bits(cp.asnumpy(xk), dev.segmented_scan(k, k))
    for dtype in (np.float32, np.float64):
        f = ref.random_array(rng, np.dtype(dtype), n)
        for op in ("min", "max"):
            got = dev.segmented_scan(cp.asarray(f), heads=cp.asarray(heads), op=op, exclusive=True)
            assert same_bits(cp.asnumpy(got), dev.segmented_scan(f, heads=heads, op=op, exclusive=True)), (dtype, op)
    big = cp.asarray(ref.random_array(rng, np.dtype(np.uint32), 3 * n))
    keys_big = cp.asarray(np.repeat(np.arange(3 * n // 100 + 1, dtype=np.int32), 100)[: 3 * n])
    out_big = cp.zeros(3 * n, np.uint32)
    dev.segmented_scan(big[n:2 * n], keys_big[7:n + 7], out=out_big[5:n + 5], op="bit_xor")
    want = dev.segmented_scan(cp.asnumpy(big[n:2 * n]), cp.asnumpy(keys_big[7:n + 7]), op="bit_xor")
    assert same_bits(cp.asnumpy(out_big[5:n + 5]), want) and not cp.asnumpy(out_big[:5]).any()

    async def main():
        async with gpuscan.AsyncClient(dev.target, timeout=60) as c:
            y = await c.segmented_scan(cp.asarray(x), cp.asarray(runs.astype(np.int32)), op="bit_xor")
            assert same_bits(cp.asnumpy(y), dev.segmented_scan(x, runs.astype(np.int32), op="bit_xor"))
            with pytest.raises(gpuscan.Unimplemented, match="not served yet"):
                await c.segmented_scan(cp.asarray(x.astype(np.float32)), heads=cp.asarray(heads))
    asyncio.run(main())


def test_segmented_scan_float_sums(cp, dev, rng, request):
    """A float sum or product segmented on device memory: gpuscan.Unimplemented from the client,
    naming the host path (which serves it); a raw request: the server's own UNIMPLEMENTED."""
    n = 5000
    x = ref.random_array(rng, np.dtype(np.float32), n)
    heads = rng.random(n) < 0.1
    for op in ("sum", "product"):
        with pytest.raises(gpuscan.Unimplemented, match=f"float32 {op} segmented scan of device memory is not "
                                                        "served yet.*the host path serves them"):
            dev.segmented_scan(cp.asarray(x), heads=cp.asarray(heads), op=op)
    assert dev.segmented_scan(x, heads=heads).dtype == np.float32  # the host path serves it
    drv = _device.driver()
    raw = cp.cuda.runtime.malloc(2 * n * 4)
    request.addfinalizer(lambda: cp.cuda.runtime.free(raw))
    at = drv.locate(raw, "raw")
    e = drv.export(raw, 2 * n * 4, "raw", at)
    for dtype, op, size in ((pb.DTYPE_FLOAT32, pb.OPERATOR_SUM, 4), (pb.DTYPE_FLOAT64, pb.OPERATOR_PRODUCT, 8)):
        req = pb.SegmentedScanRequest(header=pb.SegmentedScanHeader(
            dtype=dtype, op=op, heads=True, element_count=4 * n // size,
            device_memory=pb.DeviceMemory(device_uuid=at.device_uuid, handle=e.handle, offset=0, bytes=4 * n,
                                          keys_handle=e.handle, keys_offset=4 * n)))
        with grpc.insecure_channel(dev.target) as ch:
            with pytest.raises(grpc.RpcError) as err:
                list(pb_grpc.GpuScanStub(ch).SegmentedScan(iter([req]), timeout=60))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, err.value.details()
