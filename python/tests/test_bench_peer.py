"""The bench's do-it-yourself peer (gpuscan._peer, issue 12): its scan against numpy's, wrap-around
included, and the bench's peer_scan row."""
import json
from concurrent import futures

import grpc
import numpy as np
import pytest

from gpuscan import _peer, bench


@pytest.fixture(scope="module")
def peer():
    with _peer.PeerProcess() as p:
        yield p
        assert "Warning" not in p.log_text()  # wrapping sums neither raise nor warn


def full_range(rng, n, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint16", "int64"])
def test_peer_scan_partial_chunks_wrap(peer, rng, dtype):
    x = full_range(rng, 1000, dtype)  # 64-byte chunks: not a whole number of them; sums wrap
    out = np.full_like(x, 7)
    assert _peer.peer_scan(peer.target, x, out, chunk_bytes=64) is out
    np.testing.assert_array_equal(out, np.cumsum(x, dtype=dtype))


def test_peer_scan_empty_and_float(peer):
    x = np.empty(0, np.int32)
    assert _peer.peer_scan(peer.target, x, np.empty_like(x), 64).size == 0
    f = np.arange(100, dtype=np.float64) / 4  # exact in float64: the order of the sums does not matter
    np.testing.assert_array_equal(_peer.peer_scan(peer.target, f, np.empty_like(f), 40), np.cumsum(f))


def test_peer_scan_refuses_a_bad_out_and_short_answers(peer):
    x = np.arange(10, dtype=np.int32)
    with pytest.raises(ValueError):
        _peer.peer_scan(peer.target, x, np.empty(10, np.int64), 64)
    # A server that answers only the first chunk: the client notices the missing elements.
    short = grpc.method_handlers_generic_handler("peer.Peer", {"Scan": grpc.stream_stream_rpc_method_handler(
        lambda requests, context: iter([next(iter(requests))]))})
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((short,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(RuntimeError, match="returned 4 of 10"):
            _peer.peer_scan(f"127.0.0.1:{port}", x, np.empty_like(x), 16)
    finally:
        server.stop(None)


def test_bench_peer_row(server_binary, tmp_path, capsys):
    out = tmp_path / "bench.json"
    # 3,000,000 bytes of int32: two 1 MiB chunks and a partial one; full-range random ints, so the
    # running sums wrap many times.
    assert bench.main(["--server", server_binary, "--engine", "cpu", "--size", "3000000", "--repeat", "1",
                       "--shared", "off", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = {r["operation"]: r for r in data["rows"]}
    peer = rows["peer_scan"]
    assert peer["verified"] is True and rows["scan"]["verified"] is True
    assert peer["gbps"] > 0 and peer["bytes"] == 3000000 and peer["pct_of_transport_echo"] > 0
    assert peer["peer_backend"] in ("numpy", "cupy") and data["setup"]["peer_backend"] == peer["peer_backend"]
    assert [r["operation"] for r in data["rows"]].index("peer_scan") == \
        [r["operation"] for r in data["rows"]].index("scan") + 1  # measured right after ours
    assert f"peer_scan (grpcio + {peer['peer_backend']})" in capsys.readouterr().out


def test_bench_peer_float_only_when_asked(server_binary, tmp_path):
    out = tmp_path / "bench.json"
    args = ["--server", server_binary, "--engine", "cpu", "--size", "100000", "--dtype", "float32",
            "--repeat", "1", "--shared", "off", "--json", str(out)]
    assert bench.main(args) == 0  # auto: integers only
    assert "peer_scan" not in [r["operation"] for r in json.loads(out.read_text())["rows"]]
    assert bench.main(args + ["--peer", "on"]) == 0  # on: floats too, unverified (bits differ from ours)
    peer = {r["operation"]: r for r in json.loads(out.read_text())["rows"]}["peer_scan"]
    assert peer["gbps"] > 0 and "verified" not in peer
