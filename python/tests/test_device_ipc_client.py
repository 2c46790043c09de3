"""Device memory across operations (see device_ipc.py): the client's checks before any call (the
interface's checks; host and CUDA arrays mixed; the operations with no device path; a server that
does not serve device memory, the session's: FailedPrecondition before any driver call; the
device and stream checks; the DeviceMemory fields); against a stand-in server and driver: an
empty array, the async client's requests, which calls go through the C API and, where the library
loads, the C API's header calls themselves. On a GPU with a server that serves device memory:
PyTorch tensors and the async client.
"""
import asyncio
import math
import re

import numpy as np
import pytest

import gpuscan
from gpuscan import _device
from gpuscan.v1 import gpuscan_pb2 as pb

import reference as ref
from device_ipc import NOWHERE, OTHER_UUID, FakeArray, FakeNative, StandIn, dm, handle_of, same_bits, same_histogram
from device_ipc import cp, dev, fake, no_driver, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


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


def test_device_memory_fields_are_a_handle_and_an_offset_each():
    """Each array a call names is <field>_handle (bytes) and <field>_offset (uint64) in DeviceMemory:
    what Call.export sets by name."""
    names = {f.name: f.type for f in pb.DeviceMemory.DESCRIPTOR.fields}
    for field in _device._FIELD_WORDS:
        assert names[f"{field}_handle"] == names["handle"] and names[f"{field}_offset"] == names["offset"], field


# -- everywhere: requests and results against a stand-in server and driver
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


def test_which_calls_take_the_c_api(serve_servicer, fake):
    """With the C API loaded, a device call goes through its gpuscan_header_call (on the caller's
    thread: not interruptible) with the RPC's number: the histogram's reductions too, and a call
    with a timeout of its own (its deadline with it); each with room for its response."""
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
        native.timeouts.clear()
        c.histogram(x, 1000, range=(0, 1))  # 16 KB: fits
        c.sort(x, timeout=5)  # a timeout of its own: through the C API with it
        c.histogram(x, 3, range=(0, 1), timeout=0)  # none
        assert native.calls == [(R.RPC_HISTOGRAM, False), (R.RPC_SORT, False), (R.RPC_HISTOGRAM, False)]
        assert native.timeouts == [30, 5, None] and len(srv.headers) == 8 + 3 + 3
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


# -- a GPU, CuPy and a server that serves device memory
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
