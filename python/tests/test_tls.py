"""tls=: server-only and mutual TLS against servers started with certificates from
tests/common/make_test_certs.sh (openssl); a client without the right CA or certificate fails."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gpuscan
from gpuscan.testing import ServerProcess

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "common" / "make_test_certs.sh"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if not SCRIPT.exists() or not shutil.which("openssl"):
        pytest.skip("needs openssl and tests/common/make_test_certs.sh")
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(SCRIPT), str(d)], check=True, capture_output=True)
    return d


def test_tls_and_mutual_tls(server_binary, certs):
    x = np.arange(1, 101, dtype=np.int64)
    c = lambda name: str(certs / name)  # noqa: E731
    with ServerProcess(server_binary, extra=["--tls-cert", c("server.crt"), "--tls-key", c("server.key")]) as srv:
        with gpuscan.Client(srv.target, tls=gpuscan.Tls(ca_file=c("ca.crt")), timeout=20) as cl:
            np.testing.assert_array_equal(cl.scan(x), np.cumsum(x))
        with gpuscan.Client(srv.target.replace("127.0.0.1", "localhost"), timeout=20,
                            tls=gpuscan.Tls(ca_file=c("ca.crt"), server_name="localhost")) as cl:
            assert cl.reduce(x) == 5050
        with gpuscan.Client(srv.target, tls=gpuscan.Tls(ca_file=c("rogue-ca.crt")), timeout=5) as cl:
            with pytest.raises(gpuscan.Unavailable):
                cl.reduce(x)
        with gpuscan.Client(srv.target, timeout=5) as plain:  # plaintext towards a TLS server
            with pytest.raises(gpuscan.Unavailable):
                plain.reduce(x)
    mutual = ["--tls-cert", c("server.crt"), "--tls-key", c("server.key"), "--tls-client-ca", c("ca.crt")]
    with ServerProcess(server_binary, extra=mutual) as srv:
        tls = gpuscan.Tls(ca_file=c("ca.crt"), cert_file=c("client.crt"), key_file=c("client.key"))
        with gpuscan.Client(srv.target, tls=tls, timeout=20) as cl:
            assert cl.reduce(x, op="max") == 100
        rogue = gpuscan.Tls(ca_file=c("ca.crt"), cert_file=c("rogue-client.crt"), key_file=c("rogue-client.key"))
        with gpuscan.Client(srv.target, tls=rogue, timeout=5) as cl:
            with pytest.raises(gpuscan.Unavailable):
                cl.reduce(x)
    with pytest.raises(ValueError, match="cannot read"):
        gpuscan.Client("127.0.0.1:1", tls=gpuscan.Tls(ca_file=str(certs / "missing.crt")))
    with pytest.raises(ValueError, match="go together"):
        gpuscan.Client("127.0.0.1:1", tls=gpuscan.Tls(cert_file=c("client.crt")))
