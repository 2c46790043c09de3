"""The shared-memory arena (shared.Arena, Client.shared_array): arrays carved out of a few regions
made once, page-aligned and disjoint while alive, zeroed when asked, returned to the arena when
their last view is collected (runs merged), the arena growing by regions that double it; calls on
arena arrays (marked SharedMemory.arena) against numpy at chunk and buffer boundaries, their
results carved from the same arena, and the files unlinked when the client closes."""
import gc
import os
import threading

import numpy as np
import pytest

import gpuscan
import reference as ref
from gpuscan import shared

MiB = 1 << 20


@pytest.fixture(scope="module")
def shm_dir(client):
    limits = client.info()["limits"]
    if not limits.get("shared_memory") or not os.path.isdir(limits["shm_dir"]):
        pytest.skip("the server does not serve shared memory visible here")
    return limits["shm_dir"]


def regions(d):
    return sorted(n for n in os.listdir(d) if n.startswith(shared.REGION_PREFIX))


def test_pieces_are_disjoint_aligned_zeroed_and_come_back(tmp_path, rng):
    arena = shared.Arena(str(tmp_path), initial_bytes=1 * MiB)
    a = arena.carve(1000, "int32")
    b = arena.carve(3, "float64")
    assert a.region == b.region == arena.regions[0] and len(arena.regions) == 1
    assert a.offset == 0 and b.offset == shared.Arena.ALIGN  # 4000 bytes take one page
    assert not a.any() and not b.any()
    a[:] = rng.integers(1, 1 << 30, 1000, dtype=np.int32)
    b[:] = rng.random(3) + 1
    assert arena.free_bytes() == 1 * MiB - 2 * shared.Arena.ALIGN
    view = a[10:20]
    del a
    gc.collect()
    assert arena.free_bytes() == 1 * MiB - 2 * shared.Arena.ALIGN  # a view keeps the piece
    assert view.offset == 40 and view.all()
    del view
    gc.collect()
    assert arena.free_bytes() == 1 * MiB - shared.Arena.ALIGN
    c = arena.carve(1000, "int32")  # the first piece again: zeroed though it held data
    assert c.offset == 0 and not c.any()
    c[:] = 5
    del c
    gc.collect()
    d = arena.carve(1000, "int32", zero=False)  # old bytes left
    assert d.offset == 0 and (d == 5).all()
    e = arena.carve(2000, "int32")  # 8000 bytes: two pages, past b (b still holds page 1)
    assert e.offset == 2 * shared.Arena.ALIGN and not e.any()
    del b, d, e
    gc.collect()
    assert arena.free_bytes() == 1 * MiB  # every run merged back into one
    whole = arena.carve(MiB // 8, "int64")
    assert whole.offset == 0 and len(arena.regions) == 1
    arena.close()


def test_the_arena_grows_by_doubling_regions_and_close_unlinks(tmp_path):
    arena = shared.Arena(str(tmp_path))
    first = arena.carve(1000, "int32")  # no initial size: 4 x the first array's page
    assert arena.nbytes == 4 * shared.Arena.ALIGN
    keep = [arena.carve(1000, "int32") for _ in range(3)]
    assert len(arena.regions) == 1 and arena.free_bytes() == 0
    more = arena.carve(1000, "int32")
    assert len(arena.regions) == 2 and arena.nbytes == 8 * shared.Arena.ALIGN  # as much as before
    big = arena.carve(3 * MiB // 4, "int32")  # larger than all before: a region its size
    assert len(arena.regions) == 3 and big.region == arena.regions[2]
    files = arena.regions
    assert sorted(files) == sorted(os.listdir(tmp_path))
    arena.close()
    assert os.listdir(tmp_path) == [] and first.region is None  # unlinked: calls stream them
    first[:] = 1
    assert first.sum() == 1000 and len(keep) == 3 and more.size == 1000
    with pytest.raises(ValueError, match="closed"):
        arena.carve(1)
    with pytest.raises(ValueError, match="length"):
        shared.Arena(str(tmp_path)).carve(-1)
    with pytest.raises(ValueError, match="initial_bytes"):
        shared.Arena(str(tmp_path), initial_bytes=0)


def test_threads_carve_and_free_without_overlap(tmp_path):
    arena = shared.Arena(str(tmp_path), initial_bytes=4 * MiB)
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        live = []
        for i in range(300):
            n = int(r.integers(0, 5000))
            a = arena.carve(n, "int32")
            if a.any():
                errors.append("not zeroed")
            a[:] = seed
            live.append(a)
            if len(live) > 4:
                old = live.pop(int(r.integers(0, len(live))))
                if not (old == seed).all():
                    errors.append("overwritten by another thread")
        for a in live:
            if not (a == seed).all():
                errors.append("overwritten by another thread")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    gc.collect()
    assert arena.free_bytes() == arena.nbytes
    arena.close()


# Around the client's 1 MiB chunks and the CUDA engine's 2 MiB buffers (int32 elements).
SIZES = [0, 1, 1000, (1 << 18) - 1, (1 << 18) + 1, (1 << 19) * 4 + 3]


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_calls_on_arena_arrays_match_numpy_and_results_stay_in_the_arena(target, shm_dir, rng, dtype):
    dt = np.dtype(dtype)
    before = set(regions(shm_dir))
    with gpuscan.Client(target, shm_arena_bytes=8 * MiB) as c:
        for n in SIZES:
            x = ref.random_array(rng, dt, n)
            a = c.shared_array(n, dt)
            a[:] = x
            y = c.scan(a)
            assert isinstance(y, gpuscan.SharedArray) and y.region in c._arenas[(shm_dir, shared.DEFAULT_MODE)].regions
            ref.assert_scan_close(np.asarray(y), ref.scan(x, "sum", False), x, "sum")
            out = c.shared_array(n, dt, zero=False)
            assert c.scan(a, op="max", out=out) is out
            np.testing.assert_array_equal(out, ref.scan(x, "max", False))
            assert c.reduce(a, op="min") == ref.reduce(x, "min")
            kept = c.compact(a, predicate=("gt", 0))
            np.testing.assert_array_equal(kept, x[x > 0])
            c.scan(a, op="max", exclusive=True, out=a)  # in place
            np.testing.assert_array_equal(a, ref.scan(x, "max", True))
            assert c.last_timing.bytes_in == n * dt.itemsize
        made = set(regions(shm_dir)) - before
        assert made and set(c._arenas[(shm_dir, shared.DEFAULT_MODE)].regions) == made  # no region of its own
    assert not (set(regions(shm_dir)) & made)  # the client's close unlinked them


def test_an_arena_region_deleted_under_it_fails_that_call_and_the_arena_moves_on(target, shm_dir, rng):
    x = ref.random_array(rng, np.dtype(np.int64), 5000)
    with gpuscan.Client(target) as c:
        a = c.shared_array(len(x), x.dtype)
        a[:] = x
        assert c.reduce(a) == ref.reduce(x, "sum")
        os.unlink(a.path)  # someone removes the arena's file
        with pytest.raises(gpuscan.NotFound, match=a.region):
            c.reduce(a)
        b = c.shared_array(len(x), x.dtype)  # from a new region: the old one is not carved again
        b[:] = x
        assert b.region not in (None, a.region) and c.reduce(b) == ref.reduce(x, "sum")
