"""Every operation on a resident array (issue 56's second step), through the generated stubs
alone, beside CuPy in this process on the same GPU: usage resident_ops_bench.py TARGET N OUT.json.
Each operation on the resident N-element int32 array (median of REPS, wall clock here, TCP
loopback) with the server's total and kernel time, its results checked against numpy first;
the chain compact(GT 0) -> scan -> reduce(MAX) as three calls on kept arrays; CuPy's own
calls on the same data in process."""
import json
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc

REPS = 20
CHUNK = 4 << 20


def median_ms(f, reps=REPS, after=None):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        r = f()
        times.append((time.perf_counter() - t) * 1e3)
        if after:
            after(r)
    return statistics.median(times)


def put(stub, x, dtype):
    def reqs():
        yield pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=dtype, element_count=x.size, label="bench"))
        b = memoryview(x).cast("B")
        for i in range(0, len(b), CHUNK):
            yield pb.PutArrayRequest(data=bytes(b[i:i + CHUNK]))
    return stub.PutArray(reqs())


def get(stub, id_, dtype):
    return np.frombuffer(b"".join(r.data for r in stub.GetArray(pb.GetArrayRequest(id=id_))), dtype=dtype)


def drop(stub, *infos):
    for i in infos:
        if i.id:
            stub.DropArray(pb.DropArrayRequest(id=i.id))


def main():
    target, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=opts))
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    # Segment keys: runs of 1..64 equal keys.
    keys = np.cumsum(rng.integers(0, 64, n) == 0).astype(np.int32)
    res = {"n": n, "bytes": x.nbytes}
    xi = put(stub, x, pb.DTYPE_INT32)
    ki = put(stub, keys, pb.DTYPE_INT32)
    res["device"] = xi.device
    R = lambda **kw: pb.Resident(values=xi.id, **kw)  # noqa: E731
    gt0 = pb.Predicate(op=pb.PREDICATE_OP_GT, threshold=pb.Scalar(int_value=0))

    calls = {
        "compact_keep": (lambda: list(stub.Compact(iter([pb.CompactRequest(header=pb.CompactHeader(
            dtype=pb.DTYPE_INT32, predicate=gt0, resident=R(keep=True)))])))[-1],
            lambda f: (f.values_array,), lambda f: get(stub, f.values_array.id, np.int32), x[x > 0]),
        "histogram_256": (lambda: stub.Histogram(iter([pb.HistogramRequest(header=pb.HistogramHeader(
            dtype=pb.DTYPE_INT32, bins=256, lo=-1000, hi=1000, resident=R()))])),
            lambda f: (), lambda f: np.frombuffer(f.counts, dtype=np.uint64),
            np.histogram(x, bins=256, range=(-1000, 1000))[0].astype(np.uint64)),
        "sort_keep": (lambda: list(stub.Sort(iter([pb.SortRequest(header=pb.SortHeader(
            dtype=pb.DTYPE_INT32, resident=R(keep=True)))])))[-1],
            lambda f: (f.keys_array,), lambda f: get(stub, f.keys_array.id, np.int32), np.sort(x)),
        "segmented_scan_keep": (lambda: list(stub.SegmentedScan(iter([pb.SegmentedScanRequest(
            header=pb.SegmentedScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, key_dtype=pb.DTYPE_INT32,
                                          resident=pb.Resident(values=xi.id, keys=ki.id, keep=True)))])))[-1],
            lambda f: (f.array,), lambda f: get(stub, f.array.id, np.int32), None),
        "reduce_max": (lambda: stub.Reduce(iter([pb.ReduceRequest(header=pb.ReduceHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_MAX, resident=R()))])),
            lambda f: (), lambda f: np.array([f.value.int_value]), np.array([x.max()])),
    }
    # Segmented scan's expected: cumsum within each run of equal keys.
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    c = np.cumsum(x, dtype=np.int64)
    base = np.repeat(np.r_[0, c[starts[1:] - 1]], np.diff(np.r_[starts, n]))
    calls["segmented_scan_keep"] = calls["segmented_scan_keep"][:3] + ((c - base).astype(np.int32),)

    for name, (call, kept, result, want) in calls.items():
        try:
            f = call()
            res[name + "_correct"] = bool(np.array_equal(result(f), want))
            drop(stub, *kept(f))
            kernel, total = [], []
            def after(f):
                kernel.append(f.timing.kernel_us)
                total.append(f.timing.total_us)
                drop(stub, *kept(f))
            res[name + "_ms"] = median_ms(call, after=after)
            res[name + "_kernel_us"] = statistics.median(kernel)
            res[name + "_server_us"] = statistics.median(total)
        except grpc.RpcError as e:
            res[name + "_error"] = f"{e.code()}: {e.details()}"

    # The chain, three calls on kept arrays: compact(GT 0) keep -> scan keep -> reduce MAX.
    def chain():
        fc = list(stub.Compact(iter([pb.CompactRequest(header=pb.CompactHeader(
            dtype=pb.DTYPE_INT32, predicate=gt0, resident=R(keep=True)))])))[-1]
        fs = list(stub.Scan(iter([pb.ScanRequest(header=pb.ScanHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=fc.values_array.id, keep=True)))])))[-1]
        fr = stub.Reduce(iter([pb.ReduceRequest(header=pb.ReduceHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_MAX, resident=pb.Resident(values=fs.array.id)))]))
        drop(stub, fc.values_array, fs.array)
        return fc, fs, fr
    try:
        fc, fs, fr = chain()
        res["chain_correct"] = fr.value.int_value == int(np.cumsum(x[x > 0], dtype=np.int32).max())
        sums = []
        res["chain_ms"] = median_ms(chain, after=lambda r: sums.append(
            (sum(f.timing.total_us for f in r), sum(f.timing.kernel_us for f in r))))
        res["chain_server_us"] = statistics.median(s[0] for s in sums)
        res["chain_kernel_us"] = statistics.median(s[1] for s in sums)
    except grpc.RpcError as e:
        res["chain_error"] = f"{e.code()}: {e.details()}"

    try:
        import cupy as cp
        d = cp.asarray(x)
        def timed(f):
            def run():
                f()
                cp.cuda.runtime.deviceSynchronize()
            run()
            return median_ms(run)
        res["cupy_compact_ms"] = timed(lambda: d[d > 0])
        res["cupy_histogram_ms"] = timed(lambda: cp.histogram(d, bins=256, range=(-1000, 1000)))
        res["cupy_sort_ms"] = timed(lambda: cp.sort(d))
        res["cupy_max_ms"] = timed(lambda: d.max())
        res["cupy_chain_ms"] = timed(lambda: cp.cumsum(d[d > 0]).max())
    except Exception as e:  # noqa: BLE001 - the run goes on without the peer
        res["cupy_error"] = repr(e)
    drop(stub, xi, ki)
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
