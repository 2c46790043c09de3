"""gpuscan.dask against numpy (and dask's own histogram) on a distributed LocalCluster of two worker
processes, each worker with its own CPU gpuscan server on loopback (fixtures below).
Random data, seeded and never zeros; chunkings with blocks of one element, empty blocks, one
block and uneven blocks; every dtype and operator for scans and reductions; a worker SIGKILLed
mid-compute; a server down behind a round_robin target; a server down with no failover; the
runnable example of docs/dask.md."""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import gpuscan  # noqa: E402
import gpuscan.dask as gd  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # python/tests: reference.py
import reference as ref  # noqa: E402
from gpuscan.testing import ServerProcess, default_server_binary  # noqa: E402


# -- fixtures: two CPU servers on loopback ports (shared memory from a directory of /dev/shm made for
# the module), the distributed Client of the session's LocalCluster (dask_cluster.py: two worker
# processes, one thread each), and a function that starts more servers (the failover tests kill
# theirs). Here rather than in a conftest.py of this folder: python/tests has one, and its tests
# import from the module "conftest".
pytest_plugins = ("dask_cluster",)  # the `cluster` fixture, shared with test_dask_persist.py


def server_binary() -> str:
    b = default_server_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.skip("no gpuscan-server binary: set GPUSCAN_SERVER_BIN or build build/bin/gpuscan-server")
    return b


@pytest.fixture(scope="module")
def shm_dir():
    d = tempfile.mkdtemp(prefix="gpuscan-dask-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def start_server(shm_dir):
    """start_server(shm=True) -> a ServerProcess (CPU engine, a free port), stopped at the end."""
    procs = []
    binary = server_binary()

    def start(shm: bool = True, port: int = 0) -> ServerProcess:
        p = ServerProcess(binary, engine=os.environ.get("GPUSCAN_TEST_ENGINE", "cpu"),
                          shm_dir=shm_dir if shm else None, port=port,
                          extra=["--cpu-threads", "1", "--resident-bytes", str(64 << 20)])  # the docs' persist
        procs.append(p)
        return p
    yield start
    for p in procs:
        p.stop()


@pytest.fixture(scope="module")
def servers(start_server):
    """Two servers that stay up for the whole session."""
    return start_server(), start_server()


@pytest.fixture(scope="module")
def dc(cluster, servers):
    """The distributed Client, gpuscan registered: worker 0 -> server 0, worker 1 -> server 1."""
    with distributed.Client(cluster) as c:
        gd.register(c, [s.target for s in servers], timeout=60)
        yield c


SEED = 46
UNEVEN = (1, 0, 3000, 1, 0, 2047, 4000, 1)  # 9050 elements: blocks of one, empty blocks, uneven ones


def rng(*salt):
    return np.random.default_rng([SEED, *salt])


def nonzero(x):
    """x with its zeros made 1: data 'never zeros' (a zero would hide a wrong identity or carry)."""
    x = x.copy()
    x[x == 0] = 1
    return x


def data(dtype, n, op="sum", salt=0):
    if dtype.kind == "f" and op == "product":  # near 1: thousands of factors neither under- nor overflow
        return rng(n, salt, dtype.num).uniform(0.99, 1.01, n).astype(dtype)
    return nonzero(ref.random_array(rng(n, salt, dtype.num), dtype, n, op))


def dask_of(x, chunks):
    return da.from_array(x, chunks=(chunks,), asarray=True)


def served(server, kind="scan"):
    """How many `kind` calls the server has logged (it logs one line per call)."""
    return len(re.findall(rf"\] {kind} op=", server.log_text()))


def total_calls(dc):
    return sum(i["calls"] for i in gd.worker_info(dc).values() if i)


# -- arguments: checked before anything runs (no cluster needed) ------------------------------------------
def test_import_gpuscan_does_not_import_dask():
    code = ("import sys, gpuscan\n"
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


@pytest.mark.parametrize("call, exc, words", [
    (lambda x, k, m: gd.cumsum(da.ones((4, 4), chunks=2, dtype=np.int32)), ValueError, ["x", "1-D", "(4, 4)"]),
    (lambda x, k, m: gd.cumsum(np.arange(4)), TypeError, ["x", "dask array", "ndarray"]),
    (lambda x, k, m: gd.cumsum(x.astype(np.float16)), TypeError, ["x", "float16"]),
    (lambda x, k, m: gd.cumsum(x.astype(np.int16)), TypeError, ["x", "int16"]),
    (lambda x, k, m: gd.cumsum(x.astype(">i4")), TypeError, ["x", ">i4"]),
    (lambda x, k, m: gd.scan(x, op="avg"), ValueError, ["op", "'avg'"]),
    (lambda x, k, m: gd.scan(x.astype(np.float64), op="bit_xor"), ValueError, ["op", "'bit_xor'", "float64"]),
    (lambda x, k, m: gd.reduce(x.astype(np.float32), op="bit_and"), ValueError, ["op", "'bit_and'", "float32"]),
    (lambda x, k, m: gd.scan(x, exclusive="yes"), TypeError, ["exclusive", "'yes'"]),
    (lambda x, k, m: gd.scan(x, algorithm="bogus"), ValueError, ["algorithm", "'bogus'"]),
    (lambda x, k, m: gd.segmented_scan(x, keys=k.rechunk(5)), ValueError, ["keys", "chunks"]),
    (lambda x, k, m: gd.segmented_scan(x, keys=k.astype(np.float64)), TypeError, ["keys", "float64"]),
    (lambda x, k, m: gd.segmented_scan(x), ValueError, ["keys"]),
    (lambda x, k, m: gd.segmented_scan(x, keys=k, op="nope"), ValueError, ["op", "'nope'"]),
    (lambda x, k, m: gd.compact(x, where=m.rechunk(3)), ValueError, ["where", "chunks"]),
    (lambda x, k, m: gd.compact(x, where=m.astype(np.float32)), TypeError, ["where", "float32"]),
    (lambda x, k, m: gd.compact(x), ValueError, ["where", "predicate"]),
    (lambda x, k, m: gd.compact(x, predicate=("bigger", 1)), ValueError, ["predicate", "bigger"]),
    (lambda x, k, m: gd.histogram(x, 10), ValueError, ["range"]),
    (lambda x, k, m: gd.histogram(x, 10, range=(5, 1)), ValueError, ["range", "(5, 1)"]),
    (lambda x, k, m: gd.histogram(x, 0, range=(0, 1)), ValueError, ["bins", "0"]),
    (lambda x, k, m: gd.histogram(x, [3, 2, 1]), ValueError, ["bins", "monoton"]),
    (lambda x, k, m: gd.histogram(x, np.ones((2, 2))), ValueError, ["bins", "(2, 2)"]),
])
def test_bad_arguments_raise_before_compute(call, exc, words):
    x = dask_of(np.arange(1, 21, dtype=np.int32), 4)
    k = dask_of(np.arange(20, dtype=np.int64) // 3, 4)
    m = x > 5
    with pytest.raises(exc) as e:
        call(x, k, m)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_register_checks_its_arguments(dc, servers):
    with pytest.raises(TypeError, match="targets"):
        gd.register(dc, 42)
    with pytest.raises(TypeError, match="targets"):
        gd.register(dc, [])
    with pytest.raises(TypeError, match="client option"):
        gd.register(dc, servers[0].target, no_such_option=1)
    with pytest.raises(TypeError, match="shared_memory"):
        gd.register(dc, servers[0].target, shared_memory="auto")
    with pytest.raises(ValueError, match="shm_mode"):
        gd.register(dc, servers[0].target, shm_mode="0600")


def test_graph_keeps_the_chunks_and_never_rechunks():
    """cumsum builds our own graph: x's chunks, a few tasks per block, no rechunk layer (dask's
    cumsum(axis=None) on 1-D rechunks into tiny chunks: dask/dask#11872)."""
    x = dask_of(np.arange(1, 100_001, dtype=np.int64), 10_000)
    y = gd.cumsum(x)
    assert y.chunks == x.chunks and y.dtype == x.dtype
    assert not any("rechunk" in str(name) for name in y.dask.layers)
    own = [k for k in dict(y.dask) if str(k[0] if isinstance(k, tuple) else k).startswith("gpuscan-")]
    assert len(own) == 3 * x.numblocks[0] + 1
    assert y._meta.shape == (0,) and y._meta.dtype == x.dtype


# -- every dtype and operator ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_scan_every_dtype_and_operator(dc, dtype):
    """Inclusive and exclusive scans of every operator the dtype takes, blocks of one element,
    empty blocks and uneven ones, against numpy (one dask.compute for the dtype's 8 or 14 scans)."""
    n = sum(UNEVEN)
    cases, lazy = [], []
    for op in ref.ops_for(dtype):
        xn = data(dtype, n, op)
        x = dask_of(xn, UNEVEN)
        for exclusive in (False, True):
            cases.append((op, exclusive, xn))
            lazy.append(gd.scan(x, op, exclusive))
    for (op, exclusive, xn), got in zip(cases, dask.compute(*lazy)):
        want = ref.scan(xn, op, exclusive)
        ref.assert_scan_close(got, want, xn, op)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_reduce_every_dtype_and_operator(dc, dtype):
    n = sum(UNEVEN)
    cases, lazy = [], []
    for op in ref.ops_for(dtype):
        xn = data(dtype, n, op, salt=1)
        r = gd.reduce(dask_of(xn, UNEVEN), op)
        assert r.shape == () and r.dtype == dtype
        cases.append((op, xn))
        lazy.append(r)
    for (op, xn), got in zip(cases, dask.compute(*lazy)):
        ref.assert_value_close(got, ref.reduce(xn, op), xn, op)


@pytest.mark.parametrize("chunks", [
    (20_000,),                            # one block
    (1,) * 40,                            # every block one element
    (0, 5, 0, 7),                         # empty blocks
    (0, 0, 12_000, 0),                    # empty blocks around one
    (7, 13, 4096, 1, 4095, 2, 0, 11_786),  # uneven
    (0,),                                 # an empty array
], ids=["one", "ones", "empty-5-empty-7", "empty-around", "uneven", "no-elements"])
def test_chunkings(dc, chunks):
    n = sum(chunks)
    xi = data(np.dtype(np.int64), n, salt=2)
    xf = data(np.dtype(np.float64), n, salt=3)
    xs = dask_of(xi, chunks), dask_of(xf, chunks)
    out = dask.compute(gd.cumsum(xs[0]), gd.cumsum(xs[0], exclusive=True), gd.cummax(xs[1]),
                       gd.cummin(xs[1], exclusive=True), gd.cumprod(xs[0]), gd.reduce(xs[0]), gd.reduce(xs[1], "min"))
    np.testing.assert_array_equal(out[0], ref.scan(xi, "sum", False))
    np.testing.assert_array_equal(out[1], ref.scan(xi, "sum", True))
    np.testing.assert_array_equal(out[2], ref.scan(xf, "max", False))
    np.testing.assert_array_equal(out[3], ref.scan(xf, "min", True))
    np.testing.assert_array_equal(out[4], ref.scan(xi, "product", False))
    assert out[5] == ref.reduce(xi, "sum")
    assert out[6] == ref.reduce(xf, "min")  # the identity (+inf) for no elements
    for y in out[:5]:
        assert y.dtype == xi.dtype or y.dtype == xf.dtype


def test_float_sum_reproducible_for_a_chunking(dc):
    """Float sums: the same chunking gives the same bits every run; each block alone is one gpuscan
    call (bits of the server's tree); other chunkings stay within the float tolerance."""
    xn = data(np.dtype(np.float32), 30_000, salt=4)
    a = gd.cumsum(dask_of(xn, 7_000)).compute()
    b = gd.cumsum(dask_of(xn, 7_000)).compute()
    assert a.tobytes() == b.tobytes()
    one = gd.cumsum(dask_of(xn, 30_000)).compute()
    with gpuscan.Client(gd.worker_info(dc).popitem()[1]["target"]) as c:
        assert one.tobytes() == c.scan(xn).tobytes()
    ref.assert_scan_close(a, ref.scan(xn, "sum", False), xn, "sum")


def test_signed_zeros_across_blocks(dc, servers):
    """Where the random data has no zeros, this has nothing else: -0.0 and +0.0 carried across
    blocks keep the bits of one gpuscan call on the whole array (IEEE: -0.0 + -0.0 = -0.0,
    minimum(-0.0, +0.0) = -0.0; an exclusive block starts with the carry itself)."""
    xn = np.array([-0.0, -0.0, -0.0, 0.0, -0.0, 1.5, -0.0, -0.0, 0.0, -0.0, -0.0, 0.0], np.float64)
    x = dask_of(xn, (2, 1, 3, 0, 2, 2, 2))
    cases = [(op, exclusive) for op in ("sum", "min", "max") for exclusive in (False, True)]
    got = dask.compute(*[gd.scan(x, op, exclusive) for op, exclusive in cases])
    keys_np = np.array([1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3], np.int32)
    keys = dask_of(keys_np, x.chunks[0])
    seg = dask.compute(*[gd.segmented_scan(x, keys=keys, op=op, exclusive=exclusive) for op, exclusive in cases])
    with gpuscan.Client(servers[0].target) as c:
        for (op, exclusive), g, gs in zip(cases, got, seg):
            want = c.scan(xn, op, exclusive)
            assert g.tobytes() == want.tobytes(), (op, exclusive, g, want)
            want = c.segmented_scan(xn, keys_np, op=op, exclusive=exclusive)
            assert gs.tobytes() == want.tobytes(), ("segmented", op, exclusive, gs, want)


def test_scan_of_unknown_chunks(dc):
    """A scan of compact's output (chunks of unknown size) carries by the blocks' counts."""
    xn = data(np.dtype(np.int64), 9_050, salt=5)
    x = dask_of(xn, UNEVEN)
    kept = gd.compact(x, where=x > 0)
    assert all(np.isnan(c) for c in kept.chunks[0])
    np.testing.assert_array_equal(gd.cumsum(kept).compute(), np.cumsum(xn[xn > 0]))


# -- histogram, compact, segmented scan -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_histogram_as_dask(dc, dtype):
    """dask.array.histogram's counts and edges: even bins over a range (values on the edges,
    outside the range), explicit edges (an array and a list), density."""
    n = sum(UNEVEN)
    r = rng(6, dtype.num)
    if dtype.kind == "f":
        xn = nonzero(r.uniform(-10, 10, n).astype(dtype))
        xn[:50] = np.linspace(-8, 8, 9).astype(dtype).repeat(6)[:50]  # exactly on edges
        xn[50:58] = np.linspace(0, 60, 8).astype(dtype)  # float32: off the float64 edges, on their float32 roundings
    else:
        lo = 0 if dtype.kind == "u" else -50
        xn = nonzero(r.integers(lo, 100, n).astype(dtype))
    x = dask_of(xn, UNEVEN)
    for bins, rng_ in [(16, (-8, 8)), (7, (0, 60)), (np.array([-8.0, -1.5, 0.0, 0.25, 3.0, 9.0, 40.0]), None),
                       ([0, 1, 2, 50, 99], None)]:
        got_c, got_e = gd.histogram(x, bins, range=rng_)
        want_c, want_e = da.histogram(x, bins, range=rng_)
        assert type(got_e) is type(want_e)
        np.testing.assert_array_equal(np.asarray(got_e), np.asarray(want_e))
        gc, wc = dask.compute(got_c, want_c)
        assert gc.dtype == wc.dtype == np.int64 and got_c.chunks == ((len(wc),),)
        np.testing.assert_array_equal(gc, wc)
        assert gc.sum() > 0
    got_d, _ = gd.histogram(x, 10, range=(0, 50), density=True)
    want_d, _ = da.histogram(x, 10, range=(0, 50), density=True)
    np.testing.assert_allclose(got_d.compute(), want_d.compute(), rtol=1e-12)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=str)
def test_compact(dc, dtype):
    n = sum(UNEVEN)
    xn = data(dtype, n, salt=7)
    mn = rng(7, 1).random(n) < 0.3
    x = dask_of(xn, UNEVEN)
    m = dask_of(mn, UNEVEN)
    v = gd.compact(x, where=m)
    assert v.dtype == dtype and len(v.chunks[0]) == len(UNEVEN) and all(np.isnan(c) for c in v.chunks[0])
    assert v.chunks == x[m].chunks  # as dask's boolean indexing
    vals, idx = gd.compact(x, where=m, indices=True)
    gt = gd.compact(x, predicate=("gt", 0))
    got_v, got_vals, got_idx, got_gt = dask.compute(v, vals, idx, gt)
    np.testing.assert_array_equal(got_v, xn[mn])
    np.testing.assert_array_equal(got_vals, xn[mn])
    np.testing.assert_array_equal(got_idx, np.flatnonzero(mn))
    np.testing.assert_array_equal(got_gt, xn[xn > 0])
    assert got_idx.dtype == np.int64


def segmented_reference(x, keys, op, exclusive):
    out = np.empty_like(x)
    starts = np.concatenate([[0], np.flatnonzero(keys[1:] != keys[:-1]) + 1, [len(x)]])
    for a, b in zip(starts[:-1], starts[1:]):
        out[a:b] = ref.scan(x[a:b], op, exclusive)
    return out


@pytest.mark.parametrize("dtype, ops", [(np.dtype(np.int32), ["sum", "max", "bit_xor", "product"]),
                                        (np.dtype(np.uint64), ["sum", "min"]),
                                        (np.dtype(np.float64), ["sum", "max"])], ids=str)
def test_segmented_scan_across_blocks(dc, dtype, ops):
    """Runs that cross block boundaries, runs spanning several blocks (through empty blocks and
    blocks of one element), runs that end exactly at a boundary, and a key that comes back."""
    chunks = (1, 0, 40, 1, 1, 0, 300, 7, 0, 651)
    n = sum(chunks)
    lengths = [3, 1, 38, 1, 2, 150, 160, 5, 300, 1, 340]
    assert sum(lengths) == n
    keys_np = np.repeat(np.array([5, 6, 5, 9, 10, 11, 12, 13, 14, 15, 16], np.int64), lengths)
    keys = dask_of(keys_np, chunks)
    cases, lazy = [], []
    for op in ops:
        xn = data(dtype, n, op, salt=8)
        x = dask_of(xn, chunks)
        for exclusive in (False, True):
            cases.append((op, exclusive, xn))
            lazy.append(gd.segmented_scan(x, keys=keys, op=op, exclusive=exclusive))
    for (op, exclusive, xn), got in zip(cases, dask.compute(*lazy)):
        ref.assert_scan_close(got, segmented_reference(xn, keys_np, op, exclusive), xn, op)


# -- placement, shared memory ------------------------------------------------------------------------------
def test_each_worker_calls_its_own_server_through_shared_memory(dc, servers):
    xn = data(np.dtype(np.int64), 40_000, salt=9)
    x = dask_of(xn, 2_000).persist()
    distributed.wait(x)
    assert gd.reduce(x).compute() == xn.sum()  # each worker's shared-memory probe (a scan) happens here
    before = gd.worker_info(dc)
    logged = [served(s) for s in servers]
    np.testing.assert_array_equal(gd.cumsum(x).compute(), np.cumsum(xn))
    assert sum(served(s) for s in servers) == sum(logged) + 20  # one call per block, on the servers' own count
    assert all(served(s) > n for s, n in zip(servers, logged))
    info = gd.worker_info(dc)
    assert sorted(i["target"] for i in info.values()) == sorted(s.target for s in servers)
    for addr, i in info.items():
        assert i["calls"] > before[addr]["calls"], info  # both workers computed blocks
        assert i["shared_memory"] is True and i["shared_calls"] > before[addr]["shared_calls"], info
    # The same through the streamed path, by register(shared_memory=False).
    try:
        gd.register(dc, [s.target for s in servers], shared_memory=False, timeout=60)
        np.testing.assert_array_equal(gd.cumsum(x).compute(), np.cumsum(xn))
        np.testing.assert_array_equal(gd.compact(x, where=x > 0).compute(), xn[xn > 0])
        assert gd.reduce(x).compute() == xn.sum()
        info = gd.worker_info(dc)
        assert all(i["shared_memory"] is False and i["shared_calls"] == 0 and i["calls"] > 0 for i in info.values())
    finally:
        gd.register(dc, [s.target for s in servers], timeout=60)


def test_blocks_in_shared_memory_go_to_the_server_without_a_copy(dc, servers):
    """in_shared_memory: each block copied once into its worker's arena; persisted, later calls on
    it copy nothing in (a block dask moved to another worker may be copied there once)."""
    for dtype in (np.dtype(np.int32), np.dtype(np.float64)):
        xn = data(dtype, 30_001, salt=11)
        x = gd.in_shared_memory(dask_of(xn, 3_000)).persist()
        distributed.wait(x)
        # Integers against numpy; floats against the same chunking of a plain array (the same bits).
        want = ref.scan(xn, "sum", False) if dtype.kind != "f" else gd.cumsum(dask_of(xn, 3_000)).compute()
        before = {a: i["copies"] for a, i in gd.worker_info(dc).items()}
        np.testing.assert_array_equal(gd.cumsum(x).compute(), want)
        assert gd.reduce(x, op="max").compute() == xn.max()
        np.testing.assert_array_equal(gd.compact(x, predicate=("gt", 0)).compute(), xn[xn > 0])
        np.testing.assert_array_equal(x.compute(), xn)  # the blocks themselves, unchanged
        copies = sum(i["copies"] - before[a] for a, i in gd.worker_info(dc).items())
        assert copies < 11, copies  # 11 blocks x 3 calls would be 33 copies without it
    assert gd.in_shared_memory(dask_of(np.zeros(0, np.int64), 5)).compute().size == 0
    with pytest.raises(ValueError):
        gd.in_shared_memory(da.zeros((4, 4), chunks=2))


def test_targets_by_function_and_one_string(dc, servers):
    t = servers[1].target
    port = t.rsplit(":", 1)[1]
    try:
        mapping = gd.register(dc, lambda host: f"{host}:{port}", timeout=60)
        assert set(mapping.values()) == {f"127.0.0.1:{port}"}
        xn = data(np.dtype(np.uint32), 5_000, "sum", salt=10)
        np.testing.assert_array_equal(gd.cumsum(dask_of(xn, 999)).compute(), ref.scan(xn, "sum", False))
        mapping = gd.register(dc, t, timeout=60)
        assert set(mapping.values()) == {t}
    finally:
        gd.register(dc, [s.target for s in servers], timeout=60)


# -- failures: a worker killed, a server down -------------------------------------------------------------
def _slow_block(b):
    time.sleep(0.04)
    return b


def test_worker_sigkilled_mid_compute_gives_the_exact_result(dc):
    """A worker SIGKILLed while a cumsum runs: its nanny restarts it (same name, so same server,
    plugin installed again), dask recomputes what it held, the result is exact."""
    xn = data(np.dtype(np.int64), 60_000, salt=11)
    x = dask_of(xn, 1_000).map_blocks(_slow_block, dtype=xn.dtype)  # 60 blocks of 40 ms: ~1.2 s on 2 workers
    pids = dc.run(os.getpid)
    names = {addr: w["name"] for addr, w in dc.scheduler_info()["workers"].items()}
    calls = total_calls(dc)
    fut = dc.compute(gd.cumsum(x))
    deadline = time.monotonic() + 30
    while total_calls(dc) < calls + 4 and time.monotonic() < deadline:  # some blocks scanned: mid-compute
        time.sleep(0.02)
    assert not fut.done(), "the compute ended before the kill: nothing was tested"
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    np.testing.assert_array_equal(fut.result(timeout=60), np.cumsum(xn))
    dc.wait_for_workers(2, timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = gd.worker_info(dc)
        if len(info) == 2 and all(info.values()) and victim not in info:
            break
        time.sleep(0.2)
    new_names = {addr: w["name"] for addr, w in dc.scheduler_info()["workers"].items()}
    assert victim not in new_names and sorted(new_names.values()) == sorted(names.values())
    assert all(i is not None for i in info.values()), info  # the restarted worker has its plugin again
    targets = {new_names[a]: i["target"] for a, i in info.items()}
    assert len(set(targets.values())) == 2, targets


def test_server_down_behind_round_robin_gives_the_exact_result(dc, servers, start_server):
    a, b = start_server(shm=False), start_server(shm=False)
    try:
        gd.register(dc, f"ipv4:{a.target},{b.target}", timeout=30, retries=4, backoff=(0.05, 0.2))
        xn = data(np.dtype(np.int32), 30_000, salt=12)
        x = dask_of(xn, 1_500).persist()
        for _ in range(10):  # until both servers take calls (a connection may still be coming up)
            np.testing.assert_array_equal(gd.cumsum(x).compute(), np.cumsum(xn, dtype=np.int32))
            if served(a) and served(b):
                break
        assert served(a) and served(b), "round_robin did not spread the calls over both servers"
        b.kill()
        before = served(a)
        got = dask.compute(gd.cumsum(x), gd.reduce(x, "max"), gd.histogram(x, 8, range=(-2**31, 2**31 - 1))[0])
        assert served(a) >= before + 20  # every block of the scan went to the server left
        np.testing.assert_array_equal(got[0], np.cumsum(xn, dtype=np.int32))
        assert got[1] == xn.max()
        np.testing.assert_array_equal(got[2], np.histogram(xn, 8, range=(-2**31, 2**31 - 1))[0])
        info = gd.worker_info(dc)
        assert all(i["shared_memory"] is False and "several servers" in i["shared_memory_reason"]
                   for i in info.values()), info
    finally:
        gd.register(dc, [s.target for s in servers], timeout=60)


def test_server_down_without_failover_names_the_server(dc, servers, start_server):
    c = start_server()
    try:
        gd.register(dc, [c.target], timeout=10, retries=1, backoff=(0.05, 0.1))
        xn = data(np.dtype(np.int64), 4_000, salt=13)
        x = dask_of(xn, 1_000).persist()
        np.testing.assert_array_equal(gd.cumsum(x).compute(), np.cumsum(xn))
        c.kill()
        with pytest.raises(gpuscan.Unavailable) as e:
            gd.cumsum(x).compute()
        assert c.target in str(e.value) and "dask worker tcp://" in str(e.value), str(e.value)
        with pytest.raises(gpuscan.Unavailable, match=re.escape(c.target)):
            gd.reduce(x).compute()
    finally:
        gd.register(dc, [s.target for s in servers], timeout=60)


# -- the example of docs/dask.md, as written -------------------------------------------------------------
DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "dask.md"


def test_docs_example_runs_as_written(servers, tmp_path):
    if not DOC.is_file():
        pytest.skip(f"no {DOC}")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    example = next((b for b in blocks if "GPUSCAN_TARGETS" in b), None)
    assert example, "docs/dask.md has no runnable example (a python block reading GPUSCAN_TARGETS)"
    script = tmp_path / "example.py"
    script.write_text(example)
    env = dict(os.environ, GPUSCAN_TARGETS=",".join(s.target for s in servers))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cumsum matches numpy" in r.stdout, r.stdout + r.stderr
