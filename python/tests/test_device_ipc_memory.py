"""Device memory itself (see device_ipc.py). A GPU and CuPy, no server: the driver
(gpuscan._device.Driver) on real allocations: the device's UUID, offsets and handles per
allocation, memory it refuses, a child process that opens the handle and reads the array. With a
server that serves device memory: an allocation freed and replaced after its handle was used; the
server's own checks of a scan's DeviceMemory (raw requests: outputs too small, overlapping, another
device, a bad handle); a server without --allow-device-ipc.
"""
import subprocess
import sys
import threading

import grpc
import numpy as np
import pytest

import gpuscan
from gpuscan import _device
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

import reference as ref
from device_ipc import raw_array, same_bits, start_server
from device_ipc import cp, dev, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


# -- a GPU and CuPy
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
