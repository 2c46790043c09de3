"""sort / argsort against a stand-in server (a keyed.StandIn that sorts by the reference in
sort_reference.py): the hand-framed requests are SortRequest's bytes and the assembler reads its
responses, the headers the client builds, the requests on the wire (header in the first request
only, keys and values of the same elements together, chunk_bytes // max(key size, value size) a
request), retries (a failed try's pieces dropped, the call started over; the async client too), and
malformed answers and indices (gpuscan.Internal, not retried). Results against numpy and the
refusals: test_sort.py."""
import asyncio

import numpy as np
import pytest

import gpuscan
import keyed
import reference as ref
from gpuscan import _checks, _chunking, _ops, _wire
from gpuscan.v1 import gpuscan_pb2 as pb
from keyed import FAST
from sort_reference import bits, random_keys, ref_argsort


def test_framing_matches_generated_messages():
    """The hand-framed requests are SortRequest's bytes; the assembler reads its responses."""
    x = np.arange(300, dtype=np.float32)[::-1].copy()
    v = np.arange(300, dtype=np.uint64)
    first = pb.SortRequest(header=pb.SortHeader(dtype=pb.DTYPE_FLOAT32, output=pb.SORT_OUTPUT_KEYS_AND_VALUES,
                                                values_dtype=pb.DTYPE_UINT64, element_count=300))
    reqs = list(_chunking.data_requests(first, _wire.SORT_KEYS, x, 128, v, flags_field=_wire.SORT_VALUES))
    assert reqs[0] == pb.SortRequest(header=first.header, keys=x[:128].tobytes(),
                                     values=v[:128].tobytes()).SerializeToString()
    assert reqs[2] == pb.SortRequest(keys=x[256:].tobytes(), values=v[256:].tobytes()).SerializeToString()
    asm = _chunking.SortAssembler(x.dtype, v.dtype, pb.SORT_OUTPUT_KEYS_AND_VALUES, False, 300)
    order = ref_argsort(x)
    for r in (pb.SortResponse(keys=x[order[:100]].tobytes(), values=v[order[:100]].tobytes()),
              pb.SortResponse(keys=x[order[100:]].tobytes(), values=v[order[100:]].tobytes(), offset=100),
              pb.SortResponse(timing=pb.Timing(chunks=3), element_count=300)):
        asm.feed(r.SerializeToString())
    k, vv, i = asm.result()
    assert k.tolist() == sorted(x.tolist()) and vv.tolist() == v[order].tolist() and i is None
    assert asm.timing.chunks == 3


def test_requests_built_by_the_client():
    """Header fields per call (output, descending, values_dtype, element_count), before any call."""
    with gpuscan.Client("127.0.0.1:1", chunk_bytes=100) as c:
        x = np.arange(30, dtype=np.int32)
        _, side, r = _checks.sort_args(x, None, False, pb.SORT_OUTPUT_KEYS)
        assert side is None and r == pb.SortRequest(header=pb.SortHeader(dtype=pb.DTYPE_INT32, element_count=30))
        assert _ops.sort_per(c.chunk_bytes, x, side) == 25
        _, side, r = _checks.sort_args(x, np.zeros(30, np.float64), True, pb.SORT_OUTPUT_KEYS)
        assert r.header == pb.SortHeader(dtype=pb.DTYPE_INT32, descending=True, element_count=30,
                                         output=pb.SORT_OUTPUT_KEYS_AND_VALUES, values_dtype=pb.DTYPE_FLOAT64)
        assert _ops.sort_per(c.chunk_bytes, x, side) == 12
        _, _, r = _checks.sort_args(np.zeros(0, np.uint64), None, False, pb.SORT_OUTPUT_KEYS_AND_INDICES)
        assert r.header.output == pb.SORT_OUTPUT_KEYS_AND_INDICES and r.header.HasField("element_count")


class StandIn(keyed.StandIn):
    """Sort by the reference: records each request's (header present, keys, values) lengths;
    answers after the upload in pieces of `piece` elements, then the final response. Fails its
    first `fail` calls with UNAVAILABLE after one wrong piece; `mangle(responses)` rewrites the
    answer (malformed servers)."""

    def __init__(self, fail=0, mangle=None, piece=100):
        super().__init__(fail, mangle)
        self.piece = piece

    def Sort(self, request_iterator, context):
        failing = self.begin()
        header, ks, vs, seen = None, [], [], []
        for r in request_iterator:
            if r.HasField("header"):
                header = r.header
            seen.append((r.HasField("header"), len(r.keys), len(r.values)))
            ks.append(r.keys)
            vs.append(r.values)
        self.requests = seen
        keys = np.frombuffer(b"".join(ks), ref.DTYPES[header.dtype - 1])
        out = header.output
        vals = np.frombuffer(b"".join(vs), ref.DTYPES[header.values_dtype - 1]) \
            if out == pb.SORT_OUTPUT_KEYS_AND_VALUES else None
        order = ref_argsort(keys, header.descending)
        if failing:  # one well-formed piece, wrong: a retry must not keep it
            yield pb.SortResponse(keys=b"" if out == pb.SORT_OUTPUT_INDICES else keys[:1].tobytes(),
                                  values=b"" if vals is None else vals[:1].tobytes(),
                                  indices=np.zeros(1 if out >= pb.SORT_OUTPUT_INDICES else 0, np.int64).tobytes())
            self.refuse(context)
        responses = []
        for s in range(0, len(keys), self.piece):
            o = order[s:s + self.piece]
            r = pb.SortResponse(offset=s)
            if out != pb.SORT_OUTPUT_INDICES:
                r.keys = keys[o].tobytes()
            if vals is not None:
                r.values = vals[o].tobytes()
            if out in (pb.SORT_OUTPUT_INDICES, pb.SORT_OUTPUT_KEYS_AND_INDICES):
                r.indices = o.astype(np.int64).tobytes()
            responses.append(r)
        responses.append(pb.SortResponse(
            timing=pb.Timing(algorithm="stand-in", bytes_in=sum(map(len, ks)) + sum(map(len, vs)), chunks=len(ks)),
            element_count=len(keys)))
        yield from self.answer(responses)


stand_in = keyed.stand_in_fixture(StandIn)


def test_requests_on_the_wire(stand_in, rng):
    """Header in the first request only (alone for an empty array); each request's keys and values
    cover the same elements, chunk_bytes // max(key size, value size) of them; pieces joined in
    order."""
    srv, target = stand_in()
    x = random_keys(rng, np.dtype("int32"), 1000, distinct=20)
    with gpuscan.Client(target, chunk_bytes=100, timeout=30) as c:
        for vals, vsz in ((None, 0), (random_keys(rng, np.dtype("float64"), 1000), 8),
                          (random_keys(rng, np.dtype("uint32"), 1000), 4)):
            want = ref_argsort(x, True)
            got = c.sort(x, values=vals, descending=True)
            if vals is None:
                assert got.tolist() == x[want].tolist()
            else:
                assert got[0].tolist() == x[want].tolist() and bits(got[1]).tolist() == bits(vals[want]).tolist()
            keyed.assert_paired_requests(srv.requests, 1000, 100 // max(4, vsz), vsz)
            assert c.last_timing.algorithm == "stand-in" and c.last_timing.chunks == len(srv.requests)
    keyed.assert_edge_requests(srv, target, lambda c, x, values: c.sort(x, values=values))


def test_retries(stand_in, rng):
    """A failed try's pieces are dropped and the call starts over; the async client too."""
    srv, target = stand_in(fail=2)
    x = random_keys(rng, np.dtype("float32"), 500, distinct=10)
    v = np.arange(500, dtype=np.int32)
    want = ref_argsort(x)

    def check(got):
        k, sv = got
        assert bits(k).tolist() == bits(x[want]).tolist() and sv.tolist() == want.tolist()
    keyed.assert_retried(srv, target, lambda c, **kw: c.sort(x, values=v, **kw), check)
    srv.fail = srv.calls + 1

    async def argsorted():
        async with gpuscan.AsyncClient(target, chunk_bytes=64, timeout=30, retries=1, backoff=FAST) as ac:
            return await ac.argsort(x)
    assert asyncio.run(argsorted()).tolist() == want.tolist() and srv.calls == 7


def _unasked_indices(rs):
    rs[0].indices = np.arange(len(rs[0].keys) // 4, dtype=np.int64).tobytes()
    return rs


def _missing_piece(rs):
    del rs[-2]
    return rs


def _after_final(rs):
    return rs + [pb.SortResponse(keys=b"\x00" * 4, values=b"\x00" * 4, offset=rs[-1].element_count)]


def _final_with_elements(rs):
    last = rs.pop()
    rs[-1].timing.CopyFrom(last.timing)
    rs[-1].element_count = last.element_count
    return rs


def _out_of_order(rs):  # two keys swapped (they differ: few duplicates at the start of the sorted order)
    k = np.frombuffer(rs[0].keys, np.int32).copy()
    k[[0, -1]] = k[[-1, 0]]
    rs[0].keys = k.tobytes()
    return rs


@pytest.mark.parametrize("mangle", [keyed.shift("offset", 1), keyed.shift("offset", -1), *keyed.MANGLED_PIECES,
                                    _unasked_indices, _missing_piece, _after_final, _final_with_elements,
                                    _out_of_order])
def test_malformed_answers(stand_in, rng, mangle):
    """Whatever does not add up is gpuscan.Internal, not a wrong result, and is not retried."""
    srv, target = stand_in(mangle=mangle)
    x = rng.permutation(600).astype(np.int32)
    v = np.arange(600, dtype=np.int32)
    keyed.assert_internal_and_not_retried(srv, target, 128, lambda c: c.sort(x, values=v))


def _swap_indices(rs):  # equal keys with their indices swapped: not stable
    i = np.frombuffer(rs[0].indices, np.int64).copy()
    i[[0, 1]] = i[[1, 0]]
    rs[0].indices = i.tobytes()
    return rs


def _index_out_of_range(rs):
    i = np.frombuffer(rs[-2].indices, np.int64).copy()
    i[-1] = 600
    rs[-2].indices = i.tobytes()
    return rs


def _keys_without_indices(rs):
    rs[0].indices = rs[0].indices[:-8]
    return rs


@pytest.mark.parametrize("mangle", [_swap_indices, _index_out_of_range, _keys_without_indices])
def test_malformed_indices(stand_in, mangle):
    srv, target = stand_in(mangle=mangle)
    x = np.repeat(np.arange(6, dtype=np.int64), 100)[::-1].copy()  # ties everywhere
    with gpuscan.Client(target, chunk_bytes=128, timeout=30) as c:
        with pytest.raises(gpuscan.Internal):
            c.argsort(x, return_keys=True)
        if mangle is not _swap_indices:  # without the keys a swap cannot be seen
            with pytest.raises(gpuscan.Internal):
                c.argsort(x)
