"""100,000 resident arrays on one server (issue 56: "Put/Drop latency flat from 1 to 100,000"):
usage scale_bench.py TARGET COUNT OUT.json. Puts COUNT arrays of 16 random int32 (through the
generated stubs, TCP loopback), timing each; checks a few of them back and the list's count; then
drops them all, timing each. Reports p50/p99 of the first and last 1000 of each phase, and a scan
of one array with all of them resident."""
import json
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


def window(res, name, times):
    for part, t in (("first", times[:1000]), ("last", times[-1000:])):
        res[f"{name}_{part}1000_p50_ms"] = statistics.median(t)
        res[f"{name}_{part}1000_p99_ms"] = pct(t, 0.99)


def main():
    target, count, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    # ListArrays of 100,000 arrays is ~5.9 MB, past grpcio's default 4 MiB receive limit (see README).
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)]))
    rng = np.random.default_rng(7)
    data = rng.integers(-1 << 30, 1 << 30, (count, 16), dtype=np.int32)
    infos, put_ms = [], []
    for i in range(count):
        reqs = [pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=pb.DTYPE_INT32, element_count=16)),
                pb.PutArrayRequest(data=data[i].tobytes())]
        t = time.perf_counter()
        infos.append(stub.PutArray(iter(reqs)))
        put_ms.append((time.perf_counter() - t) * 1e3)
    res = {"count": count, "device": infos[0].device}
    window(res, "put", put_ms)
    lst = stub.ListArrays(pb.ListArraysRequest())
    res["listed"] = len(lst.arrays)
    res["ids_unique"] = len({i.id for i in infos}) == count
    ok = True
    for i in list(range(0, count, max(1, count // 50))) + [count - 1]:
        got = b"".join(r.data for r in stub.GetArray(pb.GetArrayRequest(id=infos[i].id)))
        ok &= got == data[i].tobytes()
    res["sampled_gets_equal"] = ok
    t = time.perf_counter()
    scan = list(stub.Scan(iter([pb.ScanRequest(header=pb.ScanHeader(
        dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, resident=pb.Resident(values=infos[count // 2].id)))])))
    res["scan_among_all_ms"] = (time.perf_counter() - t) * 1e3
    res["scan_correct"] = np.array_equal(np.frombuffer(b"".join(r.data for r in scan), dtype=np.int32),
                                         np.cumsum(data[count // 2], dtype=np.int32))
    drop_ms = []
    for info in infos:
        t = time.perf_counter()
        stub.DropArray(pb.DropArrayRequest(id=info.id))
        drop_ms.append((time.perf_counter() - t) * 1e3)
    window(res, "drop", drop_ms)
    res["left"] = len(stub.ListArrays(pb.ListArraysRequest()).arrays)
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
