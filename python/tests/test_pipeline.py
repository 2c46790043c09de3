"""Pipelines (c.pipeline(), docs/python.md "Pipelines"): chains of stages on RemoteArrays and on one
streamed host array give the bits of the same client's calls one by one, for random data at sizes
around 64-byte chunks (the client's and, on the server this module starts, --chunk-bytes 64: its
returned data too); keep=True gives RemoteArrays whose get() equals; stages take their call's
arguments and are checked when added (wrong kinds of input, a second host array, a dtype= the call
refuses); narrow dtypes as the calls take them;
the server's errors surface as gpuscan errors and a failed pipeline keeps nothing; the AsyncClient
alike. The request checks (test_requests_*, test_refused_*) need no server."""
import asyncio
import os

import numpy as np
import pytest

import gpuscan
from gpuscan import _pipeline_run, _wire
from gpuscan._effects import Retry
from gpuscan.aio import AsyncClient
from gpuscan.testing import ServerProcess
from gpuscan.v1 import gpuscan_pb2 as pb

from conftest import SMALL_CHUNK_BYTES, tenant_client
from test_resident import data, same_bits
from test_resident_ops import keys_for, same

DTYPES = ("int32", "int64", "float32", "float64")
# Around 64-byte chunks of 4- and 8-byte elements (16 and 8 a chunk), and a few chunks more.
SIZES = (0, 1, 7, 8, 9, 16, 17, 33, 100)


@pytest.fixture(scope="module")
def small_server(server_binary):
    """A server whose chunks are 64 bytes too (--chunk-bytes 64: the data it returns is cut there),
    keeping resident arrays; $GPUSCAN_TARGET's server instead when set."""
    if os.environ.get("GPUSCAN_TARGET"):
        yield os.environ["GPUSCAN_TARGET"]
        return
    with ServerProcess(server_binary, extra=("--chunk-bytes", "64", "--resident-bytes", str(64 << 20))) as s:
        yield s.target


@pytest.fixture()
def own(small_server, request):
    """tenant_client of the 64-byte-chunk server, skipped where it runs no pipelines."""
    with tenant_client(small_server, request, "pipeline",
                       "the server runs no pipelines (start it with --resident-bytes)") as c:
        yield c


@pytest.fixture()
def offline():
    """A client of an address where nothing listens: what it checks, it checks before any call."""
    with gpuscan.Client("127.0.0.1:1", native=False, chunk_bytes=SMALL_CHUNK_BYTES) as c:
        yield c


def remote(c, dtype, n):
    """A RemoteArray handle that no server made (for the checks that run before any call)."""
    return gpuscan.RemoteArray(c, pb.ArrayInfo(id=bytes(24), dtype=gpuscan._types.wire_dtype(dtype, narrow=True),
                                               element_count=n))


def scalar_bits(a, b):
    assert np.asarray(a).dtype == np.asarray(b).dtype and np.asarray(a).tobytes() == np.asarray(b).tobytes(), (a, b)


# -- with a server
@pytest.mark.parametrize("dtype", DTYPES)
def test_compact_scan_reduce_equals_the_calls_one_by_one(own, rng, dtype):
    for n in SIZES:
        x = data(rng, dtype, n)
        r = own.put(x)
        p = own.pipeline()
        kept = p.compact(r, predicate=("gt", 0), indices=True)
        s = p.scan(kept, exclusive=True, fetch=True)
        m = p.reduce(s, op="max")
        i = p.scan(kept.indices, op="max")  # nothing reads it: returned
        res = p.run()
        assert res.timing == own.last_timing
        k, idx = own.compact(x, predicate=("gt", 0), indices=True)
        e = own.scan(k, exclusive=True)
        same_bits(res[s], e)
        scalar_bits(res[m], own.reduce(e, op="max"))
        same_bits(res[i], own.scan(idx, op="max"))
        with pytest.raises(KeyError, match="intermediates"):
            res[kept]
        assert len(res) == 4 and len(res.timings) == 4
        assert [t.algorithm for t in res.timings] == res.timing.algorithm.split(",")
        r.drop()


NARROW = ("int8", "uint8", "int16", "uint16", "float16")


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_stages_equal_the_calls_one_by_one(own, rng, dtype):
    """compact -> scan (numpy's wider result, or dtype=) -> reduce; reduce, histogram and sort of
    the narrow kept values; a bool host array streamed: each stage the client's own call's bits."""
    wide = "float32" if dtype == "float16" else "int64" if dtype[0] == "i" else "uint64"
    for n in SIZES + (64, 65):
        x = data(rng, dtype, n)
        r = own.put(x)
        p = own.pipeline()
        kept = p.compact(r, predicate=("gt", 0), indices=True)
        s = p.scan(kept, fetch=True)
        w = p.scan(kept, dtype=wide, exclusive=True)
        m = p.reduce(s, op="max")
        total = p.reduce(kept)
        h = p.histogram(kept, 5, range=(-3, 120))
        srt = p.sort(kept, values=w, descending=True)
        res = p.run()
        k, _ = own.compact(x, predicate=("gt", 0), indices=True)
        assert k.dtype == np.dtype(dtype)
        e = own.scan(k)
        same_bits(res[s], e)
        ew = own.scan(k, dtype=wide, exclusive=True)
        scalar_bits(res[m], own.reduce(e, op="max"))
        scalar_bits(res[total], own.reduce(k))
        same(res[h], own.histogram(k, 5, range=(-3, 120)))
        same(res[srt], own.sort(k, values=ew, descending=True))
        r.drop()
    flags = data(rng, "bool", 100)
    p = own.pipeline()
    s = p.scan(flags)
    c = p.compact(p.scan(flags, op="max"), where=flags)
    res = p.run()
    same_bits(res[s], own.scan(flags))
    same_bits(res[c], own.compact(own.scan(flags, op="max"), where=flags))


@pytest.mark.parametrize("dtype", ("int32", "float64"))
def test_sort_then_segmented_scan_by_its_keys(own, rng, dtype):
    for n in SIZES:
        keys = keys_for(rng, n, "int64" if dtype == "float64" else "int32")
        x = data(rng, dtype, n)
        kr, xr = own.put(keys), own.put(x)
        p = own.pipeline()
        st = p.sort(kr, values=xr, fetch=True)
        seg = p.segmented_scan(st.values, keys=st.keys, op="sum")
        ex = p.segmented_scan(st.values, keys=st.keys, op="min", exclusive=True)
        order = p.argsort(st.values, descending=True, return_keys=True)
        res = p.run()
        sk, sv = own.sort(keys, values=x)
        same(res[st], (sk, sv))
        same_bits(res[st.keys], sk)
        same_bits(res[seg], own.segmented_scan(sv, sk, op="sum"))
        same_bits(res[ex], own.segmented_scan(sv, sk, op="min", exclusive=True))
        same(res[order], own.argsort(sv, descending=True, return_keys=True))


@pytest.mark.parametrize("dtype", DTYPES)
def test_histogram_of_a_scan_of_the_streamed_input(own, rng, dtype):
    for n in (1, 17, 100):
        x = data(rng, dtype, n)
        p = own.pipeline()
        s = p.scan(x, op="max")
        h = p.histogram(s, 9, range=(-120, 130))
        whole = p.histogram(x, 16)  # range=None: numpy's, from the host array, as c.histogram's
        total = p.reduce(x)
        res = p.run()
        same(res[h], own.histogram(own.scan(x, op="max"), 9, range=(-120, 130)))
        same(res[whole], own.histogram(x, 16))
        scalar_bits(res[total], own.reduce(x))
        with pytest.raises(KeyError):
            res[s]
        assert res.timing.bytes_in == x.nbytes  # streamed once for the three stages reading it


def test_keep_gives_remote_arrays(own, rng):
    x = data(rng, "float32", 50)
    r = own.put(x)
    before = {a.id for a in own.arrays()}
    p = own.pipeline()
    kept = p.compact(r, predicate=("lt", 0), indices=True, keep=True, label="kept", ttl=60)
    srt = p.argsort(kept, return_keys=True, keep=True)
    cum = p.scan(kept.indices, keep=True)
    res = p.run()
    v, i = res[kept]
    assert all(isinstance(a, gpuscan.RemoteArray) for a in (v, i)) and v.label == "kept" and 0 < v.ttl <= 60
    assert res[kept.indices].id == i.id
    want_v, want_i = own.compact(x, predicate=("lt", 0), indices=True)
    same((v.get(), i.get()), (want_v, want_i))
    same(tuple(a.get() for a in res[srt]), own.argsort(want_v, return_keys=True))
    same_bits(res[cum].get(), own.scan(want_i))
    assert {a.id for a in own.arrays()} == before | {v.id, i.id, res[cum].id} | {a.id for a in res[srt]}


def test_masks_and_the_streamed_input_beside_resident_arrays(own, rng):
    n = 70
    x = data(rng, "int64", n)
    mask = rng.random(n) < 0.4  # the host array: a bool mask, sent as bytes
    heads = (rng.random(n) < 0.3).astype(np.int8)
    r, h = own.put(x), own.put(heads)
    p = own.pipeline()
    kept = p.compact(r, where=mask, indices=True, values=False)
    seg = p.segmented_scan(r, heads=h, op="max")
    res = p.run()
    same_bits(res[kept], own.compact(x, where=mask, indices=True, values=False))
    same_bits(res[seg], own.segmented_scan(x, heads=heads, op="max"))


def test_server_errors_are_the_clients_and_a_failed_pipeline_keeps_nothing(own, rng):
    x = data(rng, "int32", 40)
    r, keys = own.put(x), own.put(keys_for(rng, 40))
    before = {a.id for a in own.arrays()}
    p = own.pipeline()
    kept = p.compact(r, predicate=("gt", 0), keep=True)
    p.segmented_scan(kept, keys=keys)  # fewer kept values than keys: known when stage 0 has run
    with pytest.raises(gpuscan.InvalidArgument, match=r"stages\[1\]"):
        p.run()
    assert {a.id for a in own.arrays()} == before
    gone = own.put(x)
    gone.drop()
    q = own.pipeline()
    q.scan(gone)
    with pytest.raises(gpuscan.NotFound):
        q.run()
    w = own.pipeline()  # a handle claiming another dtype than the array's: the server's check
    w.scan(gpuscan.RemoteArray(own, pb.ArrayInfo(id=r.id, dtype=pb.DTYPE_FLOAT32, element_count=40)))
    with pytest.raises(gpuscan.InvalidArgument, match="FLOAT32"):
        w.run()


def test_runs_again_and_on_an_async_client(small_server, own, rng):
    x = data(rng, "float64", 33)
    r = own.put(x)
    p = own.pipeline()
    m = p.reduce(p.scan(p.compact(r, predicate=("gt", 0))), op="max")
    first, second = p.run(), p.run()
    scalar_bits(first[m], second[m])

    async def main():
        async with AsyncClient(small_server, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60, tenant=own.tenant) as ac:
            q = ac.pipeline()
            ra = gpuscan.RemoteArray(ac, pb.ArrayInfo(id=r.id, dtype=pb.DTYPE_FLOAT64, element_count=33))
            kept = q.compact(ra, predicate=("gt", 0), keep=True)
            mm = q.reduce(q.scan(kept), op="max")
            h = q.histogram(x, 5)
            res = await q.run()
            assert ac.last_timing == res.timing
            got = await res[kept].get()
            await res[kept].drop()
            return res[mm], got, res[h]
    value, got, hist = asyncio.run(main())
    scalar_bits(value, first[m])
    same_bits(got, own.compact(x, predicate=("gt", 0)))
    same(hist, own.histogram(x, 5))


# -- before any call
def test_requests_build_each_stage_as_its_call(offline, rng):
    x = data(rng, "int32", 20)
    r = remote(offline, "int32", 20)
    p = offline.pipeline()
    kept = p.compact(r, predicate=("gt", 0))
    s = p.scan(kept, op="max", exclusive=True)
    m = p.reduce(x, op="min")
    srt = p.sort(s, descending=True, keep=True, label="l")
    plans = p._plans
    assert plans[0].message.compact == gpuscan._checks.compact_header(pb.DTYPE_INT32, x.dtype, 20, None, ("gt", 0),
                                                                      False, True)
    assert plans[0].message.values.id == r.id
    assert plans[1].message.values == pb.StageInput(stage=0, array=pb.STAGE_ARRAY_VALUES)
    assert not plans[1].message.scan.HasField("element_count")  # a compact's count is known when it runs
    assert plans[1].message.scan == gpuscan._checks.scan_header(pb.DTYPE_INT32, "max", True, None)
    assert plans[2].message.values.streamed and plans[2].message.reduce.element_count == 20
    assert plans[3].message.label == "l" and not plans[3].message.sort.HasField("element_count")
    assert [pl.returns() for pl in plans] == [pb.STAGE_RETURN_NONE, pb.STAGE_RETURN_NONE, pb.STAGE_RETURN_NONE,
                                              pb.STAGE_RETURN_KEEP]
    assert (m.op, srt.op, repr(srt.keys)) == ("reduce", "sort", "Stage(3, 'sort').keys")
    # the call: a Retry of no retries (a stage keeps), whose try sends the header, then x
    prog = _pipeline_run.program(offline, plans, (x, pb.DTYPE_INT32), 3, None)
    retry = next(prog)
    assert isinstance(retry, Retry) and retry.retries == 0
    call = next(retry.attempt(None))
    first, *rest = list(call.requests)
    req = pb.PipelineRequest.FromString(first)
    assert req.header.input.dtype == pb.DTYPE_INT32 and req.header.input.element_count == 20
    assert len(req.header.stages) == 4 and req.header.stages[3].returns == pb.STAGE_RETURN_KEEP
    sent = req.data + b"".join(pb.PipelineRequest.FromString(b).data for b in rest)
    assert sent == x.tobytes() and len(rest) == 1  # 64-byte chunks: 16 int32 each
    assert next(_pipeline_run.program(offline, plans[:3], (x, pb.DTYPE_INT32), 3, None)).retries == 3


def test_requests_field_numbers_are_the_protos():
    req, resp = pb.PipelineRequest.DESCRIPTOR.fields_by_name, pb.PipelineResponse.DESCRIPTOR.fields_by_name
    assert req["data"].number == _wire.PIPELINE_DATA
    assert resp["stage"].number == _wire.PIPELINE_STAGE and resp["timing"].number == _wire.PIPELINE_TIMING
    oneof = {"scan": "scan", "segmented_scan": "scan", "reduce": "reduce", "compact": "compact",
             "histogram": "histogram", "sort": "sort"}
    assert {op: resp[f].number for op, f in oneof.items()} == _wire.PIPELINE_RESULT


def test_refused_wrong_kinds_of_input(offline, rng):
    x, y = data(rng, "int32", 10), data(rng, "int32", 10)
    p = offline.pipeline()
    m = p.reduce(x)
    h = p.histogram(x, 4)
    with pytest.raises(TypeError, match="answers a value, not an array"):
        p.scan(m)
    with pytest.raises(TypeError, match="answers a value"):
        p.sort(x, values=h)
    with pytest.raises(ValueError, match="second host array"):
        p.scan(y)
    with pytest.raises(ValueError, match="another pipeline"):
        offline.pipeline().scan(p.scan(x))
    with pytest.raises(ValueError, match="makes no keys"):
        p.scan(x).keys
    with pytest.raises(ValueError, match="makes no indices"):
        p.sort(x).indices
    with pytest.raises(ValueError, match="dtype=int8 for x of dtype int16"):
        offline.pipeline().scan(x.astype(np.int16), dtype="int8")  # a narrow output: as c.scan
    with pytest.raises(ValueError, match="float16 input accumulates"):
        offline.pipeline().reduce(remote(offline, "float16", 4), dtype="int64")
    with pytest.raises(ValueError, match="complex"):
        offline.pipeline().sort(x.astype(np.complex64))
    with pytest.raises(ValueError, match="one byte"):
        p.compact(x, where=remote(offline, "int32", 10))
    with pytest.raises(ValueError, match="one byte"):
        p.compact(x, where=p.scan(x))
    with pytest.raises(ValueError, match="has 9 elements"):
        p.segmented_scan(x, keys=remote(offline, "int32", 9))
    with pytest.raises(ValueError, match="int32, int64, uint32 or uint64"):
        p.segmented_scan(x, keys=remote(offline, "float32", 10))
    with pytest.raises(ValueError, match="dtype=float64"):
        p.scan(x, dtype="float64")
    with pytest.raises(ValueError, match="range"):
        p.histogram(p.scan(x), 4)
    with pytest.raises(ValueError, match="matrix"):
        p.scan(remote(offline, "int32", 10).reshape(2, 5))
    with pytest.raises(TypeError):
        p.scan(x, out=np.empty(10, np.int32))  # out=, lanes=, copy=: the call's, not a stage's


def test_refused_arguments_before_any_call(offline, rng):
    x = data(rng, "float32", 10)
    p = offline.pipeline()
    with pytest.raises(ValueError, match="no stages"):
        p.run()
    with pytest.raises(ValueError, match="keep=True and fetch=True"):
        p.scan(x, keep=True, fetch=True)
    with pytest.raises(ValueError, match="need keep=True"):
        p.scan(x, label="l")
    with pytest.raises(ValueError, match="ttl"):
        p.scan(x, keep=True, ttl=-1)
    with pytest.raises(ValueError, match="fetch"):
        p.scan(x, fetch="yes")
    with pytest.raises(ValueError, match="exactly one"):
        p.compact(x)
    with pytest.raises(ValueError, match="exactly one"):
        p.segmented_scan(x)
    with pytest.raises(ValueError, match="descending"):
        p.sort(x, descending="yes")
    with pytest.raises(gpuscan.InvalidArgument):
        p.scan(x, op="bit_xor")  # a bitwise operator on floats, as c.scan
    # none of those failed stages left the host array behind: another one may still be streamed
    p.scan(data(rng, "int64", 4))
    assert len(p) == 1
    with pytest.raises(ValueError, match="timeout"):
        p.run(timeout=-1)
    with pytest.raises(ValueError, match="retries"):
        p.run(retries=-1)
    assert isinstance(offline.pipeline(), gpuscan.Pipeline) and isinstance(p.stages[0], gpuscan.Stage)
