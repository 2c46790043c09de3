"""Sorts of device memory (see device_ipc.py). Against a stand-in server and driver: a sort's
outputs for every SortOutput and its values; malformed answers. On a GPU with a server that serves
device memory: every dtype against the streamed path bit for bit (NaN of both signs and payloads,
+-0, +-inf, subnormals; duplicates; ascending and descending; argsort, keys and indices, keys and
values); the server's own checks of a sort's and a histogram's DeviceMemory (raw requests).
"""
import grpc
import numpy as np
import pytest

import gpuscan
from gpuscan import _device
from gpuscan.v1 import gpuscan_pb2 as pb
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

import reference as ref
from device_ipc import UUID, Malformed, StandIn, dm, handle_of, raw_array, same_bits
from device_ipc import cp, dev, fake, sock_dir  # noqa: F401 (fixtures: pytest finds them by name here)


# -- everywhere: requests and results against a stand-in server and driver
SORT_OUTPUTS = {  # output: (what sort/argsort are asked, the DeviceMemory outputs set)
    pb.SORT_OUTPUT_KEYS: ("sort", {"output"}),
    pb.SORT_OUTPUT_KEYS_AND_VALUES: ("sort values=", {"output", "values", "values_output"}),
    pb.SORT_OUTPUT_INDICES: ("argsort", {"indices"}),
    pb.SORT_OUTPUT_KEYS_AND_INDICES: ("argsort return_keys=", {"output", "indices"}),
}


def test_sort_requests(serve_servicer, fake):
    assert set(SORT_OUTPUTS) == set(pb.SortOutput.values())  # every output
    srv = StandIn()
    with gpuscan.Client(serve_servicer(srv), native=False) as c:
        for output, (how, fields) in SORT_OUTPUTS.items():
            for descending in (False, True):
                fake.allocations.clear()
                x = fake.array(40, "uint32", at=6, room=60)  # allocation 1
                v = fake.array(40, "float64", at=3, room=50)  # allocation 2 (made for every output)
                if how == "sort":
                    got = c.sort(x, descending=descending)
                elif how == "sort values=":
                    got = c.sort(x, values=v, descending=descending)
                elif how == "argsort":
                    got = c.argsort(x, descending=descending)
                else:
                    got = c.argsort(x, descending=descending, return_keys=True)
                h = srv.headers[-1]
                where = (pb.SortOutput.Name(output), descending)
                assert (h.dtype, h.descending, h.output, h.element_count) == (pb.DTYPE_UINT32, descending, output,
                                                                             40), where
                assert h.values_dtype == (pb.DTYPE_FLOAT64 if "values" in fields else pb.DTYPE_UNSPECIFIED), where
                assert (dm(h).device_uuid, dm(h).handle, dm(h).offset, dm(h).bytes) == (UUID, handle_of(1), 24, 160)
                assert not dm(h).flags_handle, where
                for field in ("output", "indices", "values", "values_output"):
                    assert bool(getattr(dm(h), f"{field}_handle")) == (field in fields), (where, field)
                # the new outputs: allocations 3, 4, ... in the order keys, sorted values, indices; n
                # uint32 keys, n float64 values, n int64 indices
                order = [f for f in ("output", "values_output", "indices") if f in fields]
                assert len(fake.allocations) == 2 + len(order), where
                made = {}
                for field, (base, size, buffer_id, _) in zip(order, fake.allocations[2:]):
                    assert (getattr(dm(h), f"{field}_handle"), getattr(dm(h), f"{field}_offset")) == \
                        (handle_of(buffer_id), 0), (where, field)
                    assert size == {"output": 160, "values_output": 320, "indices": 320}[field], (where, field)
                    made[field] = base
                if "values" in fields:
                    assert (dm(h).values_handle, dm(h).values_offset) == (handle_of(2), 24), where
                keys = got[0] if how in ("sort values=", "argsort return_keys=") else got
                if how == "sort values=":
                    assert got[1].dtype == np.float64 and got[1].shape == (40,) and got[1].ptr == made["values_output"]
                if how == "argsort":
                    assert keys.dtype == np.int64 and keys.shape == (40,) and keys.ptr == made["indices"]
                else:
                    assert keys.dtype == np.uint32 and keys.shape == (40,) and keys.ptr == made["output"], where
                if how == "argsort return_keys=":
                    assert got[1].dtype == np.int64 and got[1].ptr == made["indices"]
                assert c.last_timing.total_us == 9
        assert srv.info_calls == 1


@pytest.mark.parametrize("how, words", [("data", "streamed sorted elements back"), ("count", "counted 11 elements"),
                                        ("no final", "without its final response")])
def test_malformed_sort_answers(serve_servicer, fake, how, words):
    with gpuscan.Client(serve_servicer(Malformed(how)), native=False) as c:
        with pytest.raises(gpuscan.Internal, match=words):
            c.argsort(fake.array(10))


# -- a GPU, CuPy and a server that serves device memory
NAN_PAYLOADS = {4: np.array([0x7FC00001, 0xFFC00002, 0x7FC00003], np.uint32),
                8: np.array([0x7FF8000000000001, 0xFFF8000000000002, 0x7FF8000000000003], np.uint64)}


def sort_keys(rng, dtype, n, distinct=None):
    """Random keys of dtype; `distinct`: drawn from that many values (many duplicates: stability
    shows); floats with NaN of both signs and several payloads, +-inf, +-0, subnormals, the
    extremes; integers with their extremes and 0."""
    if dtype.kind == "f":
        pool = (rng.standard_normal(max(distinct or n, 1)) * 100).astype(dtype)
        fi = np.finfo(dtype)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, fi.tiny / 4, -fi.tiny / 4, fi.max, fi.min, fi.tiny,
                            -fi.tiny], dtype)
        special[0] = -np.abs(special[0])  # -NaN: sign bit set
        pool = np.concatenate((pool, special, NAN_PAYLOADS[dtype.itemsize].view(dtype)))
    else:
        info = np.iinfo(dtype)
        pool = rng.integers(info.min, info.max, max(distinct or n, 1), dtype=dtype, endpoint=True)
        pool = np.concatenate((pool, np.array([info.min, info.max, 0], dtype)))
    return pool[rng.integers(0, len(pool), n)] if n else np.zeros(0, dtype)


SORT_SIZES = [0, 1, 2, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, (1 << 20) + 7]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_sort(cp, dev, rng, dtype):
    """sort, argsort and argsort(return_keys=True) of every dtype, ascending and descending, with
    and without many duplicates, against the same server's streamed path bit for bit (floats in
    total order: NaN of both signs and payloads, +-0, +-inf, subnormals); new CuPy arrays on x's
    device; x left as it was."""
    for n in SORT_SIZES:
        for distinct in (None, 7):
            x = sort_keys(rng, dtype, n, distinct)
            xd = cp.asarray(x)
            for descending in (False, True):
                where = f"{dtype} n={n} distinct={distinct} descending={descending}"
                got = dev.sort(xd, descending=descending)
                t = dev.last_timing
                assert t.engine == "cuda", (where, t)
                assert isinstance(got, cp.ndarray) and got.device.id == xd.device.id, where
                want = dev.sort(x, descending=descending)
                assert same_bits(cp.asnumpy(got), want), where
                idx = dev.argsort(xd, descending=descending)
                want_idx = dev.argsort(x, descending=descending)
                assert isinstance(idx, cp.ndarray) and same_bits(cp.asnumpy(idx), want_idx), where
                k, idx = dev.argsort(xd, descending=descending, return_keys=True)
                assert same_bits(cp.asnumpy(k), want) and same_bits(cp.asnumpy(idx), want_idx), where
                assert same_bits(cp.asnumpy(xd), x), where  # the input is left as it was


def test_sort_with_values(cp, dev, rng):
    """Keys of every dtype with values of another (and int64 positions: the permutation), inside
    larger allocations, against the streamed path bit for bit."""
    for i, key_dtype in enumerate(ref.DTYPES):
        value_dtype = ref.DTYPES[(i + 1) % len(ref.DTYPES)]
        for n in ((1 << 16) + 3, (1 << 20) + 7):
            x = sort_keys(rng, key_dtype, n, distinct=100)
            v = sort_keys(rng, value_dtype, n)
            big_keys, big_values = cp.asarray(np.concatenate([x, x[:1000]])), cp.asarray(np.concatenate([v[:77], v]))
            xd, vals = big_keys[:n], big_values[77:]  # the keys at their allocation's start, the values 77 in
            for descending in (False, True):
                where = f"keys {key_dtype} values {value_dtype} n={n} descending={descending}"
                k, sv = dev.sort(xd, values=vals, descending=descending)
                assert isinstance(sv, cp.ndarray) and sv.dtype == value_dtype and sv.shape == (n,), where
                wk, wv = dev.sort(x, values=v, descending=descending)
                assert same_bits(cp.asnumpy(k), wk) and same_bits(cp.asnumpy(sv), wv), where
                _, pos = dev.sort(xd, values=cp.arange(n, dtype=cp.int64), descending=descending)
                assert same_bits(cp.asnumpy(pos), cp.asnumpy(dev.argsort(xd, descending=descending))), where
            assert same_bits(cp.asnumpy(big_values[77:]), v) and same_bits(cp.asnumpy(big_keys[:n]), x)


def test_sort_and_histogram_server_errors(cp, dev, rng, request):
    """The server's own checks of a device sort's and histogram's DeviceMemory, past the client's:
    requests made by hand on an allocation of 2 MiB holding 1024 int32 keys at offset 0."""
    drv = _device.driver()
    size = 2 << 20
    raw = cp.cuda.runtime.malloc(size)
    request.addfinalizer(lambda: cp.cuda.runtime.free(raw))
    at = drv.locate(raw, "raw")
    e = drv.export(raw, size, "raw", at)
    H = e.handle
    keys = raw_array(cp, raw, 1024, np.int32)
    x = rng.integers(-50, 50, 1024, dtype=np.int32)

    def memory(**fields):
        m = dict(device_uuid=at.device_uuid, handle=H, offset=0, bytes=4096)
        m.update(fields)
        return pb.DeviceMemory(**m)

    def sort_call(output, values_dtype=pb.DTYPE_UNSPECIFIED, **fields):
        req = pb.SortRequest(header=pb.SortHeader(dtype=pb.DTYPE_INT32, output=output, values_dtype=values_dtype,
                                                  device_memory=memory(**fields)))
        with grpc.insecure_channel(dev.target) as ch:
            try:
                responses = list(pb_grpc.GpuScanStub(ch).Sort(iter([req]), timeout=60))
            except grpc.RpcError as err:
                return err.code(), err.details()
        assert responses[-1].element_count == 1024 and responses[-1].HasField("timing"), responses
        assert not any(r.keys or r.values or r.indices for r in responses), responses  # nothing streamed back
        return grpc.StatusCode.OK, ""

    def histogram_call(data=b"", **fields):
        req = pb.HistogramRequest(header=pb.HistogramHeader(dtype=pb.DTYPE_INT32, bins=4, lo=-50.0, hi=50.0,
                                                            device_memory=memory(**fields)), data=data)
        with grpc.insecure_channel(dev.target) as ch:
            try:
                r = pb_grpc.GpuScanStub(ch).Histogram(iter([req]), timeout=60)
            except grpc.RpcError as err:
                return err.code(), err.details()
        assert r.element_count == 1024 and sum(np.frombuffer(r.counts, "<u8")) == 1024, r
        return grpc.StatusCode.OK, ""

    KEYS, KV, IDX, KI = (pb.SORT_OUTPUT_KEYS, pb.SORT_OUTPUT_KEYS_AND_VALUES, pb.SORT_OUTPUT_INDICES,
                         pb.SORT_OUTPUT_KEYS_AND_INDICES)
    out, ind, val, vout = (dict(output_handle=H, output_offset=8192), dict(indices_handle=H, indices_offset=16384),
                           dict(values_handle=H, values_offset=32768), dict(values_output_handle=H,
                                                                            values_output_offset=40960))
    invalid = [  # (the call's arguments, the field the error names): a required output missing, one set that
        ((KEYS,), {}, "output_handle"),  # must stay unset
        ((IDX,), {}, "indices_handle"),
        ((KI,), out, "indices_handle"),
        ((KI,), ind, "output_handle"),
        ((IDX,), {**ind, **out}, "output_handle"),
        ((KEYS,), {**out, **ind}, "indices_handle"),
        ((KV, pb.DTYPE_INT32), {**out, **vout}, "values_handle"),
        ((KV, pb.DTYPE_INT32), {**out, **val}, "values_output_handle"),
        ((KEYS,), {**out, **val}, "values_handle"),
        ((KEYS,), {**out, **vout}, "values_output_handle"),
        ((KEYS,), {**out, "flags_handle": H, "flags_offset": 49152}, "flags_handle"),
    ]
    for args, fields, name in invalid:
        code, details = sort_call(*args, **fields)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and name in details, (args, fields, code, details)
    for fields in (dict(output_handle=H, output_offset=2048), {**out, "indices_handle": H, "indices_offset": 1024}):
        code, details = sort_call(KI, **{**out, **ind, **fields})  # overlapping the keys (not the same range)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "overlap" in details, (fields, code, details)
    code, details = sort_call(KI, **out, indices_handle=H, indices_offset=size - 4096)  # 8192 bytes of int64
    assert code == grpc.StatusCode.OUT_OF_RANGE and "indices" in details, details

    keys[:] = cp.asarray(x)
    code, details = sort_call(KEYS, output_handle=H, output_offset=0)  # in place: the same range
    assert code == grpc.StatusCode.OK, details
    assert same_bits(cp.asnumpy(keys), np.sort(x, kind="stable"))
    keys[:] = cp.asarray(x)
    code, details = sort_call(KV, pb.DTYPE_INT32, output_handle=H, output_offset=0, values_handle=H,
                              values_offset=32768, values_output_handle=H, values_output_offset=40960)
    assert code == grpc.StatusCode.OK, details
    pos = raw_array(cp, raw + 32768, 1024, np.int32)
    pos[:] = cp.arange(1024, dtype=cp.int32)
    keys[:] = cp.asarray(x)
    assert sort_call(KV, pb.DTYPE_INT32, **out, **val, **vout)[0] == grpc.StatusCode.OK
    assert same_bits(cp.asnumpy(raw_array(cp, raw + 40960, 1024, np.int32)),
                     np.argsort(x, kind="stable").astype(np.int32))

    assert histogram_call() == (grpc.StatusCode.OK, "")
    for fields in (out, ind, val, vout, dict(flags_handle=H, flags_offset=49152)):
        code, details = histogram_call(**fields)  # a histogram writes nothing
        name = next(k for k in fields if k.endswith("_handle"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and name in details, (fields, code, details)
    code, details = histogram_call(data=bytes(16))  # the header alone
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    code, details = histogram_call(offset=size - 2048)
    assert code == grpc.StatusCode.OUT_OF_RANGE, details
    assert dev.histogram(keys, 4, range=(-50.0, 50.0)).counts.sum() == 1024  # the server serves on
