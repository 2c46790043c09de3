"""Resident arrays put from device memory (see device_ipc.py): c.put of a CUDA array sends its
header alone, naming the allocation by its IPC handle (PutArrayHeader.device_memory), and the
server copies it device to device. Everywhere: the checks before any call and the header against
a stand-in server and driver, the async client's too. On a GPU: CuPy arrays put and used where
they lie, bit for bit.
"""
import asyncio

import numpy as np
import pytest

import gpuscan
from gpuscan.v1 import gpuscan_pb2 as pb

from device_ipc import NOWHERE, FakeArray, StandIn, dm, handle_of, same_bits
from device_ipc import cp, dev, fake, no_driver, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


def test_put_checks_before_any_call(no_driver):
    with gpuscan.Client(NOWHERE, native=False) as c:
        with pytest.raises(ValueError, match=r"put takes a 1-D array, x has shape \(2, 5\)"):
            c.put(FakeArray((2, 5)))
        with pytest.raises(ValueError, match="not C-contiguous"):
            c.put(FakeArray(10, strides=(8,)))
        with pytest.raises(ValueError, match="float16, which is not served"):
            c.put(FakeArray(10, "<f2"))
        with pytest.raises(ValueError, match="label must be a str"):
            c.put(FakeArray(10), label=5)


def test_put_names_the_allocation_and_sends_no_data(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(30, "int64", at=2, room=40, stream=7)
        r = c.put(x, label="dev", ttl=60)
        h = srv.headers[-1]
        assert isinstance(h, pb.PutArrayHeader)
        assert (h.dtype, h.element_count, h.label, h.ttl_ms) == (pb.DTYPE_INT64, 30, "dev", 60000)
        assert (dm(h).handle, dm(h).offset, dm(h).bytes) == (handle_of(1), 16, 240)
        assert fake.synchronized == [7]  # x's stream, before the server reads it
        assert (r.size, r.dtype, r.label) == (30, np.dtype("int64"), "dev")
        empty = c.put(FakeArray(0, "float32", ptr=0))  # no memory to name: the header alone
        assert not srv.headers[-1].HasField("device_memory") and empty.size == 0


def test_put_needs_a_server_of_device_memory(serve_servicer, no_driver):
    srv = StandIn(device_ipc=False)
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        with pytest.raises(gpuscan.FailedPrecondition, match="does not serve device memory"):
            c.put(FakeArray(10))


def test_async_put(serve_servicer, fake):
    srv = StandIn()
    target = serve_servicer(srv)

    async def main():
        async with gpuscan.AsyncClient(target) as c:
            r = await c.put(fake.array(12, "float32"))
            assert r.size == 12 and dm(srv.headers[-1]).bytes == 48
    asyncio.run(main())


# -- a GPU, CuPy and a cuda server with --allow-device-ipc and --resident-bytes
def test_cupy_put_is_resident_bit_for_bit(cp, dev):
    rng = np.random.default_rng(56)
    for dtype in ("int32", "float32", "int64", "float64", "uint32", "uint64"):
        for n in (1, 1000, (1 << 20) + 3):
            host = (rng.standard_normal(n) * 1000).astype(dtype)
            x = cp.asarray(host)
            with dev.put(x[1:] if n > 1 else x) as r:  # an offset into the allocation too
                want = host[1:] if n > 1 else host
                assert same_bits(r.get(), want), (dtype, n)
                assert same_bits(dev.scan(r), dev.scan(want)), (dtype, n)
