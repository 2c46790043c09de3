"""The public surface both clients share: timeout= on every call (None: the client's; 0: none;
checked), docstrings on every public method, the data path each client reports (native with its
library, or grpcio and why), and where gpuscan._native looks for the library."""
import asyncio
import inspect
import os
import time
from concurrent import futures

import grpc

import numpy as np
import pytest

import gpuscan
from gpuscan import _native
from gpuscan.aio import AsyncClient

SLOW_CHUNK = 256  # bytes: 64 int32 per message
SLOW_N = 1 << 17  # 512 KiB in 2048 messages: each call takes 0.2 s or more, 20x TINY
TINY = 0.01

# name -> (positional args, keyword args) of a call that streams SLOW_N elements
_x = np.ones(SLOW_N, np.int32)
_keys = (np.arange(SLOW_N) // 1000).astype(np.int32)
SLOW_CALLS = {
    "scan": ((_x,), {}),
    "reduce": ((_x,), {}),
    "compact": ((_x,), {"predicate": ("gt", 0)}),
    "histogram": ((_x, 16), {"range": (0, 2)}),
    "segmented_scan": ((_x, _keys), {}),
    "scan2d": ((_x.reshape(1024, -1),), {}),
    "reduce_by_key": ((_x, _keys), {}),
    "sort": ((_x,), {}),
    "argsort": ((_x,), {}),
    "transport": ((SLOW_N * 4,), {"chunk_bytes": SLOW_CHUNK}),
}
QUICK_CALLS = {"info": ((), {}), "health": ((), {}), "benchmark": ((), {})}  # one request each
# resident arrays (test_resident.py): a call each, by id where it takes one
RESIDENT_CALLS = {"put": ((_x,), {}), "get": ((bytes(24),), {}), "drop": ((bytes(24),), {}), "arrays": ((), {})}
PUBLIC_CALLS = set(SLOW_CALLS) | set(QUICK_CALLS) | set(RESIDENT_CALLS) | {"scan_iter", "shared_array"}


def public_methods(cls):
    return {n: f for n, f in vars(cls).items() if not n.startswith("_") and inspect.isfunction(f)}


@pytest.mark.parametrize("cls", [gpuscan.Client, AsyncClient], ids=lambda c: c.__name__)
def test_every_call_takes_timeout_and_has_a_docstring(cls):
    methods = public_methods(cls)
    assert PUBLIC_CALLS <= set(methods), PUBLIC_CALLS - set(methods)
    for name, f in methods.items():
        assert inspect.getdoc(f), f"{cls.__name__}.{name} has no docstring"
        if name in PUBLIC_CALLS:
            p = inspect.signature(f).parameters.get("timeout")
            assert p is not None and p.default is None and p.kind == p.KEYWORD_ONLY, (name, p)
    for prop in ("last_timing", "data_path"):
        assert inspect.getdoc(getattr(cls, prop)), prop


def test_pipelines_share_one_surface():
    """c.pipeline() (ClientBase's: one method for both clients) makes a gpuscan.Pipeline whose stage
    methods are documented and take their call's arguments, and whose run() takes timeout= and
    retries= as every call does (test_pipeline.py runs them)."""
    assert gpuscan.Client.pipeline is AsyncClient.pipeline and inspect.getdoc(gpuscan.Client.pipeline)
    methods = public_methods(gpuscan.Pipeline)
    assert {"scan", "reduce", "histogram", "compact", "segmented_scan", "sort", "argsort", "run"} <= set(methods)
    for name, f in methods.items():
        assert inspect.getdoc(f), f"Pipeline.{name} has no docstring"
        if name == "run":
            continue
        stage, call = inspect.signature(f).parameters, inspect.signature(getattr(gpuscan.Client, name)).parameters
        for arg, p in stage.items():  # each a parameter of the call, of the same kind and default
            if arg in ("self", "fetch"):
                continue
            assert arg in call and (call[arg].kind, call[arg].default) == (p.kind, p.default), (name, arg)
    for arg in ("timeout", "retries"):
        p = inspect.signature(gpuscan.Pipeline.run).parameters[arg]
        assert p.default is None and p.kind == p.KEYWORD_ONLY
    for cls in (gpuscan.Stage, gpuscan.PipelineResult, gpuscan.StageOutput):
        assert inspect.getdoc(cls) and cls.__name__ in gpuscan.__all__


def test_async_docstrings_are_the_sync_ones():
    for name in PUBLIC_CALLS:
        sync, coro = inspect.getdoc(getattr(gpuscan.Client, name)), inspect.getdoc(getattr(AsyncClient, name))
        assert coro.startswith(f"As Client.{name}, awaited") and coro.endswith(sync), name


def _sync(client, name, args, kw):
    return getattr(client, name)(*args, **kw)


def _async(target, client_kw, name, args, kw):
    async def main():
        async with AsyncClient(target, **client_kw) as c:
            return await getattr(c, name)(*args, **kw)
    return asyncio.run(main())


# Known defect (docs/RELIABILITY.md, "Known defects"): with grpcio 1.84 (the H100 host's), an
# asyncio call that meets its deadline while the upload is still going surfaces as INTERNAL "lost
# its status" (grpc/grpc#36066), not DeadlineExceeded; Debian's 1.51 reports the deadline. Not
# strict: it fails some runs and passes others.
_ASYNC_DEADLINE_LOST = pytest.mark.xfail(
    tuple(int(p) for p in grpc.__version__.split(".")[:2]) >= (1, 84), strict=False,
    reason="grpcio >= 1.84 asyncio loses DEADLINE_EXCEEDED mid-upload (grpc/grpc#36066)")


@pytest.mark.parametrize("bad", [-1, "1", True, float("nan"), float("inf")], ids=repr)
def test_timeout_is_checked_before_any_call(bad):
    with gpuscan.Client("127.0.0.1:1", native=False) as c:  # nothing listens: a call would fail otherwise
        for name, (args, kw) in {**SLOW_CALLS, **QUICK_CALLS, **RESIDENT_CALLS}.items():
            with pytest.raises(ValueError, match="timeout"):
                _sync(c, name, args, dict(kw, timeout=bad))
        with pytest.raises(ValueError, match="timeout"):
            list(c.scan_iter([_x[:10]], timeout=bad))
    for name, (args, kw) in {**SLOW_CALLS, **RESIDENT_CALLS}.items():
        with pytest.raises(ValueError, match="timeout"):
            _async("127.0.0.1:1", {}, name, args, dict(kw, timeout=bad))


@pytest.mark.parametrize("name", sorted(SLOW_CALLS))
def test_call_timeout_overrides_the_clients(target, name):
    """A tiny timeout= fails a slow call with DeadlineExceeded on a client without one; a generous
    one (and 0: none) lets it through on a client whose own timeout is tiny."""
    args, kw = SLOW_CALLS[name]
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK) as c:
        with pytest.raises(gpuscan.DeadlineExceeded):
            _sync(c, name, args, dict(kw, timeout=TINY))
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK, timeout=TINY) as c:
        assert _sync(c, name, args, dict(kw, timeout=120)) is not None
        with pytest.raises(gpuscan.DeadlineExceeded):  # None: the client's
            _sync(c, name, args, kw)
        if name in ("scan", "reduce"):
            assert _sync(c, name, args, dict(kw, timeout=0)) is not None  # 0: no deadline


@_ASYNC_DEADLINE_LOST
@pytest.mark.parametrize("name", sorted(SLOW_CALLS))
def test_async_call_timeout_overrides_the_clients(target, name):
    args, kw = SLOW_CALLS[name]
    with pytest.raises(gpuscan.DeadlineExceeded):
        _async(target, {"chunk_bytes": SLOW_CHUNK}, name, args, dict(kw, timeout=TINY))
    assert _async(target, {"chunk_bytes": SLOW_CHUNK, "timeout": TINY}, name, args, dict(kw, timeout=120)) is not None


@pytest.fixture()
def stalling_target():
    """A stand-in server whose GetServerInfo, Benchmark and health Check answer after STALL
    seconds (a real server answers them faster than a deadline timer fires)."""
    from gpuscan.v1 import gpuscan_pb2 as pb
    from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc

    class Stalls(pb_grpc.GpuScanServicer):
        def GetServerInfo(self, request, context):
            time.sleep(STALL)
            return pb.ServerInfo(engine="stand-in")

        def Benchmark(self, request, context):
            time.sleep(STALL)
            return iter(())

    def check(request, context):
        time.sleep(STALL)
        return b"\x08\x01"  # HealthCheckResponse{status: SERVING}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_GpuScanServicer_to_server(Stalls(), server)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


STALL = 0.5


def test_quick_calls_take_timeout(stalling_target):
    with gpuscan.Client(stalling_target, timeout=60) as c:
        for name, (args, kw) in QUICK_CALLS.items():
            with pytest.raises(gpuscan.DeadlineExceeded):
                _sync(c, name, args, dict(kw, timeout=0.05))
        with pytest.raises(gpuscan.DeadlineExceeded):
            c.shared_array(16, timeout=0.05)  # asks info() for the server's --shm-dir
    with gpuscan.Client(stalling_target, timeout=0.05) as c:
        assert c.health(timeout=30) == "SERVING" and c.info(timeout=30)["engine"] == "stand-in"
        assert c.benchmark(timeout=0) == []
        with pytest.raises(gpuscan.DeadlineExceeded):
            c.health()

    async def main():
        async with AsyncClient(stalling_target, timeout=60) as c:
            for name, (args, kw) in QUICK_CALLS.items():
                with pytest.raises(gpuscan.DeadlineExceeded):
                    await getattr(c, name)(*args, **kw, timeout=0.05)
            with pytest.raises(gpuscan.DeadlineExceeded):
                await c.shared_array(16, timeout=0.05)
        async with AsyncClient(stalling_target, timeout=0.05) as c:
            assert await c.health(timeout=30) == "SERVING" and (await c.info(timeout=0))["engine"] == "stand-in"
    asyncio.run(main())


@_ASYNC_DEADLINE_LOST
def test_scan_iter_timeout(target):
    chunks = [_x[i:i + 4096] for i in range(0, SLOW_N, 4096)]
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK) as c:
        with pytest.raises(gpuscan.DeadlineExceeded):
            for _ in c.scan_iter(chunks, timeout=TINY):
                pass
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK, timeout=TINY) as c:
        assert sum(len(y) for y in c.scan_iter(chunks, timeout=120)) == SLOW_N

    async def main():
        async with AsyncClient(target, chunk_bytes=SLOW_CHUNK) as c:
            with pytest.raises(gpuscan.DeadlineExceeded):
                async for _ in c.scan_iter(chunks, timeout=TINY):
                    pass
        async with AsyncClient(target, chunk_bytes=SLOW_CHUNK, timeout=TINY) as c:
            assert sum([len(y) async for y in c.scan_iter(chunks, timeout=120)]) == SLOW_N
    asyncio.run(main())


@pytest.mark.skipif(_native.library()[0] is None, reason=f"no C API here: {_native.library()[1]}")
def test_native_client_takes_a_calls_own_timeout(target, monkeypatch):
    """A call's timeout= (the client's, its own, 0: none) goes through the C API with the call: the
    native path serves it, and past the deadline the call is DeadlineExceeded."""
    monkeypatch.delenv("GPUSCAN_NATIVE", raising=False)
    x = np.arange(1, 5001, dtype=np.int64)
    took = []
    kind = _native.NativeClient  # counted on the class: a call runs on a view of the handle (timed)
    for op in ("scan", "reduce", "compact"):
        real = getattr(kind, op)
        monkeypatch.setattr(kind, op, lambda self, *a, _op=op, _real=real: took.append(_op) or _real(self, *a))
    with gpuscan.Client(target, timeout=60) as c:
        assert c.data_path.name == "native"
        for t in (None, 60, 30, 0):
            np.testing.assert_array_equal(c.scan(x, timeout=t), np.cumsum(x))
            assert c.reduce(x, timeout=t) == x.sum()
            np.testing.assert_array_equal(c.compact(x, predicate=("gt", 2500), timeout=t), x[x > 2500])
        assert took == ["scan", "reduce", "compact"] * 4
    took.clear()
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK, timeout=60) as c:  # its own, tiny: past it
        for call in (lambda: c.scan(_x, timeout=TINY), lambda: c.reduce(_x, timeout=TINY)):
            with pytest.raises(gpuscan.DeadlineExceeded):
                call()
        assert took == ["scan", "reduce"]
    took.clear()
    with gpuscan.Client(target, chunk_bytes=SLOW_CHUNK, timeout=TINY) as c:  # the client's tiny, the call's not
        assert c.reduce(_x, timeout=120) == _x.sum() and c.reduce(_x, timeout=0) == _x.sum()
        with pytest.raises(gpuscan.DeadlineExceeded):
            c.reduce(_x)
        assert took == ["reduce"] * 3


def test_server_binary_variable_is_not_the_clis_address(monkeypatch, tmp_path):
    """GPUSCAN_SERVER_BIN names the binary gpuscan.testing and gpuscan.bench start; GPUSCAN_SERVER
    is the server's address (the CLI's): an address there is not taken for a file, and a file
    there still works, with a DeprecationWarning."""
    from gpuscan.testing import default_server_binary
    binary = tmp_path / "gpuscan-server"
    binary.write_text("#!/bin/sh\n")
    monkeypatch.delenv("GPUSCAN_SERVER_BIN", raising=False)
    monkeypatch.setenv("GPUSCAN_SERVER", "127.0.0.1:50880")
    assert default_server_binary() != "127.0.0.1:50880"
    monkeypatch.setenv("GPUSCAN_SERVER", str(binary))
    with pytest.warns(DeprecationWarning, match="GPUSCAN_SERVER_BIN"):
        assert default_server_binary() == str(binary)
    monkeypatch.setenv("GPUSCAN_SERVER_BIN", "/elsewhere/gpuscan-server")
    assert default_server_binary() == "/elsewhere/gpuscan-server"


def test_data_path_reported(target, monkeypatch):
    monkeypatch.delenv("GPUSCAN_NATIVE", raising=False)
    with gpuscan.Client(target, native=False) as c:
        assert c.data_path == gpuscan.DataPath("grpcio", None, "native=False")
        assert c.info()["data_path"] == {"name": "grpcio", "library": None, "reason": "native=False"}
    with gpuscan.Client(target, options=[("grpc.max_receive_message_length", -1)]) as c:
        assert c.data_path.name == "grpcio" and "options" in c.data_path.reason
    with gpuscan.Client(target) as c:
        lib, why = _native.library()
        if lib is None:
            assert c.data_path.name == "grpcio" and why in c.data_path.reason
        else:
            assert c.data_path.name == "native" and c.data_path.reason == ""
            assert c.data_path.library == _native.library_path() and os.path.isfile(c.data_path.library)
            assert c.info()["data_path"]["library"] == c.data_path.library
    monkeypatch.setenv("GPUSCAN_NATIVE", "0")
    with gpuscan.Client(target) as c:
        assert c.data_path.name == "grpcio" and "GPUSCAN_NATIVE=0" in c.data_path.reason

    async def main():
        async with AsyncClient(target) as c:
            assert c.data_path.name == "grpcio" and c.data_path.reason
            assert (await c.info())["data_path"] == c.data_path.as_dict()
    asyncio.run(main())


def test_library_candidates(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUSCAN_NATIVE_LIB", raising=False)
    paths = _native.candidates()
    here = os.path.dirname(os.path.abspath(_native.__file__))
    assert paths[0] == os.path.join(here, "libgpuscan_capi.so")
    assert "/usr/local/lib/libgpuscan_capi.so" in paths and len(paths) == len(set(paths))
    monkeypatch.setenv("GPUSCAN_NATIVE_LIB", str(tmp_path / "mine.so"))
    assert _native.candidates() == [str(tmp_path / "mine.so")]  # that file alone
    lib, path, why = _native.find([str(tmp_path / "none.so")])
    assert lib is None and path == "" and "not found" in why and "none.so" in why
    (tmp_path / "bad.so").write_bytes(b"not a library")
    lib, path, why = _native.find([str(tmp_path / "none.so"), str(tmp_path / "bad.so")])
    assert lib is None and "bad.so" in why  # one that exists and fails: said why
    if _native.library()[0] is not None:  # the first that loads wins
        lib, path, why = _native.find([str(tmp_path / "bad.so"), _native.library_path()])
        assert lib is not None and path == _native.library_path() and why == ""
