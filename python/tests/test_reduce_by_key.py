"""reduce_by_key (Client/AsyncClient) against a numpy reference (runs where keys[i] != keys[i-1],
np.ufunc.reduceat over them), on random data (never all zeros): every dtype x operator, keys
int32/int64/uint32/uint64 (values that differ only above bit 32, negative keys); lengths 0, 1, 2,
around the chunk boundaries and over several chunks; runs of one element, long ones spanning
chunks, one run. Integers and float min/max exactly (wrap-around, NaN propagation), float sum and
product close to a float64 reference and bit-identical across chunk sizes, repeats and the async
client; every run's value is bit for bit the segmented inclusive scan at its last element. Then
the requests on the wire (a stand-in server records them), retries, malformed answers (Internal),
what the client refuses (ValueError before any call) and what the server refuses
(INVALID_ARGUMENT)."""
import asyncio

import numpy as np
import pytest

import gpuscan
import keyed
import raw
import reference as ref
from gpuscan import _chunking
from gpuscan.v1 import gpuscan_pb2 as pb
from keyed import CHUNK, per_chunk, values

KEY_KINDS = ["int32", "int64", "uint32", "uint64"]

_UFUNC = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum,
          "bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


@pytest.fixture(scope="module")
def rbk_client(target):
    with gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60) as c:
        yield c


# -- reference and inputs

def run_starts_of(keys):
    """Index of each run's first element: 0, then every i with keys[i] != keys[i-1]."""
    keys = np.asarray(keys)
    if len(keys) == 0:
        return np.zeros(0, np.intp)
    return np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))


def rbk_ref(x, keys, op, dtype=None):
    """(unique_keys, values) by numpy: each run's first key, op over its values in dtype (x's)."""
    xx = x if dtype is None else x.astype(dtype)
    idx = run_starts_of(keys)
    if len(idx) == 0:
        return np.asarray(keys)[:0], xx[:0].copy()
    with np.errstate(all="ignore"):
        return np.asarray(keys)[idx], _UFUNC[op].reduceat(xx, idx, dtype=xx.dtype)


def check(got, x, keys, op, what=""):
    """got is x's reduction by keys: keys and integers / float min/max exactly, float sum and
    product close to float64."""
    gk, gv = got
    kd = np.asarray(keys).dtype
    want_kd = kd if kd.itemsize >= 4 else np.dtype(np.int32 if kd.kind == "i" else np.uint32)
    assert gk.dtype == want_kd and gv.dtype == x.dtype.newbyteorder("="), (what, gk.dtype, gv.dtype)
    wk, wv = rbk_ref(x, keys, op)
    assert gk.shape == gv.shape == wk.shape, (what, gk.shape, gv.shape, wk.shape)
    np.testing.assert_array_equal(gk, wk, err_msg=what)
    if x.dtype.kind != "f" or op in ("min", "max"):
        np.testing.assert_array_equal(gv, wv, err_msg=what)
        return
    if not len(x):
        return
    _, want = rbk_ref(x, keys, op, np.float64)
    eps = float(np.finfo(x.dtype).eps)
    longest = int(np.diff(np.append(run_starts_of(keys), len(x))).max())
    if op == "sum":
        _, scale = rbk_ref(np.abs(x), keys, "sum", np.float64)
        err = np.abs(gv.astype(np.float64) - want)
        assert np.all(err <= 4 * longest * eps * scale + 1e-30), f"{what}: max err {err.max()}"
    else:
        np.testing.assert_allclose(gv.astype(np.float64), want, rtol=4 * longest * eps, err_msg=what)


def check_scan_relation(client, got, x, keys, op, what=""):
    """Each run's value is the segmented inclusive scan at the run's last element, bit for bit."""
    ends = np.append(run_starts_of(keys)[1:], len(x)) - 1 if len(x) else np.zeros(0, np.intp)
    seg = client.segmented_scan(x, keys, op=op)
    assert got[1].tobytes() == seg[ends].tobytes(), f"{what}: values are not the segmented scan at the run ends"


def make_keys(rng, n, pattern, per, kind):
    """Keys of `kind` for n elements: every element its own run, random runs (short ones and
    long ones spanning chunks), or one run."""
    starts = keyed.run_starts(rng, n, pattern, per)
    keys = keyed.run_keys(rng, starts, pattern, kind)
    assert np.array_equal(run_starts_of(keys), np.flatnonzero(starts))
    return keys


def cases():
    for dtype in ref.DTYPES:
        for op in ref.ops_for(dtype):
            yield pytest.param(dtype, op, id=f"{dtype}-{op}")


# -- results

@pytest.mark.parametrize("dtype,op", list(cases()))
def test_against_numpy(rbk_client, rng, dtype, op):
    """Every length and pattern, the key kinds taken in turn (each dtype/op meets every kind);
    each result also against the segmented scan at the run ends."""
    for kind, per, n, pattern in keyed.cases_in_turn(dtype, ref.DTYPES.index(dtype) + len(op), KEY_KINDS):
        x = values(rng, dtype, n, op)
        keys = make_keys(rng, n, pattern, per, kind)
        got = rbk_client.reduce_by_key(x, keys, op=op)
        what = f"n={n} {pattern} {kind}"
        check(got, x, keys, op, what)
        check_scan_relation(rbk_client, got, x, keys, op, what)


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_key_kinds_over_chunks(rbk_client, rng, kind):
    """Each key kind over several chunks and lengths around them, exact dtypes."""
    for dtype, op in ((np.dtype("int64"), "sum"), (np.dtype("uint32"), "bit_xor"), (np.dtype("float32"), "max"),
                      (np.dtype("int32"), "min")):
        per = per_chunk(dtype, kind)
        for n in (per - 1, per, per + 1, 2 * per, 5 * per + 3):
            x = values(rng, dtype, n, op)
            keys = make_keys(rng, n, "runs", per, kind)
            check(rbk_client.reduce_by_key(x, keys, op=op), x, keys, op, f"{dtype} {op} n={n}")


def test_run_shapes(rbk_client, rng):
    """One run is the plain reduction; all-singleton runs give (keys, x); a key that comes back
    after another run starts a new run; runs that end exactly at a chunk boundary, or cross one
    by one element, or are one element long on each side of it."""
    x = ref.random_array(rng, np.dtype("int32"), 3000)
    k, v = rbk_client.reduce_by_key(x, np.full(3000, -42, np.int64))
    np.testing.assert_array_equal(k, [-42])
    assert v.dtype == np.int32 and v[0] == rbk_client.reduce(x)
    k, v = rbk_client.reduce_by_key(x, np.full(3000, 9, np.uint32), op="max")
    assert k.tolist() == [9] and v.tolist() == [x.max()]
    keys = np.arange(3000, dtype=np.uint64) * 3
    k, v = rbk_client.reduce_by_key(x, keys, op="product")
    np.testing.assert_array_equal(k, keys)
    np.testing.assert_array_equal(v, x)
    keys = np.array([1, 1, 2, 2, 1, 1, 1], np.int32)  # 1 again after 2: a third run
    y = np.array([1, 2, 3, 4, 5, 6, 7], np.int32)
    k, v = rbk_client.reduce_by_key(y, keys)
    assert k.tolist() == [1, 2, 1] and v.tolist() == [3, 7, 18]
    k, v = rbk_client.reduce_by_key(y.astype(np.float64), keys, op="product")
    assert k.tolist() == [1, 2, 1] and v.tolist() == [2.0, 12.0, 210.0] and v.dtype == np.float64
    per = per_chunk(np.dtype("int32"), "int32")  # 1024
    n = 4 * per
    for cuts in ([per], [per - 1], [per + 1], [per - 1, per + 1], [per - 1, per, per + 1],
                 [per, 2 * per, 3 * per], [1, n - 1], [per // 2, 3 * per + per // 2]):
        keys = np.zeros(n, np.int32)
        for c in cuts:
            keys[c:] += 1
        x = ref.random_array(rng, np.dtype("int32"), n)
        check(rbk_client.reduce_by_key(x, keys), x, keys, "sum", f"cuts {cuts}")


def test_narrow_and_listed_keys(rbk_client, rng):
    """int8/int16 keys widen to int32, uint8/uint16 to uint32 (the unique keys come back so);
    lists are converted."""
    x = ref.random_array(rng, np.dtype("uint64"), 5000)
    for dt in ("int8", "int16", "uint8", "uint16"):
        keys = (rng.random(5000) < 0.05).cumsum().astype(dt)  # wraps: 255 -> 0 still differs from 255
        k, v = rbk_client.reduce_by_key(x, keys)
        check((k, v), x, keys, "sum", dt)
        assert k.dtype == (np.int32 if dt.startswith("int") else np.uint32)
    y = np.arange(1, 7, dtype=np.float64)
    k, v = rbk_client.reduce_by_key(y, [3, 3, -1, -1, -1, 9], op="product")
    assert k.dtype == np.int64 and k.tolist() == [3, -1, 9] and v.tolist() == [2, 60, 6]
    k, v = rbk_client.reduce_by_key([5, 1, 4], [0, 0, 1], op="min")
    assert k.tolist() == [0, 1] and v.tolist() == [1, 4]


def test_reproducible_bits(target, rbk_client, rng):
    """Float sum and product: the same bits whatever the chunking, on a repeat, and through the
    async client; close to float64; the segmented scan at the run ends."""
    n = 20_000
    for dtype in (np.dtype("float32"), np.dtype("float64")):
        for op in ("sum", "product"):
            for kind in ("int64", "uint32"):
                x = values(rng, dtype, n, op)
                keys = make_keys(rng, n, "runs", 4 * per_chunk(dtype, kind), kind)
                first = rbk_client.reduce_by_key(x, keys, op=op)
                check(first, x, keys, op, f"{dtype} {op} {kind}")
                check_scan_relation(rbk_client, first, x, keys, op, f"{dtype} {op} {kind}")
                with gpuscan.Client(target, chunk_bytes=1000, timeout=60) as small, \
                        gpuscan.Client(target, timeout=60) as big:
                    for c in (rbk_client, small, big):
                        k, v = c.reduce_by_key(x, keys, op=op)
                        assert k.tobytes() == first[0].tobytes(), f"{dtype} {op} {kind} chunk {c.chunk_bytes}"
                        assert v.tobytes() == first[1].tobytes(), f"{dtype} {op} {kind} chunk {c.chunk_bytes}"

                async def via_async():
                    async with gpuscan.AsyncClient(target, chunk_bytes=333, timeout=60) as ac:
                        return await ac.reduce_by_key(x, keys, op=op)
                k, v = asyncio.run(via_async())
                assert k.tobytes() == first[0].tobytes() and v.tobytes() == first[1].tobytes()


def test_copy_timing_and_timeout(rbk_client, rng):
    x = ref.random_array(rng, np.dtype("int64"), 2000)
    keys = (np.arange(2000) // 7).astype(np.int32)
    k, v = rbk_client.reduce_by_key(x, keys, op="bit_xor")
    check((k, v), x, keys, "bit_xor")
    assert k.flags.writeable and v.flags.writeable and k.flags.c_contiguous and v.flags.c_contiguous
    t = rbk_client.last_timing
    assert isinstance(t, gpuscan.Timing) and t.bytes_in >= x.nbytes and t.chunks == 4  # 512 elements a chunk
    # copy=: non-contiguous and big-endian x and keys as scan's x
    xs, ks = x[::2], keys[::2]
    with pytest.raises(ValueError, match="copy=True"):
        rbk_client.reduce_by_key(xs, np.ascontiguousarray(ks))
    with pytest.raises(ValueError, match="copy=True"):
        rbk_client.reduce_by_key(np.ascontiguousarray(xs), ks)
    want = rbk_ref(xs, ks, "sum")
    for got in (rbk_client.reduce_by_key(xs, ks, copy=True),
                rbk_client.reduce_by_key(xs.astype(">i8"), ks.astype(">i4"), copy=True)):
        assert got[0].dtype == np.int32 and got[1].dtype == np.int64
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert rbk_client.reduce_by_key(x, keys, timeout=30)[0].shape == (2000 // 7 + 1,)
    assert rbk_client.reduce_by_key(x, keys, timeout=0)[0].shape == (2000 // 7 + 1,)  # 0: no deadline


def test_empty_and_tiny(rbk_client):
    for dtype in ref.DTYPES:
        for kind in KEY_KINDS:
            k, v = rbk_client.reduce_by_key(np.zeros(0, dtype), np.zeros(0, kind))
            assert k.dtype == np.dtype(kind) and k.shape == (0,) and v.dtype == dtype and v.shape == (0,)
            assert rbk_client.last_timing is not None
        one = np.full(1, 3, dtype)
        k, v = rbk_client.reduce_by_key(one, np.array([5], np.uint64), op="max")
        assert k.tolist() == [5] and v.tolist() == [3]
        two = np.array([2, 3], dtype)
        k, v = rbk_client.reduce_by_key(two, np.array([-1, -1], np.int32), op="product")
        assert k.tolist() == [-1] and v.tolist() == [6]
        k, v = rbk_client.reduce_by_key(two, np.array([-1, 1], np.int64), op="min")
        assert k.tolist() == [-1, 1] and v.tolist() == [2, 3]


# -- the wire, retries, malformed answers: a stand-in server

def test_framing_matches_generated_messages():
    """The hand-framed requests are ReduceByKeyRequest's bytes; the assembler reads its responses."""
    from gpuscan import _wire
    x = np.arange(300, dtype=np.float32)
    keys = (np.arange(300) // 7).astype(np.uint64)
    first = pb.ReduceByKeyRequest(header=pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_MIN,
                                                              key_dtype=pb.DTYPE_UINT64, element_count=300))
    reqs = list(_chunking.data_requests(first, _wire.REDUCE_BY_KEY_DATA, x, 128, keys,
                                        flags_field=_wire.REDUCE_BY_KEY_KEYS))
    assert reqs[0] == pb.ReduceByKeyRequest(header=first.header, data=x[:128].tobytes(),
                                            keys=keys[:128].tobytes()).SerializeToString()
    assert reqs[2] == pb.ReduceByKeyRequest(data=x[256:].tobytes(), keys=keys[256:].tobytes()).SerializeToString()
    asm = _chunking.ReduceByKeyAssembler(np.dtype(np.uint64), np.dtype(np.float32), 300)
    uk, uv = rbk_ref(x, keys, "min")
    for r in (pb.ReduceByKeyResponse(keys=uk[:20].tobytes(), values=uv[:20].tobytes()),
              pb.ReduceByKeyResponse(keys=uk[20:].tobytes(), values=uv[20:].tobytes(), run_offset=20),
              pb.ReduceByKeyResponse(timing=pb.Timing(chunks=3), run_count=len(uk), element_count=300)):
        asm.feed(r.SerializeToString())
    k, v = asm.result()
    assert k.tolist() == uk.tolist() and v.tolist() == uv.tolist() and asm.timing.chunks == 3


class StandIn(keyed.StandIn):
    """ReduceByKey for int32 sums, by the reference: records each request's (header present,
    values, keys) lengths; answers the runs complete after each request (streamed as they
    complete), then the final response. Fails its first `fail` calls with UNAVAILABLE after one
    wrong run; `mangle(responses)` rewrites the answer (malformed servers)."""

    def ReduceByKey(self, request_iterator, context):
        failing = self.begin()
        header, xs, ks, seen = None, [], [], []
        responses, sent = [], 0
        for r in request_iterator:
            if r.HasField("header"):
                header = r.header
            seen.append((r.HasField("header"), len(r.data), len(r.keys)))
            xs.append(np.frombuffer(r.data, np.int32))
            ks.append(r.keys)
            if failing:  # one well-formed run, its value wrong: a retry must not keep it
                if len(xs) == 1:
                    ksz = ref.DTYPES[header.key_dtype - 1].itemsize
                    yield pb.ReduceByKeyResponse(keys=ks[-1][:ksz], values=b"\x5a\x5a\x5a\x5a")
                continue
            x = np.concatenate(xs)
            keys = np.frombuffer(b"".join(ks), ref.DTYPES[header.key_dtype - 1])
            uk, uv = rbk_ref(x, keys, "sum")
            done = len(uk) - 1  # the last run may continue in the next request
            if done > sent:
                responses.append(pb.ReduceByKeyResponse(keys=uk[sent:done].tobytes(), values=uv[sent:done].tobytes(),
                                                        run_offset=sent))
                sent = done
        if failing:  # at the end of the upload (a status mid-upload is lost by grpcio's asyncio client,
            # grpc/grpc#36066, which is not what this tests)
            self.refuse(context)
        self.requests = seen
        x = np.concatenate(xs) if xs else np.zeros(0, np.int32)
        keys = np.frombuffer(b"".join(ks), ref.DTYPES[header.key_dtype - 1])
        uk, uv = rbk_ref(x, keys, "sum")
        if len(uk) > sent:
            responses.append(pb.ReduceByKeyResponse(keys=uk[sent:].tobytes(), values=uv[sent:].tobytes(),
                                                     run_offset=sent))
        responses.append(pb.ReduceByKeyResponse(
            timing=pb.Timing(algorithm="stand-in", bytes_in=4 * len(x) + len(keys) * keys.itemsize, chunks=len(xs)),
            run_count=len(uk), element_count=len(x)))
        yield from self.answer(responses)


stand_in = keyed.stand_in_fixture(StandIn)


def test_requests_on_the_wire(stand_in, rng):
    """Header in the first request only (alone for an empty array); each request's values and
    keys cover the same elements, chunk_bytes // max(value size, key size) of them; runs that
    arrive in several responses are joined in order."""
    srv, target = stand_in()
    x = ref.random_array(rng, np.dtype("int32"), 1000)
    with gpuscan.Client(target, chunk_bytes=100, timeout=30) as c:
        for keys, ksz in ((rng.integers(0, 3, 1000).astype(np.int64), 8),
                          (rng.integers(0, 3, 1000).astype(np.uint32), 4),
                          ((np.arange(1000) // 37).astype(np.int32), 4)):
            k, v = c.reduce_by_key(x, keys)
            check((k, v), x, keys, "sum")
            keyed.assert_paired_requests(srv.requests, 1000, 100 // max(4, ksz), ksz)
            assert c.last_timing.algorithm == "stand-in" and c.last_timing.chunks == len(srv.requests)
    keyed.assert_edge_requests(srv, target, lambda c, x, keys: c.reduce_by_key(x, keys))


def test_retries(stand_in, rng):
    """A failed try's runs are dropped and the call starts over; the async client too."""
    srv, target = stand_in(fail=2)
    x = ref.random_array(rng, np.dtype("int32"), 500)
    keys = (np.arange(500) // 13).astype(np.int64)
    want = rbk_ref(x, keys, "sum")

    def check(got):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    keyed.assert_retried(srv, target, lambda c, **kw: c.reduce_by_key(x, keys, **kw), check)


def _count(rs):
    rs[-1].run_count += 1
    return rs


def _after_final(rs):
    return rs + [pb.ReduceByKeyResponse(keys=b"\x00" * 8, values=b"\x00" * 4, run_offset=rs[-1].run_count)]


def _split_run(rs):  # a run cut in two: adjacent runs with the same key
    k = np.frombuffer(rs[0].keys, np.int64).copy()
    v = np.frombuffer(rs[0].values, np.int32).copy()
    k[1] = k[0]
    rs[0].keys, rs[0].values = k.tobytes(), v.tobytes()
    return rs


def _final_with_runs(rs):
    last = rs.pop()
    rs[-1].timing.CopyFrom(last.timing)
    rs[-1].run_count, rs[-1].element_count = last.run_count, last.element_count
    return rs


@pytest.mark.parametrize("mangle", [keyed.shift("run_offset", 1), keyed.shift("run_offset", -1),
                                    *keyed.MANGLED_PIECES, _count, _after_final, _split_run, _final_with_runs])
def test_malformed_answers(stand_in, rng, mangle):
    """Whatever does not add up is gpuscan.Internal, not a wrong result, and is not retried."""
    srv, target = stand_in(mangle=mangle)
    x = ref.random_array(rng, np.dtype("int32"), 600)
    keys = (np.arange(600) // 5).astype(np.int64)
    keyed.assert_internal_and_not_retried(srv, target, 128, lambda c: c.reduce_by_key(x, keys))


# -- refusals

def test_client_refusals_before_any_call(rng):
    """ValueError (InvalidArgument for a bitwise operator on floats, as scan's) without a call:
    the target does not exist."""
    x = ref.random_array(rng, np.dtype("float32"), 10)
    k = np.arange(10, dtype=np.int32)
    with gpuscan.Client("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(ValueError, match="reduce_by_key needs keys"):
            c.reduce_by_key(x, None)
        with pytest.raises(TypeError):
            c.reduce_by_key(x)  # keys are required
        with pytest.raises(TypeError):
            c.reduce_by_key(x, heads=np.ones(10, bool))  # no head flags here
        keyed.assert_keys_refused(c.reduce_by_key, x, k)
        keyed.assert_keys_refused(c.reduce_by_key, x.astype(np.float64), k)
        with pytest.raises(ValueError, match=r"keys has 11 elements but x has 10"):
            c.reduce_by_key(x, np.arange(11))
        with pytest.raises(ValueError, match="1-D"):
            c.reduce_by_key(x.reshape(2, 5), k)


def raw_call(target, header, data=b"", keys=b""):
    """One ReduceByKey with a header the client would not build."""
    return raw.call(target, "ReduceByKey", pb.ReduceByKeyRequest(header=header, data=data, keys=keys))


def test_server_refusals(target):
    f4 = np.ones(4, np.float32).tobytes()
    k4 = np.arange(4, dtype=np.int32).tobytes()
    for op in (pb.OPERATOR_BIT_AND, pb.OPERATOR_BIT_OR, pb.OPERATOR_BIT_XOR):
        with pytest.raises(gpuscan.InvalidArgument):
            raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=op, key_dtype=pb.DTYPE_INT32), f4, k4)
    for kd in (pb.DTYPE_UNSPECIFIED, pb.DTYPE_FLOAT32, pb.DTYPE_FLOAT64):
        with pytest.raises(gpuscan.InvalidArgument):
            raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, key_dtype=kd), f4, k4)
    with pytest.raises(gpuscan.InvalidArgument):  # 3 keys for 4 values
        raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, key_dtype=pb.DTYPE_INT32),
                 f4, k4[:12])
    with pytest.raises(gpuscan.InvalidArgument):  # not a whole number of keys
        raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, key_dtype=pb.DTYPE_INT64),
                 f4, k4[:14])
    with pytest.raises(gpuscan.InvalidArgument):  # element_count differs
        raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, key_dtype=pb.DTYPE_INT32,
                                              element_count=5), f4, k4)
    got = raw_call(target, pb.ReduceByKeyHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, key_dtype=pb.DTYPE_UINT32),
                   f4, np.array([7, 7, 1, 7], np.uint32).tobytes())
    assert np.frombuffer(b"".join(r.keys for r in got), np.uint32).tolist() == [7, 1, 7]
    assert np.frombuffer(b"".join(r.values for r in got), np.float32).tolist() == [2, 1, 1]
    assert got[-1].run_count == 3 and got[-1].element_count == 4 and got[-1].HasField("timing")


def test_async_client(target, rng):
    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=CHUNK, timeout=60) as c:
            for dtype in ref.DTYPES:
                for op in ref.ops_for(dtype):
                    per = per_chunk(dtype, "uint64")
                    n = 3 * per + 1
                    x = values(rng, dtype, n, op)
                    keys = make_keys(rng, n, "runs", per, "uint64")
                    check(await c.reduce_by_key(x, keys, op=op), x, keys, op, f"{dtype} {op}")
                    assert c.last_timing.chunks == -(-n // per)
            x = ref.random_array(rng, np.dtype("float64"), 10)
            with pytest.raises(ValueError, match="reduce_by_key needs keys"):
                await c.reduce_by_key(x, None)
            with pytest.raises(ValueError, match="keys has 3 elements but x has 10"):
                await c.reduce_by_key(x, [1, 2, 3])
            with pytest.raises(ValueError, match="keys must be an integer array"):
                await c.reduce_by_key(x, np.zeros(10))
            with pytest.raises(gpuscan.InvalidArgument):
                await c.reduce_by_key(x, np.zeros(10, np.int32), op="bit_or")
            k, v = await c.reduce_by_key(np.zeros(0, np.float32), np.zeros(0, np.int16))
            assert k.dtype == np.int32 and v.dtype == np.float32 and k.shape == v.shape == (0,)
            parts = [ref.random_array(rng, np.dtype("int32"), k * 700) for k in range(1, 5)]

            async def one(p):  # last_timing is per task
                got = await c.reduce_by_key(p, np.arange(len(p)) // 100)
                await asyncio.sleep(0.01)
                return got, c.last_timing.chunks
            for p, (got, chunks) in zip(parts, await asyncio.gather(*(one(p) for p in parts))):
                check(got, p, np.arange(len(p)) // 100, "sum")
                assert chunks == -(-len(p) // 512)  # int64 keys: 512 elements a chunk
    asyncio.run(main())
