"""Fixtures: one CPU gpuscan-server for the session (port 0, stopped at the end), or the server at
$GPUSCAN_TARGET when set (e.g. a CUDA server on the GPU machine)."""
import os

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


def _binary():
    b = default_server_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.skip("no gpuscan-server binary: set GPUSCAN_SERVER or build build/bin/gpuscan-server")
    return b


@pytest.fixture(scope="session")
def server_binary():
    return _binary()


@pytest.fixture(scope="session")
def target():
    if os.environ.get("GPUSCAN_TARGET"):
        yield os.environ["GPUSCAN_TARGET"]
        return
    with ServerProcess(_binary(), engine=os.environ.get("GPUSCAN_TEST_ENGINE", "cpu")) as srv:
        yield srv.target


@pytest.fixture(scope="session")
def client(target):
    with gpuscan.Client(target, chunk_bytes=SMALL_CHUNK_BYTES, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def big_client(target):
    with gpuscan.Client(target, timeout=60) as c:
        yield c


@pytest.fixture()
def rng(request):
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)
