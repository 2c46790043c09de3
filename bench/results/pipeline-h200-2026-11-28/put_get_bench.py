"""Put and Get through the caller's shared and device memory (issue 56: "Put and Get move data at
the data path's own speed: shared memory >= 35 GB/s, device memory >= 1 TB/s"): usage
put_get_bench.py TARGET SHM_DIR N OUT.json. A 4N-byte int32 array in a region under SHM_DIR
(an arena: registered on first use) and in CuPy device memory, put and got back by the generated
stubs (medians of 10), each checked bit for bit first; the streamed Put beside them. `*_put_ms`
times a Put and the DropArray after it (one grpcio unary call more, ~0.3 ms); `*_put_alone_ms`
the Put alone, its Drop untimed."""
import json
import os
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan import _cuda
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc


def med_ms(f, reps=10):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append((time.perf_counter() - s) * 1e3)
    return statistics.median(t)


def med_put_ms(put, drop, reps=10):
    """The Put alone: each array dropped after its time is taken."""
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        info = put()
        t.append((time.perf_counter() - s) * 1e3)
        drop(info)
    return statistics.median(t)


def main():
    target, shm_dir, n, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)]))
    x = np.random.default_rng(3).integers(-1 << 31, 1 << 31, n, dtype=np.int64).astype(np.int32)
    res = {"n": n, "bytes": x.nbytes}

    def put(**kw):
        return stub.PutArray(iter([pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=pb.DTYPE_INT32, **kw))]))

    def drop(info):
        stub.DropArray(pb.DropArrayRequest(id=info.id))

    # Shared memory: two regions (in and out) as arenas.
    names = ("gpuscan-bench-in", "gpuscan-bench-out")
    for name in names:
        with open(os.path.join(shm_dir, name), "wb") as f:
            f.truncate(x.nbytes)
    src = np.memmap(os.path.join(shm_dir, names[0]), dtype=np.int32, mode="r+", shape=(n,))
    dst = np.memmap(os.path.join(shm_dir, names[1]), dtype=np.int32, mode="r+", shape=(n,))
    src[:] = x
    shm_in = pb.SharedMemory(region=names[0], bytes=x.nbytes, arena=True)
    shm_out = pb.SharedMemory(region=names[1], bytes=x.nbytes, arena=True)
    info = put(shared_memory=shm_in)
    list(stub.GetArray(pb.GetArrayRequest(id=info.id, shared_memory=shm_out)))
    res["shm_correct"] = bool(np.array_equal(dst, x))
    res["shm_put_ms"] = med_ms(lambda: drop(put(shared_memory=shm_in)))
    res["shm_put_alone_ms"] = med_put_ms(lambda: put(shared_memory=shm_in), drop)
    res["shm_get_ms"] = med_ms(lambda: list(stub.GetArray(pb.GetArrayRequest(id=info.id, shared_memory=shm_out))))
    drop(info)

    # Device memory: CuPy arrays exported through CUDA IPC.
    try:
        import cupy as cp
        d_in = cp.asarray(x)
        d_out = cp.zeros_like(d_in)
        cp.cuda.runtime.deviceSynchronize()
        drv = _cuda.driver()
        def dm(a):
            at = drv.locate(a.data.ptr, "bench")
            e = drv.export(a.data.ptr, a.nbytes, "bench", at)
            return pb.DeviceMemory(device_uuid=at.device_uuid, handle=e.handle, offset=e.offset, bytes=a.nbytes)
        dm_in, dm_out = dm(d_in), dm(d_out)
        info = put(device_memory=dm_in)
        list(stub.GetArray(pb.GetArrayRequest(id=info.id, device_memory=dm_out)))
        res["device_correct"] = bool(cp.array_equal(d_out, d_in))
        res["device_put_ms"] = med_ms(lambda: drop(put(device_memory=dm_in)))
        res["device_put_alone_ms"] = med_put_ms(lambda: put(device_memory=dm_in), drop)
        res["device_get_ms"] = med_ms(lambda: list(stub.GetArray(pb.GetArrayRequest(id=info.id, device_memory=dm_out))))
        drop(info)
    except Exception as e:  # noqa: BLE001
        res["device_error"] = repr(e)

    chunk = 4 << 20
    b = x.tobytes()
    def streamed():
        reqs = [pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=pb.DTYPE_INT32, element_count=n))]
        reqs += [pb.PutArrayRequest(data=b[i:i + chunk]) for i in range(0, len(b), chunk)]
        drop(stub.PutArray(iter(reqs)))
    res["streamed_put_ms"] = med_ms(streamed, reps=3)
    for k in ("shm_put", "shm_put_alone", "shm_get", "device_put", "device_put_alone", "device_get", "streamed_put"):
        if k + "_ms" in res:
            res[k + "_GBps"] = x.nbytes / res[k + "_ms"] / 1e6
    for name in names:
        os.unlink(os.path.join(shm_dir, name))
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
