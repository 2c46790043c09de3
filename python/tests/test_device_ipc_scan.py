"""Scan, reduce and compact of device memory (see device_ipc.py). Against a stand-in server and
driver: the handles and offsets the client sends, in place, compact's outputs. On a GPU with a
server that serves device memory: results against numpy on random data, floats bit for bit
against the same server's streamed path; offsets inside a larger allocation.
"""
import numpy as np
import pytest

import gpuscan
from gpuscan.v1 import gpuscan_pb2 as pb

import reference as ref
from device_ipc import UUID, FakeArray, StandIn, dm, handle_of, same_bits
from device_ipc import cp, dev, fake, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


# -- everywhere: requests and results against a stand-in server and driver
def test_scan_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x, out = fake.array(100, "float32", at=250, room=1000), fake.array(100, "float32", at=3, room=103)
        assert c.scan(x, op="max", exclusive=True, out=out) is out
        h = srv.headers[-1]
        assert h.dtype == pb.DTYPE_FLOAT32 and h.op == pb.OPERATOR_MAX and h.kind == pb.SCAN_KIND_EXCLUSIVE
        assert h.element_count == 100 and dm(h).device_uuid == UUID and dm(h).bytes == 400
        assert (dm(h).handle, dm(h).offset) == (handle_of(1), 1000)  # x lies 250 elements into its allocation
        assert (dm(h).output_handle, dm(h).output_offset) == (handle_of(2), 12)
        assert c.last_timing.total_us == 7
        assert c.scan(x, out=x) is x and not dm(srv.headers[-1]).output_handle  # in place
        same = FakeArray(100, "float32", x.ptr)  # another object over x's memory: in place too
        assert c.scan(x, out=same) is same and not dm(srv.headers[-1]).output_handle
        y = c.scan(x)  # a new array like x (CuPy's or PyTorch's; here the stand-in's)
        assert isinstance(y, FakeArray) and y.shape == (100,) and y.dtype == np.float32
        assert (dm(srv.headers[-1]).output_handle, dm(srv.headers[-1]).output_offset) == (handle_of(3), 0)
        m = fake.array(12, "int64")
        m.shape = (3, 4)  # any shape, C-contiguous: its elements in order
        c.scan(m, out=fake.array(12, "int64"))
        assert srv.headers[-1].element_count == 12 and dm(srv.headers[-1]).bytes == 96
        assert srv.info_calls == 1  # kept once it serves device memory
        assert fake.synchronized == [1] * 5  # each call waited for the arrays' stream (one, 1: legacy default)


def test_reduce_and_compact_requests(serve_servicer, fake):
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        x = fake.array(50, "uint64", at=7, room=64)
        got = c.reduce(x, op="min")
        assert type(got) is np.uint64 and got == 42
        h = srv.headers[-1]
        assert h.op == pb.OPERATOR_MIN and h.element_count == 50 and (dm(h).offset, dm(h).bytes) == (56, 400)
        assert not dm(h).output_handle and not dm(h).indices_handle and not dm(h).flags_handle

        srv.kept = 3
        flags = fake.array(50, "bool", at=10, room=80)
        v, i = c.compact(x, where=flags, indices=True)
        h = srv.headers[-1]
        assert h.use_flags and h.output == pb.COMPACT_OUTPUT_VALUES_AND_INDICES and h.element_count == 50
        assert (dm(h).flags_handle, dm(h).flags_offset) == (handle_of(2), 10)
        assert (dm(h).output_handle, dm(h).output_offset, dm(h).indices_handle) == (handle_of(3), 0, handle_of(4))
        assert v.shape == (3,) and v.dtype == np.uint64 and i.shape == (3,) and i.dtype == np.int64
        assert v.ptr == fake.allocations[2][0] and fake.allocations[2][1] == 400  # room for every element
        assert fake.allocations[3][1] == 400  # int64 indices of every element

        srv.kept = 0
        i = c.compact(x, predicate=("gt", 5), values=False, indices=True)
        h = srv.headers[-1]
        assert h.WhichOneof("selector") == "predicate" and h.predicate.op == pb.PREDICATE_OP_GT
        assert h.output == pb.COMPACT_OUTPUT_INDICES and not dm(h).output_handle and dm(h).indices_handle
        assert i.shape == (0,) and i.dtype == np.int64


# -- a GPU, CuPy and a server that serves device memory
SIZES = [0, 1, 4095, 4096, 4097, (1 << 20) + 3, (1 << 24) + 1]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan(cp, dev, rng, dtype):
    for n in SIZES:
        for op in ("sum", "max"):
            for exclusive in (False, True):
                where = f"{dtype} {op} exclusive={exclusive} n={n}"
                x = ref.random_array(rng, dtype, n, op)
                xd, out = cp.asarray(x), cp.full(n, 7, dtype)
                assert dev.scan(xd, op=op, exclusive=exclusive, out=out) is out, where
                t = dev.last_timing
                assert t.engine == "cuda" and t.h2d_us == 0 and t.d2h_us == 0, (where, t)  # nothing crossed the host
                got = cp.asnumpy(out)
                assert same_bits(cp.asnumpy(xd), x), where  # the input is left as it was
                if dtype.kind == "f" and op == "sum":  # the server's float sums: the same bits on every path
                    assert same_bits(got.view(f"u{dtype.itemsize}"),
                                     dev.scan(x, op=op, exclusive=exclusive).view(f"u{dtype.itemsize}")), where
                    ref.assert_scan_close(got, ref.scan(x, op, exclusive), x, op)
                else:
                    assert same_bits(got, ref.scan(x, op, exclusive)), where
                assert dev.scan(xd, op=op, exclusive=exclusive, out=xd) is xd, where  # in place
                assert same_bits(cp.asnumpy(xd), got), where
        y = dev.scan(cp.asarray(ref.random_array(rng, dtype, n)))  # no out=: a new CuPy array
        assert isinstance(y, cp.ndarray) and y.shape == (n,) and y.dtype == dtype


def test_reduce(cp, dev, rng):
    for dtype in ref.DTYPES:
        for n in (0, 1, 4097, (1 << 20) + 3):
            for op in ("sum", "min", "max"):
                x = ref.random_array(rng, dtype, n, op)
                got = dev.reduce(cp.asarray(x), op=op)
                where = (str(dtype), n, op, got)
                assert type(got) is dtype.type, where
                if dtype.kind == "f" and op == "sum":
                    assert got.tobytes() == dev.reduce(x, op=op).tobytes(), where
                else:
                    assert got.tobytes() == ref.reduce(x, op).tobytes(), where


def test_compact(cp, dev, rng):
    for dtype in ref.DTYPES:
        for n in (0, 1, 4097, (1 << 20) + 3):
            x = ref.random_array(rng, dtype, n)
            xd, mask = cp.asarray(x), rng.random(n) < 0.4
            where = f"{dtype} n={n}"
            v, i = dev.compact(xd, where=cp.asarray(mask), indices=True)
            assert isinstance(v, cp.ndarray) and isinstance(i, cp.ndarray), where
            assert same_bits(cp.asnumpy(v), x[mask]) and same_bits(cp.asnumpy(i), np.flatnonzero(mask)), where
            byte_flags = rng.integers(0, 4, n, dtype=np.uint8)  # any nonzero byte keeps
            i = dev.compact(xd, where=cp.asarray(byte_flags), values=False, indices=True)
            assert same_bits(cp.asnumpy(i), np.flatnonzero(byte_flags)), where
            v = dev.compact(xd, predicate=("gt", 0))
            assert same_bits(cp.asnumpy(v), x[x > 0]), where
            lo, hi = (0, 1 << 31) if dtype.kind == "u" else (-1, 1)
            v, i = dev.compact(xd, predicate=("in_range", lo, hi), indices=True)
            keep = (x >= lo) & (x < hi)
            assert same_bits(cp.asnumpy(v), x[keep]) and same_bits(cp.asnumpy(i), np.flatnonzero(keep)), where


def test_offsets_inside_an_allocation(cp, dev, rng):
    n = (1 << 20) + 3
    whole = ref.random_array(rng, np.dtype(np.int32), n + 5000)
    big = cp.asarray(whole)
    x = big[1000:1000 + n]  # 4000 bytes into big's allocation
    out = cp.zeros(n + 10, np.int32)
    assert dev.scan(x, out=out[3:3 + n]) is not None
    assert same_bits(cp.asnumpy(out[3:3 + n]), ref.scan(whole[1000:1000 + n], "sum", False))
    assert not cp.asnumpy(out[:3]).any() and not cp.asnumpy(out[3 + n:]).any()  # nothing written outside
    assert dev.reduce(x, op="max") == whole[1000:1000 + n].max()
    flags = cp.asarray(rng.random(n + 77) < 0.5)
    v, i = dev.compact(x, where=flags[77:], indices=True)
    sel = cp.asnumpy(flags[77:])
    assert same_bits(cp.asnumpy(v), whole[1000:1000 + n][sel]) and same_bits(cp.asnumpy(i), np.flatnonzero(sel))
    dev.scan(x, op="min", out=x)  # in place on the slice: big outside it unchanged
    want = whole.copy()
    want[1000:1000 + n] = ref.scan(whole[1000:1000 + n], "min", False)
    assert same_bits(cp.asnumpy(big), want)
