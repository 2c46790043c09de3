"""Resident arrays on one server (issue 56's targets), through the generated stubs alone, beside
CuPy in this process on the same GPU: usage resident_bench.py TARGET N OUT.json.
Times (median of REPS, wall clock in this process, TCP loopback): a scan of the resident array
with its result kept, a reduce of it, a 1K-element scan, Put and Get of the whole array, one
streamed scan of the same array; CuPy's cumsum and max of it in process. Checks the kept scan
and the reduce against numpy first."""
import json
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc

REPS = 30
CHUNK = 4 << 20


def median_ms(f, reps=REPS, after=None):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        r = f()
        times.append((time.perf_counter() - t) * 1e3)
        if after:
            after(r)
    return statistics.median(times), min(times)


def put(stub, x):
    def reqs():
        yield pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=pb.DTYPE_INT32, element_count=x.size, label="bench"))
        b = memoryview(x).cast("B")
        for i in range(0, len(b), CHUNK):
            yield pb.PutArrayRequest(data=bytes(b[i:i + CHUNK]))
    return stub.PutArray(reqs())


def get(stub, id_):
    return b"".join(r.data for r in stub.GetArray(pb.GetArrayRequest(id=id_)))


def main():
    target, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=opts))
    x = np.random.default_rng(1).integers(-1000, 1000, n, dtype=np.int32)
    res = {"n": n, "bytes": x.nbytes}

    t = time.perf_counter()
    info = put(stub, x)
    res["put_s"] = time.perf_counter() - t
    res["device"] = info.device
    keep = pb.ScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=info.id, keep=True))

    def scan_keep():
        return list(stub.Scan(iter([pb.ScanRequest(header=keep)])))[-1]

    def drop(final):
        stub.DropArray(pb.DropArrayRequest(id=final.array.id))

    # Correct first: the kept scan and the reduce against numpy.
    final = scan_keep()
    t = time.perf_counter()
    got = np.frombuffer(get(stub, final.array.id), dtype=np.int32)
    res["get_s"] = time.perf_counter() - t
    res["scan_correct"] = bool(np.array_equal(got, np.cumsum(x, dtype=np.int32)))
    drop(final)
    red = pb.ReduceHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_MAX, resident=pb.Resident(values=info.id))
    r = stub.Reduce(iter([pb.ReduceRequest(header=red)]))
    res["reduce_correct"] = r.value.int_value == int(x.max())

    kernel_us, total_us, stages = [], [], []
    def record(f):
        kernel_us.append(f.timing.kernel_us)
        total_us.append(f.timing.total_us)
        t = f.timing
        stages.append((t.receive_us, t.queue_us, t.h2d_us, t.kernel_us, t.d2h_us, t.send_us, t.total_us))
    def stage_medians(key):
        names = ("receive", "queue", "h2d", "kernel", "d2h", "send", "total")
        res[key] = {n: statistics.median(s[i] for s in stages) for i, n in enumerate(names)}
        stages.clear()
    res["scan_keep_ms"], res["scan_keep_min_ms"] = median_ms(scan_keep, after=lambda f: (record(f), drop(f)))
    res["scan_keep_kernel_us_median"] = statistics.median(kernel_us)
    res["scan_keep_server_us_median"] = statistics.median(total_us)
    stage_medians("scan_keep_stages_us")
    kernel_us.clear()
    total_us.clear()
    res["reduce_max_ms"], _ = median_ms(lambda: stub.Reduce(iter([pb.ReduceRequest(header=red)])), after=record)
    res["reduce_max_kernel_us_median"] = statistics.median(kernel_us)
    res["reduce_max_server_us_median"] = statistics.median(total_us)
    stage_medians("reduce_max_stages_us")

    small = put(stub, x[:1024].copy())
    small_scan = pb.ScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=small.id))
    total_us.clear()
    kernel_us.clear()
    res["scan_1k_resident_p50_ms"], _ = median_ms(lambda: list(stub.Scan(iter([pb.ScanRequest(header=small_scan)])))[-1],
                                                  reps=200, after=record)
    res["scan_1k_resident_server_us_p50"] = statistics.median(total_us)
    stage_medians("scan_1k_stages_us")
    # The same through a unary-style reduce (no request iterator thread in grpcio's stream call).
    small_red = pb.ReduceHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=small.id))
    res["reduce_1k_resident_p50_ms"], _ = median_ms(lambda: stub.Reduce(iter([pb.ReduceRequest(header=small_red)])),
                                                    reps=200)

    plain = pb.ScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM)
    def streamed():
        def reqs():
            yield pb.ScanRequest(header=plain)
            b = memoryview(x).cast("B")
            for i in range(0, len(b), CHUNK):
                yield pb.ScanRequest(data=bytes(b[i:i + CHUNK]))
        return sum(len(r.data) for r in stub.Scan(reqs()))
    t = time.perf_counter()
    streamed()
    res["streamed_scan_s"] = time.perf_counter() - t

    try:
        import cupy as cp
        d = cp.asarray(x)
        def timed(f):
            def run():
                f()
                cp.cuda.runtime.deviceSynchronize()
            run()
            return median_ms(run, reps=20)[0]
        res["cupy_cumsum_ms"] = timed(lambda: cp.cumsum(d))
        res["cupy_max_ms"] = timed(lambda: d.max())
        res["cupy_chain_ms"] = timed(lambda: cp.cumsum(d[d > 0]).max())
    except Exception as e:  # noqa: BLE001 - the run goes on without the peer
        res["cupy_error"] = repr(e)
    stub.DropArray(pb.DropArrayRequest(id=info.id))
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
