"""gpuscan.dask.persist: blocks kept on the workers' servers (resident arrays), and cumsum, the
reductions, histogram, compact and sort run where they lie, against numpy and against the same
functions on the plain dask array (floats: the same bits). Two CPU servers with --resident-bytes
and a metrics endpoint (to see what crossed the wire), a third without --resident-bytes, and a
LocalCluster of two worker processes. Random data, seeded, never zeros (but the float specials of
the sort test); chunkings with blocks of one element, empty blocks, and sizes one below, at and
one above a multiple of the block size."""
import dataclasses
import os
import pathlib
import re
import sys
import time
import urllib.request

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import gpuscan  # noqa: E402
import gpuscan.dask as gd  # noqa: E402
from gpuscan.dask import _driver  # noqa: E402
from gpuscan.testing import ServerProcess  # noqa: E402
from gpuscan.v1 import gpuscan_pb2 as pb  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # python/tests: reference.py
import reference as ref  # noqa: E402
from test_dask import dask_of, data, rng, server_binary  # noqa: E402  (its fixtures stay in its module)

pytest_plugins = ("dask_cluster",)  # the `cluster` fixture, shared with test_dask.py
RESIDENT = ["--resident-bytes", str(64 << 20), "--cpu-threads", "1"]


def _start(extra):
    return ServerProcess(server_binary(), engine=os.environ.get("GPUSCAN_TEST_ENGINE", "cpu"), extra=extra)


@pytest.fixture(scope="module")
def servers():
    """Two servers keeping resident arrays, each with a metrics endpoint; and one keeping none."""
    procs = [_start(RESIDENT + ["--metrics-address", "127.0.0.1:0"]) for _ in range(2)]
    bare = _start(["--cpu-threads", "1"])
    yield procs, bare
    for p in procs + [bare]:
        p.stop()


@pytest.fixture(scope="module")
def dc(cluster, servers):
    """The session's cluster (dask_cluster.py), gpuscan registered: worker 0 -> server 0, 1 -> 1."""
    with distributed.Client(cluster) as c:
        gd.register(c, [s.target for s in servers[0]], timeout=60)
        yield c


def listed(servers):
    """How many resident arrays each server keeps (the default tenant's, as the workers' clients)."""
    out = []
    for s in servers:
        with gpuscan.Client(s.target) as c:
            out.append(len(c.arrays()))
    return out


def wire(servers):
    """(bytes received, bytes sent) by the servers' successful calls so far (their metrics)."""
    got = [0.0, 0.0]
    for s in servers:
        addr = re.search(r"metrics at http://([^/]+)/metrics", s.log_text()).group(1)
        text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
        for i, name in enumerate(("gpuscan_received_bytes_total", "gpuscan_sent_bytes_total")):
            got[i] += sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))
    return got


CHUNKINGS = {  # sizes around block boundaries: a multiple of the block size, one below, one above
    np.dtype(np.int32): (1, 0, 3000, 3000, 2999),
    np.dtype(np.int64): (3000, 3000, 3001, 0, 1),
    np.dtype(np.float32): (2999, 1, 3000, 3000),
    np.dtype(np.float64): (3000, 0, 3001, 2999, 1),
}


def reductions(dtype):
    """Every operator for int32 and float64, sum and max for the others (the suite's time)."""
    return ref.ops_for(dtype) if dtype in (np.dtype(np.int32), np.dtype(np.float64)) else ["sum", "max"]


def operations(a, mask, dtype, lo, hi):
    """Every function on a (a dask array or a persisted one): cumsum (both kinds), cummax, the
    reductions, histogram, compact (the mask with indices; a predicate), sort."""
    vals, idx = gd.compact(a, where=mask, indices=True)
    return [gd.cumsum(a), gd.cumsum(a, exclusive=True), gd.cummax(a), *[gd.reduce(a, op) for op in reductions(dtype)],
            gd.histogram(a, 16, range=(lo, hi))[0], vals, idx, gd.compact(a, predicate=("gt", 0)), gd.sort(a)]


def test_persisted_operations_as_numpy_and_the_plain_path(dc, servers):
    """Every function on persisted arrays of int32, int64, float32 and float64 against numpy, and
    for floats the bits of the same functions on the plain dask array (same chunks; integers:
    numpy's exactly). While they run the servers receive no array data (the blocks are theirs: a
    resident call's header counts no bytes) and send the results. One compute for all persisted
    results, one for the plain path's."""
    cases, persisted, plain = [], [], []
    for dtype, chunks in CHUNKINGS.items():
        n = sum(chunks)
        xn = data(dtype, n, salt=20)
        mn = rng(21, dtype.num).random(n) < 0.4
        x, m = dask_of(xn, chunks), dask_of(mn, chunks)
        lo, hi = float(xn.min()), float(xn.max())
        both = gd.persist(x, m, label=f"test {dtype}")
        p, pm = both
        assert isinstance(p, gd.PersistedArray) and p.chunks == x.chunks and p.dtype == dtype and pm.dtype == bool
        assert set(p.targets) == {s.target for s in servers[0]}, p.targets  # blocks on both servers
        cases.append((dtype, xn, mn, lo, hi, both))
        persisted.append(operations(p, pm, dtype, lo, hi))
        plain.append((operations(x, m, dtype, lo, hi) if dtype.kind == "f" else []) + [p.to_dask()])
    try:
        assert sum(listed(servers[0])) == 2 * sum(sum(1 for c in ch if c) for ch in CHUNKINGS.values())
        before = wire(servers[0])
        got = dask.compute(*persisted)
        after = wire(servers[0])
        want = dask.compute(*plain)
    finally:
        for case in cases:
            case[-1].release()
    assert listed(servers[0]) == [0, 0]
    assert after[0] == before[0], (before, after)  # no block crossed the wire again
    assert after[1] - before[1] >= 4 * sum(case[1].nbytes for case in cases)  # the results did (3 scans, a sort)
    for (dtype, xn, mn, lo, hi, _), g, w in zip(cases, got, want):
        np.testing.assert_array_equal(w[-1], xn)  # to_dask: the blocks read back
        for i, (a, b) in enumerate(zip(g, w[:-1])):
            assert a.dtype == b.dtype and np.asarray(a).tobytes() == np.asarray(b).tobytes(), (dtype, i)
        ops = reductions(dtype)
        ref.assert_scan_close(g[0], ref.scan(xn, "sum", False), xn, "sum")
        ref.assert_scan_close(g[1], ref.scan(xn, "sum", True), xn, "sum")
        np.testing.assert_array_equal(g[2], np.maximum.accumulate(xn))
        for op, v in zip(ops, g[3:3 + len(ops)]):
            if op != "product" or dtype.kind != "f":  # thousands of normal factors: 0 or inf (the bits: above)
                ref.assert_value_close(v, ref.reduce(xn, op), xn, op)
        k = 3 + len(ops)
        np.testing.assert_array_equal(g[k], np.histogram(xn, np.linspace(lo, hi, 17))[0])
        np.testing.assert_array_equal(g[k + 1], xn[mn])
        np.testing.assert_array_equal(g[k + 2], np.flatnonzero(mn))
        np.testing.assert_array_equal(g[k + 3], xn[xn > 0])
        np.testing.assert_array_equal(g[k + 4], np.sort(xn))  # no NaN or -0.0: numpy's order


def test_sort_in_total_order_as_one_server_sort(dc, servers):
    """NaNs of both signs, signed zeros and infinities: the bits of one gpuscan sort of the whole
    array, ascending (plain and persisted) and descending (persisted: the graph is the same);
    uint64 and an empty array too."""
    r = rng(22)
    xn = r.uniform(-5, 5, 5000)
    specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], np.float64)
    xn[r.integers(0, len(xn), 600)] = r.choice(specials, 600)
    un = r.integers(1, 2**64 - 1, 3001, dtype=np.uint64)
    cases, lazy, held = [], [], []
    with gpuscan.Client(servers[0][0].target) as c:
        for xs, chunks in ((xn.astype(np.float32), (1, 0, 1999, 2000, 1000)), (xn, (2500, 2500)),
                           (un, (1000, 1000, 1001)), (np.zeros(0, np.int32), (0,))):
            x = dask_of(xs, chunks)
            held.append(gd.persist(x))
            for descending, a in ((False, x), (False, held[-1]), (True, held[-1])):  # one graph: both ways
                cases.append((c.sort(xs, descending=descending), xs.dtype, descending, type(a).__name__))
                lazy.append(gd.sort(a, descending=descending))
                assert lazy[-1].numblocks == x.numblocks and np.isnan(lazy[-1].chunks[0][0])
    try:
        got = dask.compute(*lazy)
    finally:
        for p in held:
            p.release()
    for (want, *what), g in zip(cases, got):
        assert g.tobytes() == want.tobytes() and g.dtype == want.dtype, what


def test_persist_of_unknown_chunks_and_to_dask(dc, servers):
    """A compact's output (chunks of unknown size) persists with its sizes known; to_dask reads it back."""
    xn = data(np.dtype(np.int64), 9001, salt=23)
    kept = gd.compact(dask_of(xn, 2000), predicate=("gt", 0))
    with gd.persist(kept) as p:
        assert p.chunks[0] == tuple(int((b > 0).sum()) for b in np.array_split(xn, [2000, 4000, 6000, 8000]))
        assert p.to_dask().chunks == p.chunks and p.shape == ((xn > 0).sum(),) and len(p) == p.size
        np.testing.assert_array_equal(p.compute(), xn[xn > 0])
        np.testing.assert_array_equal(gd.cumsum(p).compute(), np.cumsum(xn[xn > 0]))
        assert "PersistedArray" in repr(p) and p.numblocks == (5,) and p.nbytes == p.size * 8
    assert "released" in repr(p)


def test_release_drops_every_block(dc, servers):
    """release() (and drop(), and leaving `with`) drops every block on both servers; a second one
    does nothing; a persisted array used after it says so, and a result built before it fails
    naming the block that is gone."""
    xn = data(np.dtype(np.float64), 6001, salt=24)
    p = gd.persist(dask_of(xn, 1000))
    q, qm = gd.persist(dask_of(xn, 1000), dask_of(xn > 0, 1000))
    assert sum(listed(servers[0])) == 7 + 14
    lazy = gd.cumsum(p)
    assert p.release() == 7 and p.released and p.release() == 0
    assert q.drop() == 7 and qm.release() == 7
    assert listed(servers[0]) == [0, 0]
    with pytest.raises(ValueError, match="released"):
        gd.cumsum(p)
    with pytest.raises(gpuscan.NotFound, match="persisted block"):
        lazy.compute()


def expiries(servers):
    """{array id: when its server would drop it (Unix seconds)} of every resident array."""
    out = {}
    for s in servers:
        with gpuscan.Client(s.target) as c:
            out.update({r.id: r.expires for r in c.arrays()})
    return out


def test_ttl_and_renew(dc, servers):
    """persist(ttl=) sets each block's ttl and renew() restarts it (the servers' expiry moves
    on); blocks unused past their ttl are dropped, and a call on them says so."""
    xn = data(np.dtype(np.int32), 4000, salt=25)
    with gd.persist(dask_of(xn, 1000), ttl=60) as p:
        first = expiries(servers[0])
        assert sorted(first) == sorted(b.id for b in p.blocks)
        assert all(55 < t - time.time() <= 60.5 for t in first.values()), first
        time.sleep(0.3)
        assert p.renew() == 4
        assert all(t >= first[i] + 0.25 for i, t in expiries(servers[0]).items())
    with gd.persist(dask_of(xn, 1000), ttl=0.3) as p:
        time.sleep(0.8)  # the ttl, and the server's sweep (within 0.2 s)
        assert listed(servers[0]) == [0, 0]
        with pytest.raises(gpuscan.NotFound, match="ttl"):
            gd.reduce(p).compute()
    assert p.released  # leaving `with` after the ttl: nothing left to drop, no error


def test_persist_errors(dc, servers):
    """Arguments refused before anything is put; a server without --resident-bytes; a
    multi-address target. A failed persist leaves nothing behind on the servers that took blocks."""
    x = dask_of(data(np.dtype(np.int32), 100, salt=26), 10)
    with pytest.raises(TypeError, match="dask array"):
        gd.persist(np.arange(3))
    with pytest.raises(TypeError, match="float16"):
        gd.persist(x.astype(np.float16))
    with pytest.raises(ValueError, match="1-D"):
        gd.persist(da.ones((4, 4), chunks=2))
    with pytest.raises(ValueError, match="ttl"):
        gd.persist(x, ttl=-1)
    with pytest.raises(ValueError, match="same chunks"):
        gd.persist(x, x.rechunk(20))
    with gd.persist(x) as p, gd.persist(x > 0) as pm, gd.persist(x.astype(np.int32)) as pi:
        with pytest.raises(TypeError, match="x is persisted but where is not"):
            gd.compact(p, where=x > 0)
        with pytest.raises(TypeError, match="where is persisted but x is not"):
            gd.compact(x, where=pm)
        with pytest.raises(TypeError, match="bool, int8 or uint8"):
            gd.compact(p, where=pi)
        elsewhere = gd.PersistedArray([dataclasses.replace(b, target="127.0.0.1:1") for b in pm.blocks], bool, dc,
                                      "elsewhere")  # blocks on another server than x's (never released: not real)
        with pytest.raises(ValueError, match="persist them together"):
            gd.compact(p, where=elsewhere)
        with pytest.raises(TypeError, match="segmented_scan does not take persisted"):
            gd.segmented_scan(p, keys=x)
        with pytest.raises(TypeError, match="in_shared_memory does not take persisted"):
            gd.in_shared_memory(p)
    good, bare = servers[0][0], servers[1]
    try:
        gd.register(dc, [good.target, bare.target], timeout=30)
        with pytest.raises(gpuscan.Unimplemented, match="--resident-bytes") as e:
            gd.persist(x)
        assert bare.target in str(e.value)
        assert listed([good]) == [0]  # the blocks the good server took were dropped
        gd.register(dc, f"ipv4:{good.target},{servers[0][1].target}", timeout=30)
        with pytest.raises(ValueError, match="several servers"):
            gd.persist(x)
        assert listed(servers[0]) == [0, 0]
    finally:
        gd.register(dc, [s.target for s in servers[0]], timeout=60)



def blocks_kept(a):
    """How many non-empty blocks a persisted array keeps (its resident arrays)."""
    return sum(1 for b in a.blocks if b.size)


def test_kept_scans_as_the_lazy_scans(dc, servers):
    """scan(p, keep=True): a PersistedArray of p's chunks whose blocks lie with p's (on both
    servers), each the bits of gpuscan.dask's scan of the plain dask array (floats too; integers:
    numpy's), every operator of reductions(dtype), both kinds; blocks of one element and empty
    ones. While the kept scans run the servers receive no array data and send a value per block
    at most (the totals). release() drops the new blocks and leaves p's."""
    cases, held = [], []
    try:
        for dtype, chunks in CHUNKINGS.items():
            xn = data(dtype, sum(chunks), salt=30)
            x = dask_of(xn, chunks)
            p = gd.persist(x)
            held.append(p)
            assert set(p.targets) == {s.target for s in servers[0]}, p.targets
            before = wire(servers[0])
            kept = [(op, exclusive, gd.scan(p, op, exclusive, keep=True)) for op in reductions(dtype)
                    for exclusive in (False, True)]
            after = wire(servers[0])
            assert after[0] == before[0], (before, after)
            assert after[1] - before[1] <= len(kept) * blocks_kept(p) * dtype.itemsize, (before, after)
            cases.append((dtype, xn, x, p, kept))
        got = dask.compute(*[q.to_dask() for *_, kept in cases for _, _, q in kept])
        want = dask.compute(*[gd.scan(x, op, ex) for _, _, x, _, kept in cases for op, ex, _ in kept])
        i = 0
        for dtype, xn, x, p, kept in cases:
            for op, exclusive, q in kept:
                assert isinstance(q, gd.PersistedArray) and q.dtype == dtype and q.chunks == p.chunks
                assert [b.target for b in q.blocks] == [b.target for b in p.blocks]
                assert got[i].dtype == want[i].dtype and got[i].tobytes() == want[i].tobytes(), (dtype, op, exclusive)
                if dtype.kind != "f":
                    np.testing.assert_array_equal(got[i], ref.scan(xn, op, exclusive))
                i += 1
        persisted = sum(blocks_kept(p) for *_, p, _ in cases)
        made = sum(blocks_kept(q) for *_, kept in cases for _, _, q in kept)
        assert sum(listed(servers[0])) == persisted + made
        assert sum(q.release() for *_, kept in cases for _, _, q in kept) == made
        assert sum(listed(servers[0])) == persisted
    finally:
        for p in held:
            p.release()
    assert listed(servers[0]) == [0, 0]


def test_kept_scan_chains_ttl_label_and_aliases(dc, servers):
    """cumsum/cumprod/cummin/cummax pass keep= (and ttl=, label=) through; a kept result is a
    persisted array like any (scanned and kept again, reduced, read back); its blocks carry the
    label (each its index) and the ttl."""
    xn = data(np.dtype(np.int64), 7001, salt=31)
    with gd.persist(dask_of(xn, 1000)) as p:
        with gd.cumsum(p, keep=True, ttl=60, label="kept") as q:
            for s in servers[0]:
                with gpuscan.Client(s.target) as c:
                    mine = {r.id: r for r in c.arrays()}
                for i, b in enumerate(q.blocks):
                    if b.target == s.target:
                        assert mine[b.id].label == f"kept block {i}", mine[b.id]
                        assert 55 < mine[b.id].expires - time.time() <= 60.5, mine[b.id]
            with gd.cumsum(q, exclusive=True, keep=True) as q2:
                np.testing.assert_array_equal(q2.compute(), ref.scan(np.cumsum(xn), "sum", True))
            assert gd.reduce(q, "max").compute() == np.cumsum(xn).max()
            np.testing.assert_array_equal(q.to_dask().compute(), np.cumsum(xn))
        for fn, op in ((gd.cumprod, "product"), (gd.cummin, "min"), (gd.cummax, "max")):
            with fn(p, exclusive=True, keep=True) as q:
                np.testing.assert_array_equal(q.compute(), ref.scan(xn, op, True))
        assert sum(listed(servers[0])) == 8  # p's blocks alone
    assert listed(servers[0]) == [0, 0]


def test_kept_scan_errors_leave_nothing_kept(dc, servers):
    """Arguments refused before anything runs; a block gone (its total fails: nothing kept), and a
    server past its --resident-bytes (kept blocks made, then one refused: those made are dropped),
    raise the server's error and leave the servers' arrays as they were."""
    xn = data(np.dtype(np.int64), 8 * 8192, salt=32)
    x = dask_of(xn, 8192)
    with pytest.raises(ValueError, match="persisted"):
        gd.cumsum(x, keep=True)
    with gd.persist(x) as p:
        assert listed(servers[0]) == [4, 4]
        with pytest.raises(ValueError, match="keep=True"):
            gd.scan(p, ttl=5)
        with pytest.raises(TypeError, match="keep"):
            gd.scan(p, keep="yes")
        with pytest.raises(ValueError, match="ttl"):
            gd.scan(p, keep=True, ttl=-1)
        with pytest.raises(ValueError, match="algorithm"):
            gd.scan(p, keep=True, algorithm="no such")
        info = pb.ArrayInfo.FromString(p.blocks[5].info)
        info.id = bytes(len(info.id))
        gone = gd.PersistedArray([*p.blocks[:5], dataclasses.replace(p.blocks[5], info=info.SerializeToString()),
                                  *p.blocks[6:]], p.dtype, dc, "gone")  # never released: not its blocks
        with pytest.raises(gpuscan.NotFound, match="persisted block"):
            gd.cumsum(gone, keep=True)
        assert listed(servers[0]) == [4, 4]
        # Fill server 0 but for room of about two more blocks: its kept scans are refused past that.
        target = servers[0][0].target
        with gpuscan.Client(target, tenant="filler") as c:
            room = c.arrays().budget_bytes - c.arrays().used_bytes - 5 * 8192 * 8 // 2
            filler = c.put(np.ones(room // 8, np.int64))
            try:
                with pytest.raises(gpuscan.ResourceExhausted, match=target):
                    gd.cumsum(p, keep=True)
                assert listed(servers[0]) == [4, 4]
            finally:
                filler.drop()
        with gd.cumsum(p, keep=True) as q:  # room again
            np.testing.assert_array_equal(q.compute(), np.cumsum(xn))
    p.release()
    with pytest.raises(ValueError, match="released"):
        gd.cumsum(p, keep=True)
    assert listed(servers[0]) == [0, 0]


@pytest.mark.parametrize("dtype", [np.dtype(np.float64), np.dtype(np.int32)], ids=str)
def test_reduce_of_a_persisted_array_is_one_task(dc, servers, dtype):
    """reduce(p) is one task over every block (not a task a block and a tree), with the bits of
    the plain array's reduce, whose tree folds 70 blocks in two levels; empty blocks and an empty
    array too."""
    chunks = tuple([0, 1] + [997] * 66 + [0, 3])
    xn = data(dtype, sum(chunks), salt=33)
    x = dask_of(xn, chunks)
    with gd.persist(x) as p, gd.persist(dask_of(xn[:0], (0,))) as empty:
        ops = reductions(dtype)
        lazy = [gd.reduce(p, op) for op in ops]
        for r in lazy:
            assert [k for k in dict(r.__dask_graph__()) if "gpuscan-reduce" in str(k)] == [(r.name,)]
            assert r.shape == () and r.dtype == dtype
        got = dask.compute(*lazy, gd.reduce(empty, "max"))
        want = dask.compute(*[gd.reduce(x, op) for op in ops])
    for op, g, w in zip(ops, got, want):
        assert type(g) is type(w) and g.tobytes() == w.tobytes(), (op, g, w)
        if op != "product" or dtype.kind != "f":
            ref.assert_value_close(g, ref.reduce(xn, op), xn, op)
    assert got[-1] == ref.identity("max", dtype)


def worker_calls(dc):
    return sum(i["calls"] for i in gd.worker_info(dc).values() if i)


@pytest.mark.parametrize("dtype", [np.dtype(np.float64), np.dtype(np.int64)], ids=str)
def test_reduce_now_calls_the_servers_from_the_driver(dc, servers, dtype):
    """p.reduce(op) (and p.sum()) from the process that registered: the servers called from here,
    no worker calls, the bits of the lazy reduce; without register()'s options here, or with a
    server this process cannot reach (remembered), one task on a worker, the same bits."""
    chunks = tuple([0, 5] + [1499] * 40 + [0, 2])
    xn = data(dtype, sum(chunks), salt=41)
    x = dask_of(xn, chunks)
    ops = reductions(dtype)
    want = dask.compute(*[gd.reduce(x, op) for op in ops])
    with gd.persist(x) as p:
        before = worker_calls(dc)
        got = [p.reduce(op) for op in ops]
        assert worker_calls(dc) == before  # no task: the driver's own calls
        for op, g, w in zip(ops, got, want):
            assert type(g) is type(w) and g.tobytes() == w.tobytes(), (op, g, w)
        assert p.sum().tobytes() == want[ops.index("sum")].tobytes()
        with pytest.raises(ValueError, match="gpuscan.dask.reduce"):
            p.reduce("bogus")
        try:
            _driver.forget(dc)  # as if register() ran in another process
            assert p.reduce("max").tobytes() == want[ops.index("max")].tobytes()
            assert worker_calls(dc) == before + 2  # one (Pipeline) call a server
            _driver.remember(dc, {"tls": True, "retries": 0, "timeout": 30})  # TLS towards plaintext: unreachable
            assert p.reduce("max").tobytes() == want[ops.index("max")].tobytes()
            assert worker_calls(dc) == before + 4
            assert _driver.servers(dc).unreachable == {s.target for s in servers[0]}
            p.reduce("max")  # remembered: straight to the task
            assert worker_calls(dc) == before + 6
        finally:
            _driver.remember(dc, {"timeout": 60})
    with pytest.raises(ValueError, match="released"):
        p.sum()
