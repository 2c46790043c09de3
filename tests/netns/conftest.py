"""Fixtures of the netns tests: the network namespace with its veth pair (one for the session),
the server binary, TLS material, a seeded random generator. Where namespaces cannot be made
(not root, no CAP_NET_ADMIN, no iproute2, `ip netns add` refused) every test skips with the
reason and pytest exits 77, which CTest reports as skipped (SKIP_RETURN_CODE 77)."""
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

SKIPPED_EXIT = 77
CERT_SCRIPT = Path(__file__).resolve().parents[1] / "common" / "make_test_certs.sh"

_skip_reason = []  # the reason the namespace fixture skipped, once known

try:
    import gpuscan  # noqa: F401
    import netns
    _import_error = None
except ImportError as e:  # no PYTHONPATH at build/python/pkg, or no grpcio/numpy
    netns = None
    _import_error = f"cannot import gpuscan ({e}): set PYTHONPATH to build/python/pkg"


@pytest.fixture(scope="session")
def server_binary():
    if _import_error:
        _skip_reason.append(_import_error)
        pytest.skip(_import_error)
    from gpuscan.testing import default_server_binary
    b = default_server_binary()
    if not b or not os.access(b, os.X_OK):
        pytest.skip("no gpuscan-server binary: set GPUSCAN_SERVER_BIN or build build/bin/gpuscan-server")
    return b


@pytest.fixture(scope="session")
def veth(server_binary):
    """A VethNamespace (gpuscan-t<pid>-srv, 10.213.X.0/24) for the session, removed at its end;
    teardown checks that nothing of it is left."""
    reason = netns.unavailable_reason()
    if reason:
        _skip_reason.append(reason)
        pytest.skip(f"netns: {reason}")
    ns = netns.VethNamespace("srv")
    print(f"\nnetns: {ns.name}, {ns.host_if} {ns.host_ip} <-> {ns.ns_if} {ns.ns_ip} ({ns.subnet})")
    try:
        yield ns
    finally:
        ns.destroy()
    assert ns.exists() == (False, False), f"{ns.name} or {ns.host_if} left behind"


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    if not CERT_SCRIPT.exists() or not shutil.which("openssl"):
        pytest.skip("needs openssl and tests/common/make_test_certs.sh")
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(CERT_SCRIPT), str(d)], check=True, capture_output=True)
    return d


@pytest.fixture()
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def pytest_sessionfinish(session, exitstatus):
    """Exit 77 (skipped) when the namespace could not be made and nothing failed."""
    if _skip_reason and exitstatus == 0:
        print(f"\nnetns tests skipped: {_skip_reason[0]}")
        session.exitstatus = SKIPPED_EXIT
