"""Device memory (header field 22): scan, reduce and compact of CUDA arrays (__cuda_array_interface__),
which the server reads and writes where they lie through CUDA IPC handles (gpuscan._device).

Three parts:
- everywhere (no GPU, no CuPy): objects that expose the interface over made-up pointers. The
  interface's checks; host and CUDA arrays mixed; the operations with no device path; a server
  that does not serve device memory (the session's: FailedPrecondition before any driver call);
  and the client's requests and results against a stand-in server with a stand-in driver (the
  handles and offsets it sends, in place, compact's outputs, the device check, the streams waited
  for, an empty array).
- a GPU and CuPy, no server: the driver (gpuscan._device.Driver) on real allocations: the device's
  UUID, offsets and handles per allocation, memory it refuses, a child process that opens the
  handle and reads the array.
- a GPU, CuPy and a gpuscan-server that serves device memory ($GPUSCAN_SERVER or the build's, started
  here with the cuda engine and --allow-device-ipc on a unix socket): results against numpy on
  random data, floats bit for bit against the same server's streamed path; offsets inside a larger
  allocation; a server without --allow-device-ipc; outputs too small; an allocation freed and
  replaced after its handle was used; PyTorch tensors; the async client.
"""
import asyncio
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
    its final response alone, keeping the headers it got."""

    def __init__(self, devices=((0, "Stand-in GPU", UUID),), device_ipc=True):
        self.info = pb.ServerInfo(engine="cuda", limits=pb.Limits(device_ipc=device_ipc),
                                  devices=[pb.Device(ordinal=o, name=name, uuid=u) for o, name, u in devices])
        self.headers, self.info_calls, self.kept = [], 0, 0

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
        return pb.ReduceResponse(raw_value=np.array(42, dtype).tobytes(), element_count=h.element_count,
                                 timing=pb.Timing(total_us=7))

    def Compact(self, requests, context):
        h = self._header(requests)
        yield pb.CompactResponse(kept_count=self.kept, element_count=h.element_count, timing=pb.Timing(total_us=7))


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
        ]:
            with pytest.raises(TypeError, match=re.escape(words)):
                call()


def test_operations_without_a_device_path(client, no_driver):
    d, host = FakeArray(10), np.arange(10, dtype=np.int32)
    with pytest.raises(TypeError, match="scan_iter takes host arrays, and chunk is a CUDA array"):
        list(client.scan_iter([host, d]))  # refused as it comes, the call cancelled
    with gpuscan.Client(NOWHERE, native=False) as c:
        for name, call in [
            ("histogram", lambda: c.histogram(d, 4, range=(0, 1))),
            ("segmented_scan", lambda: c.segmented_scan(d, host)),
            ("segmented_scan", lambda: c.segmented_scan(host, d)),
            ("segmented_scan", lambda: c.segmented_scan(host, heads=FakeArray(10, "|b1"))),
            ("scan2d", lambda: c.scan2d(FakeArray((2, 5)))),
            ("reduce_by_key", lambda: c.reduce_by_key(d, host)),
            ("sort", lambda: c.sort(d)),
            ("sort", lambda: c.sort(host, values=d)),
            ("sort", lambda: c.argsort(d)),
        ]:
            with pytest.raises(TypeError, match=f"{name} takes host arrays.*serves scan, reduce and compact"):
                call()

    async def main():
        async with gpuscan.AsyncClient(client.target) as ac:
            with pytest.raises(TypeError, match="sort takes host arrays"):
                await ac.sort(d)
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
                 lambda: client.compact(FakeArray(10), where=FakeArray(10, "|b1"), indices=True)):
        with pytest.raises(gpuscan.FailedPrecondition, match=f"does not serve device memory: .*{why}"):
            call()
    assert client.reduce(np.arange(5, dtype=np.int32)) == 10

    async def main():
        async with gpuscan.AsyncClient(client.target) as ac:
            with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
                await ac.reduce(FakeArray(10))
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
        assert srv.headers == []
        fake.synchronized.clear()
        c.scan(fake.array(10, stream=7), out=fake.array(10, stream=None))  # None: nothing to wait for
        c.scan(fake.array(10, version=2), out=fake.array(10, stream=2))  # before v3: the whole device
        assert fake.synchronized[0] == 7 and sorted(fake.synchronized[1:]) == sorted([_device.ALL_STREAMS, 2])


def test_empty_arrays_name_no_memory(serve_servicer, fake):
    """An empty array has no memory to name (its pointer may be 0): its header goes without
    device_memory, a call of no elements, and the driver is not asked."""
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = FakeArray(0, "int64", ptr=0)
        y = c.scan(x)
        assert isinstance(y, FakeArray) and y.shape == (0,)
        assert c.reduce(x) == 42 and c.compact(x, predicate="nonzero").shape == (0,)
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
            assert srv.info_calls == 1
    asyncio.run(main())


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
    with pytest.raises(TypeError, match="sort takes host arrays"):
        dev.sort(x)
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
            with pytest.raises(gpuscan.FailedPrecondition, match="without --allow-device-ipc"):
                c.scan(x)
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
    asyncio.run(main())
