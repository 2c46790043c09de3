"""segmented_scan (Client/AsyncClient) against a numpy reference that scans each segment on its
own, on random data (never all zeros): every dtype x operator x inclusive/exclusive, segments
given by int32/int64/uint32/uint64 keys (values that differ only above bit 32, negative keys) and
by head flags (bool/int8/uint8, any nonzero byte, heads[0] zero or not); lengths 0, 1, 2, around
the chunk boundaries and over several chunks; segments of one element, long ones spanning chunks,
one segment. Integers and float min/max exactly (wrap-around, NaN propagation), float sum/product
close to a float64 reference and bit-identical across chunk sizes, repeats and the async client.
Then the requests on the wire (a stand-in server records them), retries, what the client refuses
(ValueError before any call) and what the server refuses (INVALID_ARGUMENT)."""
import asyncio

import numpy as np
import pytest

import gpuscan
import keyed
import raw
import reference as ref
from gpuscan.v1 import gpuscan_pb2 as pb
from keyed import CHUNK, FAST, per_chunk, values

KEY_KINDS = ["int32", "int64", "uint32", "uint64", "heads"]


@pytest.fixture(scope="module")
def seg_client(target):
    with gpuscan.Client(target, chunk_bytes=CHUNK, timeout=60) as c:
        yield c


# -- reference and inputs

def starts_of(n, keys=None, heads=None):
    """Where segments begin: element 0, then keys[i] != keys[i-1] or heads[i] != 0."""
    s = np.zeros(n, bool)
    if n:
        s[0] = True
        s[1:] = (keys[1:] != keys[:-1]) if keys is not None else (np.asarray(heads)[1:] != 0)
    return s


def segmented_ref(x, starts, op, exclusive, dtype=None):
    """Each segment scanned by numpy (ref.scan), in dtype (default x's)."""
    xx = x if dtype is None else x.astype(dtype)
    out = np.empty_like(xx)
    bounds = np.append(np.flatnonzero(starts), len(x))
    for s, e in zip(bounds[:-1], bounds[1:]):
        if e - s == 1:
            out[s] = ref.identity(op, xx.dtype) if exclusive else xx[s]
        else:
            out[s:e] = ref.scan(xx[s:e], op, exclusive)
    return out


def check(got, x, starts, op, exclusive, what=""):
    """got is x's segmented scan: exact for integers and float min/max, else close to float64."""
    assert got.dtype == x.dtype.newbyteorder("=") and got.shape == x.shape, what
    if exclusive and len(x):  # each segment's first element is the identity, exactly
        np.testing.assert_array_equal(got[starts], np.full(starts.sum(), ref.identity(op, got.dtype)), err_msg=what)
    if x.dtype.kind != "f" or op in ("min", "max"):
        np.testing.assert_array_equal(got, segmented_ref(x, starts, op, exclusive), err_msg=what)
        return
    want = segmented_ref(x, starts, op, exclusive, np.float64)
    eps = float(np.finfo(x.dtype).eps)
    bounds = np.append(np.flatnonzero(starts), len(x))
    longest = int(np.diff(bounds).max()) if len(x) else 1
    if op == "sum":
        scale = segmented_ref(np.abs(x), starts, "sum", exclusive, np.float64)
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= 4 * longest * eps * scale + 1e-30), f"{what}: max err {err.max()}"
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=4 * longest * eps, err_msg=what)


def segments(rng, n, pattern, per, kind):
    """(keys, heads, starts) for one pattern: keys of `kind` (heads None) or heads (keys None)."""
    starts = keyed.run_starts(rng, n, pattern, per)
    if kind == "heads":
        dtype = [np.bool_, np.uint8, np.int8][int(rng.integers(0, 3))]
        heads = np.zeros(n, np.uint8)
        heads[starts] = rng.integers(1, 256, int(starts.sum()))  # any nonzero byte is a head
        if n and rng.random() < 0.5:
            heads[0] = 0  # element 0 begins a segment anyway
        heads = heads.astype(bool) if dtype is np.bool_ else heads.view(dtype)
        return None, heads, starts
    keys = keyed.run_keys(rng, starts, pattern, kind)
    assert np.array_equal(starts_of(n, keys=keys), starts)
    return keys, None, starts


def cases():
    for dtype in ref.DTYPES:
        for op in ref.ops_for(dtype):
            for exclusive in (False, True):
                yield pytest.param(dtype, op, exclusive, id=f"{dtype}-{op}-{'exc' if exclusive else 'inc'}")


# -- results

@pytest.mark.parametrize("dtype,op,exclusive", list(cases()))
def test_against_numpy(seg_client, rng, dtype, op, exclusive):
    """Every length and pattern, the key kinds taken in turn (each dtype/op meets every kind)."""
    for kind, per, n, pattern in keyed.cases_in_turn(dtype, ref.DTYPES.index(dtype) + len(op) + exclusive,
                                                     KEY_KINDS):
        x = values(rng, dtype, n, op)
        keys, heads, starts = segments(rng, n, pattern, per, kind)
        got = seg_client.segmented_scan(x, keys, heads=heads, op=op, exclusive=exclusive)
        check(got, x, starts, op, exclusive, f"n={n} {pattern} {kind}")


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_key_kinds_over_chunks(seg_client, rng, kind):
    """Each key kind over several chunks and lengths around them, exact dtypes."""
    for dtype, op in ((np.dtype("int64"), "sum"), (np.dtype("uint32"), "bit_xor"), (np.dtype("float32"), "max")):
        per = per_chunk(dtype, kind)
        for n in (per - 1, per, per + 1, 2 * per, 5 * per + 3):
            for exclusive in (False, True):
                x = values(rng, dtype, n, op)
                keys, heads, starts = segments(rng, n, "runs", per, kind)
                check(seg_client.segmented_scan(x, keys, heads=heads, op=op, exclusive=exclusive),
                      x, starts, op, exclusive, f"{dtype} {op} n={n}")


def test_segment_shapes(seg_client, rng):
    """One segment is the plain scan; all-singleton segments give x (inclusive) or identities;
    keys that repeat a value after another run start a new segment; heads equal to keys' starts
    give the same result."""
    x = ref.random_array(rng, np.dtype("int32"), 3000)
    one = np.full(3000, 42, np.int64)
    np.testing.assert_array_equal(seg_client.segmented_scan(x, one), seg_client.scan(x))
    np.testing.assert_array_equal(seg_client.segmented_scan(x, one, op="max", exclusive=True),
                                  ref.scan(x, "max", True))
    np.testing.assert_array_equal(seg_client.segmented_scan(x, heads=np.zeros(3000, bool)), ref.scan(x, "sum", False))
    np.testing.assert_array_equal(seg_client.segmented_scan(x, heads=np.ones(3000, bool)), x)
    np.testing.assert_array_equal(seg_client.segmented_scan(x, np.arange(3000, dtype=np.uint32), exclusive=True),
                                  np.zeros(3000, np.int32))
    keys = np.array([1, 1, 2, 2, 1, 1, 1], np.int32)  # 1 again after 2: a third segment
    y = np.array([1, 2, 3, 4, 5, 6, 7], np.int32)
    np.testing.assert_array_equal(seg_client.segmented_scan(y, keys), [1, 3, 3, 7, 5, 11, 18])
    np.testing.assert_array_equal(seg_client.segmented_scan(y, keys, exclusive=True), [0, 1, 0, 3, 0, 5, 11])
    np.testing.assert_array_equal(seg_client.segmented_scan(y, heads=[0, 0, 1, 0, 1, 0, 0]), [1, 3, 3, 7, 5, 11, 18])
    np.testing.assert_array_equal(seg_client.segmented_scan(y, heads=np.array([0, 0, -1, 0, 2, 0, 0], np.int8),
                                                            op="product", exclusive=True), [1, 1, 1, 3, 1, 5, 30])


def test_narrow_and_listed_keys(seg_client, rng):
    """int8/int16 keys widen to int32, uint8/uint16 to uint32; lists are converted."""
    x = ref.random_array(rng, np.dtype("uint64"), 5000)
    for dt in ("int8", "int16", "uint8", "uint16"):
        keys = (rng.random(5000) < 0.05).cumsum().astype(dt)  # wraps: 255 -> 0 still differs from 255
        check(seg_client.segmented_scan(x, keys), x, starts_of(5000, keys=keys), "sum", False, dt)
    y = np.arange(1, 7, dtype=np.float64)
    np.testing.assert_array_equal(seg_client.segmented_scan(y, [3, 3, -1, -1, -1, 9], op="product"),
                                  [1, 2, 3, 12, 60, 6])
    np.testing.assert_array_equal(seg_client.segmented_scan(y, heads=[True, False, True, False, False, True]),
                                  [1, 3, 3, 7, 12, 6])


def test_reproducible_bits(target, seg_client, rng):
    """Float sum and product: the same bits whatever the chunking (and each call's chunk count
    differs), on a repeat, and through the async client; close to float64."""
    n = 20_000
    for dtype in (np.dtype("float32"), np.dtype("float64")):
        for op in ("sum", "product"):
            for kind in ("int64", "heads"):
                x = values(rng, dtype, n, op)
                keys, heads, starts = segments(rng, n, "runs", 4 * per_chunk(dtype, kind), kind)
                for exclusive in (False, True):
                    first = seg_client.segmented_scan(x, keys, heads=heads, op=op, exclusive=exclusive)
                    check(first, x, starts, op, exclusive, f"{dtype} {op} {kind}")
                    with gpuscan.Client(target, chunk_bytes=1000, timeout=60) as small, \
                            gpuscan.Client(target, timeout=60) as big:
                        for c in (seg_client, small, big):
                            again = c.segmented_scan(x, keys, heads=heads, op=op, exclusive=exclusive)
                            assert again.tobytes() == first.tobytes(), f"{dtype} {op} {kind} chunk {c.chunk_bytes}"

                    async def via_async():
                        async with gpuscan.AsyncClient(target, chunk_bytes=333, timeout=60) as ac:
                            return await ac.segmented_scan(x, keys, heads=heads, op=op, exclusive=exclusive)
                    assert asyncio.run(via_async()).tobytes() == first.tobytes()


def test_out_in_place_copy_and_timing(seg_client, rng):
    x = ref.random_array(rng, np.dtype("int64"), 2000)
    keys = (np.arange(2000) // 7).astype(np.int32)
    want = segmented_ref(x, starts_of(2000, keys=keys), "bit_xor", False)
    out = np.full(2000, 3, np.int64)
    assert seg_client.segmented_scan(x, keys, op="bit_xor", out=out) is out
    np.testing.assert_array_equal(out, want)
    t = seg_client.last_timing
    assert isinstance(t, gpuscan.Timing) and t.bytes_in >= x.nbytes and t.chunks == 4  # 512 elements a chunk
    y = x.copy()
    assert seg_client.segmented_scan(y, keys, op="bit_xor", out=y) is y  # in place
    np.testing.assert_array_equal(y, want)
    with pytest.raises(ValueError, match="out must be"):
        seg_client.segmented_scan(x, keys, out=np.empty(1999, np.int64))
    with pytest.raises(ValueError, match="out must be"):
        seg_client.segmented_scan(x, keys, out=np.empty(2000, np.int32))
    # copy=: non-contiguous and big-endian x and keys as scan's x
    xs, ks = x[::2], keys[::2]
    with pytest.raises(ValueError, match="copy=True"):
        seg_client.segmented_scan(xs, np.ascontiguousarray(ks))
    with pytest.raises(ValueError, match="copy=True"):
        seg_client.segmented_scan(np.ascontiguousarray(xs), ks)
    want_s = segmented_ref(xs, starts_of(1000, keys=ks), "sum", True)
    np.testing.assert_array_equal(seg_client.segmented_scan(xs, ks, exclusive=True, copy=True), want_s)
    np.testing.assert_array_equal(seg_client.segmented_scan(xs.astype(">i8"), ks.astype(">i4"), exclusive=True,
                                                            copy=True), want_s)
    h = np.zeros(2000, bool)
    h[::9] = True
    with pytest.raises(ValueError, match="copy=True"):
        seg_client.segmented_scan(np.ascontiguousarray(xs), heads=h[::2])
    np.testing.assert_array_equal(seg_client.segmented_scan(xs, heads=h[::2], copy=True),
                                  segmented_ref(xs, starts_of(1000, heads=h[::2]), "sum", False))
    assert seg_client.segmented_scan(x, keys, timeout=30).shape == (2000,)
    assert seg_client.segmented_scan(x, keys, timeout=0).shape == (2000,)  # 0: no deadline


def test_empty_and_tiny(seg_client):
    for dtype in ref.DTYPES:
        got = seg_client.segmented_scan(np.zeros(0, dtype), np.zeros(0, np.int64))
        assert got.dtype == dtype and got.shape == (0,)
        assert seg_client.last_timing is not None
        assert seg_client.segmented_scan(np.zeros(0, dtype), heads=np.zeros(0, bool)).shape == (0,)
        one = np.ones(1, dtype)
        np.testing.assert_array_equal(seg_client.segmented_scan(one, heads=[0], op="max", exclusive=True),
                                      [ref.identity("max", dtype)])
        np.testing.assert_array_equal(seg_client.segmented_scan(one, np.array([5], np.uint64)), one)


# -- the wire, retries: a stand-in server

class StandIn(keyed.StandIn):
    """SegmentedScan for int32 sums, by the reference: records each request's (header present,
    values, keys) lengths; fails its first `fail` calls with UNAVAILABLE after a wrong chunk (at
    the end of the upload: grpcio's asyncio client loses a status that comes mid-upload,
    grpc/grpc#36066, which is not what this tests)."""

    def SegmentedScan(self, request_iterator, context):
        failing = self.begin()
        header, xs, ks, seen = None, [], [], []
        for r in request_iterator:
            if r.HasField("header"):
                header = r.header
            seen.append((r.HasField("header"), len(r.data), len(r.keys)))
            xs.append(np.frombuffer(r.data, np.int32))
            ks.append(r.keys)
            if failing and len(xs) == 1:
                yield pb.ScanResponse(data=(xs[-1] ^ 0x5A5A).tobytes(), offset=0)
        if failing:
            self.refuse(context)
        self.requests = seen
        x = np.concatenate(xs) if xs else np.zeros(0, np.int32)
        if header.WhichOneof("segments") == "heads":
            starts = starts_of(len(x), heads=np.frombuffer(b"".join(ks), np.uint8))
        else:
            starts = starts_of(len(x), keys=np.frombuffer(b"".join(ks), ref.DTYPES[header.key_dtype - 1]))
        y = segmented_ref(x, starts, "sum", header.kind == pb.SCAN_KIND_EXCLUSIVE)
        offset = 0
        for n_data in (len(c) for c in xs):
            yield pb.ScanResponse(data=y[offset:offset + n_data].tobytes(), offset=offset)
            offset += n_data
        yield pb.ScanResponse(timing=pb.Timing(algorithm="stand-in", bytes_in=4 * len(x), chunks=len(xs)),
                              element_count=len(x))


stand_in = keyed.stand_in_fixture(StandIn)


def test_requests_on_the_wire(stand_in, rng):
    """Header in the first request only (alone for an empty array); each request's values and
    keys cover the same elements, chunk_bytes // max(value size, key size) of them."""
    srv, target = stand_in()
    x = ref.random_array(rng, np.dtype("int32"), 1000)
    with gpuscan.Client(target, chunk_bytes=100, timeout=30) as c:
        for keys, heads, ksz in ((rng.integers(0, 3, 1000).astype(np.int64), None, 8),
                                 (rng.integers(0, 3, 1000).astype(np.uint32), None, 4),
                                 (None, rng.random(1000) < 0.1, 1)):
            got = c.segmented_scan(x, keys, heads=heads, exclusive=True)
            np.testing.assert_array_equal(got, segmented_ref(x, starts_of(1000, keys, heads), "sum", True))
            keyed.assert_paired_requests(srv.requests, 1000, 100 // max(4, ksz), ksz)
            assert c.last_timing.algorithm == "stand-in"
    keyed.assert_edge_requests(srv, target, lambda c, x, keys: c.segmented_scan(x, keys))


def test_retries(stand_in, rng):
    srv, target = stand_in(fail=2)
    x = ref.random_array(rng, np.dtype("int32"), 500)
    keys = (np.arange(500) // 13).astype(np.int64)
    want = segmented_ref(x, starts_of(500, keys=keys), "sum", False)
    out = np.zeros(500, np.int32)

    def check(got):
        assert got is out
        np.testing.assert_array_equal(got, want)
    keyed.assert_retried(srv, target, lambda c, **kw: c.segmented_scan(x, keys, out=out, **kw), check)
    srv.fail = srv.calls + 1
    y = x.copy()
    with gpuscan.Client(target, chunk_bytes=64, timeout=30, backoff=FAST) as c:
        with pytest.raises(gpuscan.Unavailable):  # in place: not retried
            c.segmented_scan(y, keys, out=y, retries=3)
    assert srv.calls == 6


# -- refusals

def test_client_refusals_before_any_call(rng):
    """ValueError (InvalidArgument for a bitwise operator on floats, as scan's) without a call:
    the target does not exist."""
    x = ref.random_array(rng, np.dtype("float32"), 10)
    k = np.arange(10, dtype=np.int32)
    with gpuscan.Client("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(ValueError, match="exactly one of keys"):
            c.segmented_scan(x, k, heads=np.ones(10, bool))
        with pytest.raises(ValueError, match="exactly one of keys"):
            c.segmented_scan(x)
        keyed.assert_keys_refused(c.segmented_scan, x, k)
        with pytest.raises(ValueError, match=r"heads has 11 elements but x has 10"):
            c.segmented_scan(x, heads=np.ones(11, bool))
        with pytest.raises(ValueError, match="heads must be a bool, int8 or uint8"):
            c.segmented_scan(x, heads=k)
        with pytest.raises(ValueError, match="1-D"):
            c.segmented_scan(x, heads=np.ones((2, 5), bool))


def raw_call(target, header, data=b"", keys=b""):
    """One SegmentedScan with a header the client would not build."""
    return raw.call(target, "SegmentedScan", pb.SegmentedScanRequest(header=header, data=data, keys=keys))


def test_server_refusals(target):
    f4 = np.ones(4, np.float32).tobytes()
    k4 = np.arange(4, dtype=np.int32).tobytes()
    inc = pb.SCAN_KIND_INCLUSIVE
    for op in (pb.OPERATOR_BIT_AND, pb.OPERATOR_BIT_XOR):
        with pytest.raises(gpuscan.InvalidArgument):
            raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=op, kind=inc, key_dtype=pb.DTYPE_INT32),
                     f4, k4)
    with pytest.raises(gpuscan.InvalidArgument):  # neither keys nor heads
        raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc), f4, k4)
    for kd in (pb.DTYPE_FLOAT32, pb.DTYPE_FLOAT64):
        with pytest.raises(gpuscan.InvalidArgument):
            raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc, key_dtype=kd),
                     f4, k4)
    with pytest.raises(gpuscan.InvalidArgument):  # 3 keys for 4 values
        raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc,
                                                key_dtype=pb.DTYPE_INT32), f4, k4[:12])
    with pytest.raises(gpuscan.InvalidArgument):  # not a whole number of keys
        raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc,
                                                key_dtype=pb.DTYPE_INT64), f4, k4[:14])
    with pytest.raises(gpuscan.InvalidArgument):  # element_count differs
        raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc,
                                                heads=True, element_count=5), f4, b"\x01\x00\x00\x01")
    got = raw_call(target, pb.SegmentedScanHeader(dtype=pb.DTYPE_FLOAT32, op=pb.OPERATOR_SUM, kind=inc, heads=True),
                   f4, b"\x00\x00\x07\x00")
    data = b"".join(r.data for r in got)
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), [1, 2, 1, 2])


def test_async_client(target, rng):
    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=CHUNK, timeout=60) as c:
            for dtype in ref.DTYPES:
                for op in ref.ops_for(dtype):
                    n = 3 * per_chunk(dtype, "uint64") + 1
                    x = values(rng, dtype, n, op)
                    keys, heads, starts = segments(rng, n, "runs", per_chunk(dtype, "uint64"), "uint64")
                    check(await c.segmented_scan(x, keys, op=op, exclusive=True), x, starts, op, True, f"{dtype} {op}")
                    h = starts_of(n, keys=keys)
                    check(await c.segmented_scan(x, heads=h, op=op), x, starts, op, False, f"{dtype} {op} heads")
                    assert c.last_timing.chunks == -(-n // per_chunk(dtype, "heads"))
            x = ref.random_array(rng, np.dtype("float64"), 10)
            with pytest.raises(ValueError, match="exactly one of keys"):
                await c.segmented_scan(x)
            with pytest.raises(ValueError, match="keys has 3 elements but x has 10"):
                await c.segmented_scan(x, [1, 2, 3])
            with pytest.raises(gpuscan.InvalidArgument):
                await c.segmented_scan(x, np.zeros(10, np.int32), op="bit_or")
            parts = [ref.random_array(rng, np.dtype("int32"), k * 700) for k in range(1, 5)]

            async def one(p):  # last_timing is per task
                y = await c.segmented_scan(p, heads=np.arange(len(p)) % 100 == 0)
                await asyncio.sleep(0.01)
                return y, c.last_timing.chunks
            for p, (y, chunks) in zip(parts, await asyncio.gather(*(one(p) for p in parts))):
                check(y, p, np.arange(len(p)) % 100 == 0, "sum", False)
                assert chunks == -(-len(p) // 1024)
    asyncio.run(main())
