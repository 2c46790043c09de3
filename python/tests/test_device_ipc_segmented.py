"""Segmented scans of device memory (see device_ipc.py). Before any call: the arguments' checks
and a float sum's refusal. Against a stand-in server and driver: the keys or heads sent
(keys_handle/keys_offset), in place, the async client, malformed answers, the C API. On a GPU
with a server that serves device memory: exact operators (keys of int32/int64 and heads) against
the streamed path bit for bit, and a float sum's refusal (the client's, and the server's
UNIMPLEMENTED on a raw request).
"""
import asyncio

import grpc
import numpy as np
import pytest

import gpuscan
from gpuscan import _device
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

import reference as ref
from device_ipc import (NOWHERE, OTHER_UUID, UUID, FakeArray, FakeNative, Malformed, StandIn, dm, handle_of,
                        same_bits)
from device_ipc import cp, dev, fake, no_driver, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


# -- everywhere: the checks before any call
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


# -- everywhere: requests and results against a stand-in server and driver
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


@pytest.mark.parametrize("how, error, words", [
    ("data", gpuscan.Internal, "streamed scan data back"), ("count", gpuscan.Internal, "scan counted 11 elements"),
    ("no final", gpuscan.Internal, "without its final response"),
    ("unimplemented", gpuscan.Unimplemented, "not served on device memory")])
def test_malformed_segmented_scan_answers(serve_servicer, fake, how, error, words):
    """The server's answers checked; its UNIMPLEMENTED (a float sum the client did not refuse, had
    it one day been asked) is gpuscan.Unimplemented."""
    with gpuscan.Client(serve_servicer(Malformed(how)), native=False) as c:
        with pytest.raises(error, match=words):
            c.segmented_scan(fake.array(10), heads=fake.array(10, "uint8"))


def test_segmented_scan_takes_the_c_api(serve_servicer, fake):
    """With the C API loaded, a device segmented scan goes through gpuscan_header_call with
    GPUSCAN_RPC_SEGMENTED_SCAN (5), on the caller's thread; a timeout of its own goes with it."""
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
        c.segmented_scan(x, heads=fake.array(50, "bool"), timeout=5)  # a timeout of its own: with it
        assert len(native.calls) == 3 and native.timeouts == [30, 30, 5] and srv.headers[-1].heads
        c._native = None


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


# -- a GPU, CuPy and a server that serves device memory
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
