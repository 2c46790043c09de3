"""Fixtures: one CPU gpuscan-server for the session (port 0, stopped at the end; shared memory
from a directory of /dev/shm made for the session and removed after it; resident arrays within
RESIDENT_BYTES), or the server at
$GPUSCAN_TARGET when set (e.g. a CUDA server on the GPU machine)."""
import contextlib
import os
import shutil
import tempfile

import numpy as np
import pytest

import gpuscan
from gpuscan.testing import ServerProcess, default_server_binary

try:  # no example database written into the tree
    from hypothesis import settings
    settings.register_profile("gpuscan", database=None, print_blob=True)
    settings.load_profile("gpuscan")
except ImportError:  # the property tests skip
    pass

# Tiny chunks so small arrays cross many chunk boundaries: 64 bytes = 16 int32 / 8 int64.
SMALL_CHUNK_BYTES = 64

# The session server keeps resident arrays (test_resident.py): 256 MiB for every tenant together.
RESIDENT_BYTES = 256 << 20
RESIDENT_ARGS = ("--resident-bytes", str(RESIDENT_BYTES))


def _binary():
    b = default_server_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.skip("no gpuscan-server binary: set GPUSCAN_SERVER_BIN or build build/bin/gpuscan-server")
    return b


@pytest.fixture(scope="session")
def server_binary():
    return _binary()


def make_shm_dir() -> str:
    """A private directory for shared-memory regions: under /dev/shm when there is one."""
    return tempfile.mkdtemp(prefix="gpuscan-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


@pytest.fixture(scope="session")
def target():
    if os.environ.get("GPUSCAN_TARGET"):
        yield os.environ["GPUSCAN_TARGET"]
        return
    shm_dir = make_shm_dir()
    try:
        with ServerProcess(_binary(), engine=os.environ.get("GPUSCAN_TEST_ENGINE", "cpu"), shm_dir=shm_dir,
                           extra=RESIDENT_ARGS) as srv:
            yield srv.target
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def client(target):
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def big_client(target):
    with gpuscan.Client(target, timeout=60) as c:
        yield c


@contextlib.contextmanager
def tenant_client(target, request, needs, why):
    """A client of `target` for the test's own tenant, with the tiny chunks; the test skipped (why)
    where the server's operations lack `needs`; its arrays dropped after."""
    name = f"{request.module.__name__}-{request.node.name}"
    tenant = name[:128].replace("[", "-").replace("]", "")
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60, tenant=tenant) as c:
        if needs not in c.info()["operations"]:
            pytest.skip(why)
        yield c
        for r in c.arrays():
            r.drop()


@pytest.fixture()
def own(target, request):
    """tenant_client of the session's server, skipped where it keeps no resident arrays.
    (test_pipeline.py and test_resident.py define their own: other servers.)"""
    with tenant_client(target, request, "resident",
                       "the server keeps no resident arrays (start it with --resident-bytes)") as c:
        yield c


@pytest.fixture(scope="module")
def small_chunks(target):
    """A client of 4096-byte requests: a matrix or a few thousand elements cross several chunks
    (test_narrow's runs on both data paths)."""
    with gpuscan.Client(target, chunk_bytes=4096, timeout=60) as c:
        yield c


@pytest.fixture()
def serve_servicer():
    """serve_servicer(servicer, workers=4) -> target: a plain grpcio server for a GpuScan
    servicer (the tests' stand-in servers) on a free port, stopped at the end of the test."""
    import grpc
    from concurrent import futures
    from gpuscan.v1 import gpuscan_pb2_grpc as pb_grpc
    servers = []

    def start(servicer, workers=4):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
        pb_grpc.add_GpuScanServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"
    yield start
    for s in servers:
        s.stop(grace=None)


@pytest.fixture()
def rng(request):
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)
