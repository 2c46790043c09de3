"""Where a resident call's time goes: usage diagnose.py TARGET N OUT.json.
- compact of the resident N-element int32 array by predicate (GT 0) and by a resident flags array
  of the same selection: the kernel stage of each (the kernel suite measures the flags form).
- 1024-element resident reduce and scan: the client's wall time beside the server's Timing
  (receive, queue, kernel, send, total), medians of 300 calls."""
import json
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc

CHUNK = 4 << 20


def put(stub, x, dtype):
    def reqs():
        yield pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=dtype, element_count=x.size))
        b = memoryview(x).cast("B")
        for i in range(0, len(b), CHUNK):
            yield pb.PutArrayRequest(data=bytes(b[i:i + CHUNK]))
    return stub.PutArray(reqs())


def main():
    target, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=opts))
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    xi = put(stub, x, pb.DTYPE_INT32)
    fi = put(stub, (x > 0).astype(np.uint8), pb.DTYPE_UINT8)
    res = {}
    gt0 = pb.Predicate(op=pb.PREDICATE_OP_GT, threshold=pb.Scalar(int_value=0))
    for name, header in {
        "compact_predicate": pb.CompactHeader(dtype=pb.DTYPE_INT32, predicate=gt0, resident=pb.Resident(values=xi.id)),
        "compact_flags": pb.CompactHeader(dtype=pb.DTYPE_INT32, use_flags=True,
                                          resident=pb.Resident(values=xi.id, flags=fi.id)),
        "compact_predicate_keep": pb.CompactHeader(dtype=pb.DTYPE_INT32, predicate=gt0,
                                                   resident=pb.Resident(values=xi.id, keep=True)),
    }.items():
        k, t = [], []
        for _ in range(10):
            last = list(stub.Compact(iter([pb.CompactRequest(header=header)])))[-1]
            k.append(last.timing.kernel_us)
            t.append(last.timing.total_us)
            if last.values_array.id:
                stub.DropArray(pb.DropArrayRequest(id=last.values_array.id))
        res[name + "_kernel_us"] = statistics.median(k)
        res[name + "_total_us"] = statistics.median(t)
    s = put(stub, x[:1024].copy(), pb.DTYPE_INT32)
    calls = {
        "reduce_1k": lambda: stub.Reduce(iter([pb.ReduceRequest(header=pb.ReduceHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=s.id)))])),
        "scan_1k": lambda: list(stub.Scan(iter([pb.ScanRequest(header=pb.ScanHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=s.id)))])))[-1],
        "streamed_reduce_1k": lambda: stub.Reduce(iter([
            pb.ReduceRequest(header=pb.ReduceHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM)),
            pb.ReduceRequest(data=x[:1024].tobytes())])),
        "info": lambda: stub.GetServerInfo(pb.GetServerInfoRequest()),
        "list": lambda: stub.ListArrays(pb.ListArraysRequest()),
    }
    for name, f in calls.items():
        f()
        wall, fields = [], {}
        for _ in range(300):
            t0 = time.perf_counter()
            r = f()
            wall.append((time.perf_counter() - t0) * 1e3)
            if hasattr(r, "timing"):
                for fld in ("receive_us", "queue_us", "kernel_us", "send_us", "total_us"):
                    fields.setdefault(fld, []).append(getattr(r.timing, fld))
        res[name + "_wall_p50_ms"] = statistics.median(wall)
        for fld, v in fields.items():
            res[f"{name}_{fld}_p50"] = statistics.median(v)
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
