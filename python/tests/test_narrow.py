"""Narrow inputs (issue 47): scan and reduce of int8, uint8, int16, uint16, bool and float16
arrays with numpy's dtype= (default: numpy's own rule), against np.cumsum / np.sum; chunk
boundaries (the chunks are cut so their results fit chunk_bytes); float16 against the server's own
float32 scan of the same values rounded once (its association is float32's); what the client and
the server refuse."""
import asyncio

import numpy as np
import pytest

import gpuscan
import raw
from gpuscan.v1 import gpuscan_pb2 as pb

NARROW = ["int8", "uint8", "int16", "uint16"]
SIZES = [0, 1, 4095, 4096, 4097, 512 * 3 + 1, 100003]


def values(rng, dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.4
    if dt.kind == "f":
        return (rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 2, n)).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


@pytest.fixture(scope="module", params=[None, False], ids=["default_path", "grpcio"])
def small_chunks(target, request):
    """Both data paths: the C API's where it loads (gpuscan_scan_header), and grpcio's."""
    with gpuscan.Client(target, chunk_bytes=4096, timeout=60, native=request.param) as c:
        yield c


@pytest.mark.parametrize("dtype", NARROW + ["bool"])
def test_integers_with_numpys_default_and_chosen_accumulators(small_chunks, rng, dtype):
    c = small_chunks
    for n in SIZES:
        x = values(rng, dtype, n)
        got = c.scan(x)
        want = np.cumsum(x)
        assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, n)
        assert c.last_timing.bytes_in == x.nbytes
        for acc in ("int32", "uint64", "float64"):
            got = c.scan(x, dtype=acc)
            assert got.dtype == np.dtype(acc) and np.array_equal(got, np.cumsum(x, dtype=acc)), (dtype, n, acc)
        ex = c.scan(x, exclusive=True, dtype="int64")
        assert np.array_equal(ex, np.concatenate([[0], np.cumsum(x, dtype="int64")[:-1]])[:n])
        assert c.scan(x, "max", dtype="int32").tolist() == np.maximum.accumulate(x.astype(np.int32)).tolist()
        r = c.reduce(x)
        assert r.dtype == np.sum(x).dtype and r == np.sum(x), (dtype, n)
        assert c.reduce(x, "min", dtype="int64") == (x.astype(np.int64).min() if n else np.iinfo(np.int64).max)


def test_float16_accumulates_in_float32_and_rounds_once(small_chunks, rng):
    c = small_chunks
    for n in SIZES:
        h = values(rng, "float16", n)
        got = c.scan(h)
        assert got.dtype == np.float16
        wide = c.scan(h.astype(np.float32))  # the same association, in float32
        assert np.array_equal(got.view(np.uint16), wide.astype(np.float16).view(np.uint16)), n
        assert np.array_equal(c.scan(h, dtype="float32").view(np.uint32), wide.view(np.uint32))
        v = c.reduce(h)
        assert v.dtype == np.float16
        assert v.view(np.uint16) == np.float16(c.reduce(h.astype(np.float32))).view(np.uint16)
    special = np.array([np.inf, -np.inf, np.nan, 65504, -0.0, 6e-8], np.float16)
    got = c.scan(special, "max")
    assert np.isinf(got[0]) and np.isnan(got[2]) and np.isnan(got[5])


def test_wide_inputs_with_another_dtype_are_converted_first(small_chunks, rng):
    x = values(rng, "int32", 10000)
    got = small_chunks.scan(x, dtype="int64")
    assert got.dtype == np.int64 and np.array_equal(got, np.cumsum(x, dtype=np.int64))
    assert small_chunks.reduce(x, dtype="float64") == np.sum(x, dtype=np.float64)


def test_async(target, rng):
    x = values(rng, "uint8", 50000)

    async def main():
        async with gpuscan.AsyncClient(target, chunk_bytes=1000, timeout=60) as ac:
            return await ac.scan(x, dtype="uint32"), await ac.reduce(x)
    s, r = asyncio.run(main())
    assert np.array_equal(s, np.cumsum(x, dtype=np.uint32)) and r == np.sum(x)


def test_client_refusals(small_chunks):
    c = small_chunks
    x = np.arange(10, dtype=np.int8)
    for bad in ("int16", "float16", "int8"):
        with pytest.raises(ValueError, match="dtype="):
            c.scan(x, dtype=bad)
    with pytest.raises(ValueError, match="float16 input"):
        c.scan(np.ones(3, np.float16), dtype="int64")
    with pytest.raises(ValueError, match="contiguous"):
        c.scan(np.arange(20, dtype=np.int16)[::2])
    assert np.array_equal(c.scan(np.arange(20, dtype=np.int16)[::2], copy=True), np.cumsum(np.arange(0, 20, 2)))
    with pytest.raises(ValueError, match="out must be"):
        c.scan(x, out=np.empty(10, np.int32))
    with pytest.raises(ValueError, match="dtype="):  # along an axis too (test_scan_axis.py)
        c.scan(np.ones((2, 3), np.int8), axis=1, dtype="int16")


def raw_scan(target, header, *chunks):
    return raw.call(target, "Scan", pb.ScanRequest(header=header), *(pb.ScanRequest(data=d) for d in chunks))


def test_server_refusals(target):
    i8 = pb.DTYPE_INT8
    with pytest.raises(gpuscan.InvalidArgument, match="header.output_dtype=DTYPE_INT16"):
        raw_scan(target, pb.ScanHeader(dtype=i8, op=pb.OPERATOR_SUM, output_dtype=pb.DTYPE_INT16))
    with pytest.raises(gpuscan.InvalidArgument, match="header.output_dtype=DTYPE_INT64 differs"):
        raw_scan(target, pb.ScanHeader(dtype=pb.DTYPE_INT32, op=pb.OPERATOR_SUM, output_dtype=pb.DTYPE_INT64))
    with pytest.raises(gpuscan.InvalidArgument, match="float16"):
        raw_scan(target, pb.ScanHeader(dtype=pb.DTYPE_FLOAT16, op=pb.OPERATOR_BIT_OR))
    with pytest.raises(gpuscan.InvalidArgument, match="int16 element size 2"):
        raw_scan(target, pb.ScanHeader(dtype=pb.DTYPE_INT16, op=pb.OPERATOR_SUM), b"abc")
    r = raw_scan(target, pb.ScanHeader(dtype=i8, op=pb.OPERATOR_SUM), bytes([1, 2, 255]))
    assert np.frombuffer(r[0].data, "<i8").tolist() == [1, 3, 2]


def test_info_lists_the_narrow_dtypes(client):
    assert client.info()["narrow_dtypes"] == ["int8", "uint8", "int16", "uint16", "float16"]
