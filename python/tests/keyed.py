"""What the tests of the keyed operations (segmented_scan, reduce_by_key) and of sort share: random
values, runs of keys, sizes around the chunk boundaries, and the stand-in servers' bookkeeping
(calls failed on purpose, answers mangled into malformed ones, the requests seen)."""
import asyncio
import threading

import grpc
import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan import _chunking
from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

CHUNK = 4096  # bytes per request: 1024 int32 / 512 int64 elements, a few chunks for a few thousand
PATTERNS = ["singles", "runs", "one"]
FAST = (0.01, 0.05)  # retry backoff for tests

# Three key values per dtype, each pair differing (64-bit ones only above bit 32).
_KEY_VALUES = {"int32": [-5, 7, 1 << 30], "uint32": [7, 7 + (1 << 31), 0xFFFFFFFF],
               "int64": [7, 7 + (1 << 40), 7 - (1 << 40)], "uint64": [7, 7 + (1 << 40), 7 + (1 << 63)]}


def values(rng, dtype, n, op):
    """Random, never all zero; float products near 1 (no under/overflow over long runs), NaN and
    inf among float min/max inputs (NaN propagates within its run only)."""
    if dtype.kind == "f" and op == "product":
        return np.exp(rng.normal(0, 0.02, n)).astype(dtype)
    x = ref.random_array(rng, dtype, n, op)
    if dtype.kind == "f" and op in ("min", "max") and n > 2:
        x[rng.random(n) < 0.01] = np.nan
        x[rng.integers(0, n)] = np.inf if op == "min" else -np.inf
    return x


def run_starts(rng, n, pattern, per):
    """Where the runs of an n-element array begin (a bool mask): every element its own run,
    random runs (short ones and long ones spanning chunks of `per` elements), or one run."""
    s = np.zeros(n, bool)
    if pattern == "singles":
        s[:] = True
    elif pattern == "one":
        s[:1] = True
    else:
        at = 0
        while at < n:
            s[at] = True
            at += int(rng.integers(1, 5)) if rng.random() < 0.7 else int(rng.integers(per // 2, 5 * per // 2 + 2))
    return s


def run_keys(rng, starts, pattern, kind):
    """Keys of dtype `kind` whose runs begin at `starts`: each run's key differs from the one before."""
    n = len(starts)
    run = np.cumsum(starts) - 1
    choice = np.zeros(int(starts.sum()), np.int64)
    if len(choice) > 1:
        choice[1:] = rng.integers(1, 3, len(choice) - 1)
        choice = np.cumsum(choice) % 3
    if pattern == "one" and n:
        choice[:] = int(rng.integers(0, 3))
    return np.array(_KEY_VALUES[kind], dtype=np.dtype(kind))[choice[run]] if n else np.zeros(0, kind)


def per_chunk(dtype, kind, chunk=CHUNK):
    """Elements a request carries: values and keys (or head bytes) of the same elements together."""
    return _chunking.chunk_elements(chunk, max(dtype.itemsize, 1 if kind == "heads" else np.dtype(kind).itemsize))


def sizes(per):
    return sorted({0, 1, 2, per - 1, per, per + 1, 3 * per + 5})


def cases_in_turn(dtype, turn: int, kinds):
    """(kind, per, n, pattern): every length and pattern, the key kinds taken in turn from `turn`
    (so each dtype and operator meets every kind): each length and pattern once, with one kind;
    the longest with every kind."""
    for n_kind in range(len(kinds)):
        kind = kinds[(turn + n_kind) % len(kinds)]
        per = per_chunk(dtype, kind)
        for i, n in enumerate(sizes(per)):
            for pattern in (PATTERNS if n > 2 else PATTERNS[:1]):
                if (i + PATTERNS.index(pattern)) % len(kinds) == n_kind or n == 3 * per + 5:
                    yield kind, per, n, pattern


def assert_keys_refused(call, x, k):
    """What a keyed call(x, keys, **kw) refuses before any call, as every one does (ValueError; a
    bitwise operator on floats x: InvalidArgument): keys that are not integers, of another
    length, not 1-D; a dtype not served; an unknown operator; a bad timeout or retries."""
    for bad in (k.astype(np.float32), k.astype(np.float64), k % 2 == 0, k.astype(np.float16)):
        with pytest.raises(ValueError, match="keys must be an integer array"):
            call(x, bad)
    with pytest.raises(ValueError, match=r"keys has 9 elements but x has 10"):
        call(x, k[:9])
    with pytest.raises(ValueError, match="1-D"):
        call(x, k.reshape(2, 5))
    with pytest.raises(ValueError, match="not served"):
        call(x.astype(np.complex64), k)
    with pytest.raises(ValueError, match="unknown operator"):
        call(x, k, op="mean")
    with pytest.raises(ValueError, match="timeout"):
        call(x, k, timeout=-1)
    with pytest.raises(ValueError, match="retries"):
        call(x, k, retries=-1)
    for op in ("bit_and", "bit_or", "bit_xor"):
        with pytest.raises(gpuscan.InvalidArgument, match="bitwise"):
            call(x, k, op=op)


def assert_paired_requests(requests, n, per, key_size, item=4):
    """A stand-in's (header present, data bytes, side bytes) per request: the header in the first
    only, each request's data and its side (keys, heads, values; key_size 0: none) covering the
    same `per` elements (fewer in the last)."""
    assert [r[0] for r in requests] == [True] + [False] * (len(requests) - 1)
    assert [r[1] // item for r in requests] == [min(per, n - s) for s in range(0, n, per)]
    assert all(r[1] % item == 0 and r[2] == (r[1] // item) * key_size for r in requests)


def assert_edge_requests(srv, target, call):
    """call(client, x, side) of int32 x and int64 keys or values: an empty array sends its header
    alone; chunk_bytes below one element, one element a request."""
    with gpuscan.Client(target, chunk_bytes=100, timeout=30) as c:
        call(c, np.zeros(0, np.int32), np.zeros(0, np.int64))
        assert srv.requests == [(True, 0, 0)]
    with gpuscan.Client(target, chunk_bytes=3, timeout=30) as c:
        call(c, np.arange(5, dtype=np.int32), np.arange(5, dtype=np.int64))
        assert [r[1:] for r in srv.requests] == [(4, 8)] * 5


class StandIn(pb_grpc.GpuScanServicer):
    """A stand-in server's bookkeeping: its calls (the first `fail` of them fail with
    UNAVAILABLE), the requests of the last one, and `mangle(responses)` to rewrite an answer
    (malformed servers)."""

    def __init__(self, fail=0, mangle=None):
        self.fail, self.mangle, self.calls, self.requests = fail, mangle, 0, []
        self.lock = threading.Lock()

    def begin(self) -> bool:
        """A call begins: whether it is to fail."""
        with self.lock:
            self.calls += 1
            return self.calls <= self.fail

    def refuse(self, context) -> None:
        context.abort(grpc.StatusCode.UNAVAILABLE, f"stand-in: call {self.calls} fails")

    def answer(self, responses):
        return responses if self.mangle is None else self.mangle(responses)


# -- malformed answers: mangle(responses) for a StandIn, the same for every operation's responses
def shift(field: str, by: int):
    """The second piece claims to start `by` elements (or runs: field "run_offset") later: a gap
    (by > 0) or an overlap (by < 0)."""
    def mangle(rs):
        setattr(rs[1], field, getattr(rs[1], field) + by)
        return rs
    mangle.__name__ = "_gap" if by > 0 else "_overlap"
    return mangle


def _short_values(rs):
    rs[0].values = rs[0].values[:-4]
    return rs


def _ragged_keys(rs):
    rs[0].keys = rs[0].keys[:-1]
    return rs


def _elements(rs):
    rs[-1].element_count -= 1
    return rs


def _no_final(rs):
    return rs[:-1]


MANGLED_PIECES = [_short_values, _ragged_keys, _elements, _no_final]


def stand_in_fixture(cls):
    """A fixture: start(**kw) -> (a new cls(**kw), the target of a server running it)."""
    @pytest.fixture()
    def stand_in(serve_servicer):
        def start(**kw):
            servicer = cls(**kw)
            return servicer, serve_servicer(servicer)
        return start
    return stand_in


def assert_retried(srv, target, call, check):
    """call(client, **kw) against a stand-in that fails its first two calls (fail=2): the first
    failure raised without retries; with retries=1 the third call answers (check(result); on_retry
    told of try 2); then an AsyncClient with retries=2 through one more failed call. A failed
    try's pieces are dropped: the call starts over."""
    seen = []
    with gpuscan.Client(target, chunk_bytes=64, timeout=30, backoff=FAST, retries=0,
                        on_retry=lambda e, n, w: seen.append(n)) as c:
        with pytest.raises(gpuscan.Unavailable, match="call 1 fails"):
            call(c)
        check(call(c, retries=1))
        assert srv.calls == 3 and seen == [2] and c.last_timing.algorithm == "stand-in"
    srv.fail = srv.calls + 1

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=64, timeout=30, retries=2, backoff=FAST) as ac:
            check(await call(ac))
            assert ac.last_timing.algorithm == "stand-in"
    asyncio.run(main())
    assert srv.calls == 5


def assert_internal_and_not_retried(srv, target, chunk_bytes, call):
    """call(client) against a malformed stand-in: gpuscan.Internal, not a wrong result, and not
    retried, from each client (AsyncClient: call returns the coroutine)."""
    with gpuscan.Client(target, chunk_bytes=chunk_bytes, timeout=30, retries=3, backoff=FAST) as c:
        with pytest.raises(gpuscan.Internal):
            call(c)
    assert srv.calls == 1

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=chunk_bytes, timeout=30, retries=3, backoff=FAST) as ac:
            with pytest.raises(gpuscan.Internal):
                await call(ac)
    asyncio.run(main())
    assert srv.calls == 2
