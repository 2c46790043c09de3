"""info, health, Timing, transport, out=, AsyncClient (lanes: test_lanes.py; shared memory:
test_shared_memory.py)."""
import asyncio

import numpy as np
import pytest

import gpuscan
import reference as ref


def test_info_and_health(client):
    info = client.info()
    assert info["engine"] in ("cpu", "cuda")
    assert "int32" in info["dtypes"] and "sum" in info["operators"]
    assert info["limits"]["max_chunk_bytes"] > 0
    assert client.health() == "SERVING"
    assert client.health("gpuscan.v1.GpuScan") == "SERVING"
    assert client.health("no.such.Service") == "SERVICE_UNKNOWN"


def test_last_timing(client, rng, target):
    x = ref.random_array(rng, np.dtype(np.float32), 100)
    client.scan(x)
    t = client.last_timing
    assert isinstance(t, gpuscan.Timing)
    assert t.bytes_in == 400 and t.bytes_out == 400 and t.chunks == 7  # 16 floats per 64-byte chunk
    assert t.engine in ("cpu", "cuda") and t.algorithm
    client.reduce(x)
    assert client.last_timing.bytes_in == 400
    with gpuscan.Client(target) as fresh:
        assert fresh.last_timing is None


def test_out_and_in_place(client, rng):
    x = ref.random_array(rng, np.dtype(np.int64), 300)
    want = ref.scan(x, "bit_xor", False)
    out = np.full(300, 7, np.int64)
    assert client.scan(x, op="bit_xor", out=out) is out
    np.testing.assert_array_equal(out, want)
    client.scan(x, op="bit_xor", out=x)  # in place
    np.testing.assert_array_equal(x, want)


def test_large_default_chunks(big_client, rng):
    x = ref.random_array(rng, np.dtype(np.int32), (3 << 20) + 5)  # 12 MiB: 13 chunks of 1 MiB
    np.testing.assert_array_equal(big_client.scan(x), ref.scan(x, "sum", False))
    assert big_client.last_timing.chunks == 13
    assert big_client.reduce(x, op="min") == x.min()


def test_transport(client):
    r = client.transport(10_000, echo=True, chunk_bytes=1000)
    assert r.bytes_in == 10_000 and r.bytes_out == 10_000 and r.bytes_received == 10_000
    assert r.requests == 10 and r.wall_s > 0 and r.gbps > 0
    r = client.transport(5_000, echo=False, chunk_bytes=1000)
    assert r.bytes_in == 5_000 and r.bytes_out == 0 and r.bytes_received == 0


def test_transport_lanes(client):
    """K concurrent Transport calls on K connections (the lane fan-out's driver, and the ceiling a
    K-lane scan will be compared with)."""
    for lanes in (2, 3):
        r = client.transport(10_500, echo=True, chunk_bytes=1000, lanes=lanes)
        assert r.bytes_in == 10_500 and r.bytes_out == 10_500 and r.bytes_received == 10_500
        assert r.requests == 11
    r = client.transport(2_000, echo=False, chunk_bytes=1000, lanes=4)  # two lanes carry nothing
    assert r.bytes_in == 2_000 and r.bytes_received == 0


def test_async_client(target, rng):
    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=64, timeout=60) as c:
            x = ref.random_array(rng, np.dtype(np.int32), 257)
            np.testing.assert_array_equal(await c.scan(x, exclusive=True), ref.scan(x, "sum", True))
            assert c.last_timing.chunks == 17
            assert await c.reduce(x, op="max") == x.max()
            v, i = await c.compact(x, predicate=("gt", 0), indices=True)
            np.testing.assert_array_equal(v, x[x > 0])
            np.testing.assert_array_equal(i, np.flatnonzero(x > 0))
            parts = [x[:10], x[10:10], x[10:]]
            outs = [o async for o in c.scan_iter(parts)]
            np.testing.assert_array_equal(np.concatenate(outs), ref.scan(x, "sum", False))

            async def agen():
                for p in parts:
                    yield p
            outs = [o async for o in c.scan_iter(agen(), op="min")]
            np.testing.assert_array_equal(np.concatenate(outs), ref.scan(x, "min", False))
            assert (await c.info())["engine"] in ("cpu", "cuda")
            assert await c.health() == "SERVING"
            r = await c.transport(4096, chunk_bytes=1024)
            assert r.bytes_received == 4096
            with pytest.raises(gpuscan.InvalidArgument):
                await c.scan(x.astype(np.float64), op="bit_or")
            results = await asyncio.gather(*(c.reduce(x[k:]) for k in range(8)))
            for k, r in enumerate(results):
                assert r == ref.reduce(x[k:], "sum")

            async def timed(k):  # last_timing is per task
                await c.scan(x[:k * 16])
                await asyncio.sleep(0.01)
                return c.last_timing.bytes_in
            assert await asyncio.gather(*(timed(k) for k in range(1, 5))) == [64, 128, 192, 256]
        async with gpuscan.AsyncClient("127.0.0.1:1", timeout=5) as bad:
            with pytest.raises(gpuscan.Unavailable):
                await bad.reduce(x)
    asyncio.run(main())


def test_benchmark_rows(client):
    if client.info()["engine"] != "cuda":
        pytest.skip("Benchmark needs a cuda server (a cpu server: test_errors checks FailedPrecondition)")
    seen = []
    table = client.benchmark(operations=["scan"], algorithms=["decoupled_lookback"], dtypes=["int32"],
                             sizes=[1 << 16], repetitions=3, warmup=1, on_row=seen.append)
    assert len(table) >= 2 and seen == list(table)
    ops = {r["operation"] for r in table}
    assert "copy" in ops and "scan" in ops
    assert all(r["dtype"] == "int32" and r["elements"] == 1 << 16 for r in table)
    assert "gbps" in str(table)


def test_async_cancel_and_deadline(target):
    """Cancelling a task mid-scan cancels the call; a deadline raises DeadlineExceeded; the client
    carries on."""
    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=256, timeout=30) as c:
            got = []

            async def slow():
                for _ in range(500):
                    yield np.arange(1, 65, dtype=np.int32)
                    await asyncio.sleep(0.01)

            async def consume():
                async for part in c.scan_iter(slow()):
                    got.append(part)
            task = asyncio.create_task(consume())
            while not got:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert 0 < len(got) < 500
            assert await c.health() == "SERVING"
            assert await c.reduce(np.arange(1, 11, dtype=np.int64)) == 55
        async with gpuscan.AsyncClient(target, timeout=0.3) as c:
            async def stalls():
                yield np.arange(1, 10, dtype=np.int32)
                await asyncio.sleep(1.0)
                yield np.arange(1, 10, dtype=np.int32)
            with pytest.raises(gpuscan.DeadlineExceeded):
                async for _ in c.scan_iter(stalls()):
                    pass
            assert await c.reduce(np.arange(1, 11, dtype=np.int64)) == 55
    asyncio.run(main())
