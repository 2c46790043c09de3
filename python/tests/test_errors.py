"""Bad inputs: a ValueError before any call for what the client can judge, the gpuscan.Error
subclass with the gRPC code and the server's message for what the server judges."""
import grpc
import numpy as np
import pytest

import gpuscan
from gpuscan.testing import ServerProcess


@pytest.mark.parametrize("x, what", [
    (np.arange(10, dtype=np.int32)[::2], "not contiguous"),
    (np.arange(10, dtype=">i4"), "big-endian"),
    (np.arange(10, dtype=np.complex64), "not served"),
    (np.ones((2, 3), np.float32), "1-D"),
    (np.ones((3, 2), np.float32).T, "contiguous"),
    (np.float32(3), "scalar"),
])
def test_client_side_value_errors(client, x, what):
    if what == "1-D":  # reduce, compact, histogram and scan flatten a C-contiguous matrix, as numpy (test_nd.py)
        calls = [lambda: client.sort(x), lambda: client.argsort(x)]
    else:
        calls = [lambda: client.reduce(x), lambda: client.compact(x, predicate=("gt", 0)), lambda: client.scan(x)]
    for call in calls:
        with pytest.raises(ValueError, match=what):
            call()


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float16", "bool"])
def test_narrow_dtypes_in_streamed_calls(client, dtype):
    """Streamed calls take narrow dtypes (test_narrow.py, test_narrow_ops.py), scan2d too
    (test_scan_axis.py), in numpy's accumulator."""
    x = np.arange(1, 11).astype(dtype)
    m = x.reshape(2, 5)
    got, want = client.scan2d(m), np.cumsum(np.cumsum(m, 0), 1)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert client.reduce(x) == np.sum(x)
    assert np.array_equal(client.sort(x[::-1].copy()), np.sort(x))


def test_argument_value_errors(client):
    x = np.arange(1, 9, dtype=np.int32)
    with pytest.raises(ValueError, match="unknown operator"):
        client.scan(x, op="avg")
    with pytest.raises(ValueError, match="unknown scan algorithm"):
        client.scan(x, algorithm="magic")
    with pytest.raises(ValueError, match="unknown predicate"):
        client.compact(x, predicate=("approx", 1))
    with pytest.raises(ValueError, match="takes 2"):
        client.compact(x, predicate=("in_range", 1))
    with pytest.raises(ValueError, match="does not fit"):
        client.compact(x, predicate=("gt", 2**40))
    with pytest.raises(ValueError, match="exactly one"):
        client.compact(x)
    with pytest.raises(ValueError, match="shape"):
        client.compact(x, where=np.ones(3, bool))
    with pytest.raises(ValueError, match="out must be"):
        client.scan(x, out=np.empty(8, np.int64))
    with pytest.raises(ValueError, match="lanes"):
        gpuscan.Client("127.0.0.1:1", lanes=0)
    with pytest.raises(ValueError, match="chunk_bytes"):
        gpuscan.Client("127.0.0.1:1", chunk_bytes=0)


def test_big_endian_copy_when_asked(client):
    x = np.arange(1, 20, dtype=">i8")
    np.testing.assert_array_equal(client.scan(x.astype("<i8")), np.cumsum(np.arange(1, 20)))
    y = client.scan(x, copy=True)
    assert y.dtype == np.int64 and y.dtype.byteorder in "=<"
    np.testing.assert_array_equal(y, np.cumsum(np.arange(1, 20)))
    strided = np.arange(1, 101, dtype=np.float32)[::3]
    assert client.reduce(strided, op="max", copy=True) == np.float32(100)
    np.testing.assert_array_equal(client.compact(strided, predicate=("gt", 50), copy=True), strided[strided > 50])
    with pytest.raises(ValueError, match="not served"):
        client.compact(np.arange(5, dtype=np.complex64), predicate=("gt", 0), copy=True)
    # A list is converted (the copy the caller asked for by passing one).
    np.testing.assert_array_equal(client.scan([3, 1, 2]), [3, 4, 6])


def test_invalid_argument_from_server(client):
    x = np.linspace(1, 2, 40, dtype=np.float32)
    with pytest.raises(gpuscan.InvalidArgument) as e:
        client.scan(x, op="bit_xor")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and e.value.message
    with pytest.raises(gpuscan.InvalidArgument):
        client.reduce(x, op="bit_and")
    assert isinstance(e.value, gpuscan.Error)


def test_unimplemented_algorithm(client):
    offered = set(client.info()["scan_algorithms"])
    missing = [a for a in ("cub", "kogge_stone", "decoupled_lookback", "cpu_blocked") if a not in offered]
    if not missing:
        pytest.skip("this server offers every algorithm tried")
    with pytest.raises(gpuscan.Unimplemented) as e:
        client.scan(np.arange(1, 100, dtype=np.int32), algorithm=missing[0])
    assert e.value.code == grpc.StatusCode.UNIMPLEMENTED


def test_failed_precondition_benchmark_on_cpu(client):
    if client.info()["engine"] != "cpu":
        pytest.skip("not a cpu server")
    with pytest.raises(gpuscan.FailedPrecondition):
        client.benchmark(operations=["scan"], sizes=[1024])


def test_benchmark_device_not_served(client):
    served = [d["ordinal"] for d in client.info()["devices"]] if client.info()["devices"] else []
    with pytest.raises(gpuscan.InvalidArgument, match=r"devices\[0\]=77 is not a device this server serves"):
        client.benchmark(operations=["scan"], sizes=[1024], devices=[77])
    assert 77 not in served


def test_unavailable():
    with gpuscan.Client("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(gpuscan.Unavailable) as e:
            c.scan(np.arange(1, 10, dtype=np.int32))
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(gpuscan.Unavailable):
            c.health()


@pytest.fixture(scope="module")
def small_server(server_binary):
    with ServerProcess(server_binary, extra=["--chunk-bytes", "256", "--max-request-bytes", "4096"]) as s:
        yield s


def test_resource_exhausted(small_server):
    with gpuscan.Client(small_server.target, chunk_bytes=1024, timeout=30) as c:
        with pytest.raises(gpuscan.ResourceExhausted) as e:  # chunk above the server's 256 bytes
            c.scan(np.arange(1, 1000, dtype=np.int32))
        assert "256" in e.value.message or e.value.message
    with gpuscan.Client(small_server.target, chunk_bytes=256, timeout=30) as c:
        with pytest.raises(gpuscan.ResourceExhausted):  # 8000 bytes above --max-request-bytes 4096
            c.reduce(np.arange(1, 2001, dtype=np.int32))
        np.testing.assert_array_equal(c.scan(np.arange(1, 101, dtype=np.int32)), np.cumsum(np.arange(1, 101)))
        with pytest.raises(gpuscan.ResourceExhausted):  # one lane fails: every lane is cancelled
            c.transport(3000, chunk_bytes=1000, lanes=3)
        assert c.transport(3000, chunk_bytes=200, lanes=3).bytes_received == 3000


def test_error_mapping_is_total():
    for code in grpc.StatusCode:
        if code == grpc.StatusCode.OK:
            continue
        err = gpuscan.errors.error_for(code, "m")
        assert isinstance(err, gpuscan.Error) and err.code == code and err.message == "m"
        assert type(err).__name__.lower() == code.name.replace("_", "").lower()


def test_errors_pickle():
    """An error crosses processes (multiprocessing, dask workers) as itself: class, code, message
    and text, the code not prefixed twice."""
    import pickle
    for e in (gpuscan.Unavailable("server 127.0.0.1:1 down"), gpuscan.Error("odd", grpc.StatusCode.ABORTED),
              gpuscan.Internal()):
        e2 = pickle.loads(pickle.dumps(e))
        assert (type(e2), e2.code, e2.message, str(e2)) == (type(e), e.code, e.message, str(e))
