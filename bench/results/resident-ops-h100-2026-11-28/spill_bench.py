"""Spill and restore on one server (issue 56): usage spill_bench.py TARGET N OUT.json. The server
holds two N-element int32 arrays' worth of budget less one element (--resident-bytes), so each
use of the array that is not on the device swaps the two: the other spills to pinned host memory,
this one comes back. Times REPS such reduces (wall here, server total and kernel) beside reduces
of an array on the device, and checks each value against numpy."""
import json
import statistics
import sys
import time

import grpc
import numpy as np

from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as rpc

REPS = 6
CHUNK = 4 << 20


def put(stub, x):
    def reqs():
        yield pb.PutArrayRequest(header=pb.PutArrayHeader(dtype=pb.DTYPE_INT32, element_count=x.size))
        b = memoryview(x).cast("B")
        for i in range(0, len(b), CHUNK):
            yield pb.PutArrayRequest(data=bytes(b[i:i + CHUNK]))
    return stub.PutArray(reqs())


def main():
    target, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    stub = rpc.GpuScanStub(grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)]))
    rng = np.random.default_rng(3)
    xs = [rng.integers(-1000, 1000, n, dtype=np.int32) for _ in range(2)]
    infos = [put(stub, x) for x in xs]  # the second put spills the first
    res = {"n": n, "bytes": xs[0].nbytes}
    listed = stub.ListArrays(pb.ListArraysRequest())
    res["spilled_after_puts"] = [a.spilled for a in listed.arrays]

    def reduce(i):
        t = time.perf_counter()
        r = stub.Reduce(iter([pb.ReduceRequest(header=pb.ReduceHeader(
            dtype=pb.DTYPE_INT32, op=pb.OPERATOR_MAX, resident=pb.Resident(values=infos[i].id)))]))
        wall = (time.perf_counter() - t) * 1e3
        assert r.value.int_value == int(xs[i].max())
        return wall, r.timing.total_us / 1e3, r.timing.kernel_us / 1e3

    swaps = [reduce(k % 2) for k in range(REPS)]  # each one brings its array back: a swap
    stays = [reduce((REPS - 1) % 2) for _ in range(REPS)]  # the last one brought back stays
    res["swap_wall_ms"] = statistics.median(s[0] for s in swaps)
    res["swap_server_ms"] = statistics.median(s[1] for s in swaps)
    res["resident_wall_ms"] = statistics.median(s[0] for s in stays)
    res["resident_server_ms"] = statistics.median(s[1] for s in stays)
    # A swap moves the array in (host to device) and the other out (device to host).
    moved = 2 * xs[0].nbytes
    res["swap_gb_per_s"] = moved / ((res["swap_server_ms"] - res["resident_server_ms"]) * 1e-3) / 1e9
    res["all_correct"] = True
    for info in infos:
        stub.DropArray(pb.DropArrayRequest(id=info.id))
    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
