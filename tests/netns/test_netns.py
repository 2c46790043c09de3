"""gpuscan over a real network stack: the server in a network namespace of its own, the client in
the root namespace, a veth pair between them (netns.py). In plaintext, TLS and mutual TLS:

- every RPC the Python client offers, once or twice each, against numpy on random data;
- clients the server must refuse (wrong CA, no or a foreign client certificate, a name the
  certificate does not hold, plaintext towards TLS and back);
- the link taken down in the middle of a long streamed scan: the client fails with UNAVAILABLE
  or DEADLINE_EXCEEDED within its deadline, the server frees the call (its /metrics gauges back
  to their baseline once the link is up again) and a retried call and a fresh client get correct
  results.

CTest: `ctest -L netns` (root; skips with the reason elsewhere). docs/RELIABILITY.md, "Across a
network namespace"."""
import threading
import time

import numpy as np
import pytest

import gpuscan
import netns

MODES = ("plain", "tls", "mtls")
CHUNK_BYTES = 1024      # the checks' arrays cross many chunk boundaries (256 int32 a chunk)
N = 3000
LINK_DEADLINE_S = 3.0   # the client's deadline in the link-down test
MARGIN_S = 1.5          # how late past it the client may report
SLOW_CHUNK_BYTES = 64   # the server's smallest chunk: 16 int32 a message
SLOW_N = 1 << 22        # 262,144 messages each way: far longer than the deadline here
FREED_WITHIN_S = 20.0   # the server's gauges back to baseline this long after the link is up
GAUGES = ("gpuscan_requests_in_flight", "gpuscan_admission_running", "gpuscan_admission_queued")


class Served:
    """A server of one security mode in the namespace, and how a good client reaches it."""

    def __init__(self, mode, server, certs):
        self.mode, self.server, self.target = mode, server, server.target
        c = lambda name: str(certs / name)  # noqa: E731
        self.cert = c
        # The test certificate names localhost and 127.0.0.1, not the veth address: the client
        # verifies it against "localhost" (grpc.ssl_target_name_override).
        self.tls = None if mode == "plain" else gpuscan.Tls(
            ca_file=c("ca.crt"), server_name="localhost",
            **({"cert_file": c("client.crt"), "key_file": c("client.key")} if mode == "mtls" else {}))

    def client(self, **kw):
        kw.setdefault("timeout", 20)
        kw.setdefault("tls", self.tls)
        return gpuscan.Client(self.target, **kw)


@pytest.fixture(scope="module", params=MODES)
def served(request, veth, certs, server_binary):
    mode = request.param
    c = lambda name: str(certs / name)  # noqa: E731
    extra = [] if mode == "plain" else ["--tls-cert", c("server.crt"), "--tls-key", c("server.key")]
    if mode == "mtls":
        extra += ["--tls-client-ca", c("ca.crt")]
    with netns.NetnsServer(veth, server_binary, extra=extra) as srv:
        assert srv.target.startswith(veth.ns_ip + ":"), srv.target
        yield Served(mode, srv, certs)
        assert srv.alive(), f"the server died:\n{srv.log_text()[-3000:]}"
        log = srv.log_text()
        assert srv.stop() == 0, f"the server's exit on SIGTERM:\n{log[-3000:]}"


def gauges(srv):
    m = srv.metrics()
    return {g: netns.metric_sum(m, g) for g in GAUGES}


def ints(rng, n, dtype=np.int32):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    x[0] = x[0] or 1  # never all zeros
    return x


def runs(rng, n, count):
    """Keys: `count` runs of equal consecutive keys (a key may come back after another run)."""
    cuts = np.sort(rng.choice(np.arange(1, n), count - 1, replace=False))
    return np.repeat(rng.integers(-5, 5, count).astype(np.int64), np.diff(np.r_[0, cuts, n]))


def segments(keys):
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return starts, np.r_[starts[1:], len(keys)]


def check_every_rpc(c, rng):
    """Each RPC of the client once (scan in its variants), against numpy."""
    info = c.info()
    assert "limits" in info and info, info
    assert c.health() == "SERVING"
    assert c.health("gpuscan.v1.GpuScan") == "SERVING"

    x = ints(rng, N)
    np.testing.assert_array_equal(c.scan(x), np.cumsum(x, dtype=np.int32))
    x64 = ints(rng, N, np.int64)
    want = np.empty_like(x64)
    want[0], want[1:] = np.iinfo(np.int64).min, np.maximum.accumulate(x64)[:-1]
    np.testing.assert_array_equal(c.scan(x64, op="max", exclusive=True), want)
    np.testing.assert_array_equal(c.scan(x, lanes=2), np.cumsum(x, dtype=np.int32))  # two connections
    pieces = [x[:700], x[700:2100], x[2100:]]
    np.testing.assert_array_equal(np.concatenate(list(c.scan_iter(pieces))), np.cumsum(x, dtype=np.int32))

    assert c.reduce(x) == np.add.reduce(x, dtype=np.int32)
    f = rng.standard_normal(N)
    assert c.reduce(f, op="min") == f.min()

    v, i = c.compact(x, predicate=("gt", 0), indices=True)
    np.testing.assert_array_equal(v, x[x > 0])
    np.testing.assert_array_equal(i, np.flatnonzero(x > 0))
    mask = rng.random(N) < 0.3
    np.testing.assert_array_equal(c.compact(f, where=mask), f[mask])

    keys = runs(rng, N, 40)
    starts, ends = segments(keys)
    want = np.concatenate([np.cumsum(x[s:e], dtype=np.int32) for s, e in zip(starts, ends)])
    np.testing.assert_array_equal(c.segmented_scan(x, keys), want)
    heads = np.zeros(N, np.uint8)
    heads[starts] = 1
    np.testing.assert_array_equal(c.segmented_scan(x, heads=heads), want)

    k, r = c.reduce_by_key(x64, keys, op="max")
    np.testing.assert_array_equal(k, keys[starts])
    np.testing.assert_array_equal(r, [x64[s:e].max() for s, e in zip(starts, ends)])

    vals = ints(rng, N, np.int64)
    order = np.argsort(x, kind="stable")
    sx, sv = c.sort(x, values=vals)
    np.testing.assert_array_equal(sx, x[order])
    np.testing.assert_array_equal(sv, vals[order])
    dup = (x % 50).astype(np.int32)  # many equal keys: stability shows
    np.testing.assert_array_equal(c.argsort(dup), np.argsort(dup, kind="stable"))

    h = c.histogram(f, 16, range=(-2.0, 2.0))
    counts, edges = np.histogram(f, 16, (-2.0, 2.0))
    np.testing.assert_array_equal(h.counts, counts.astype(np.uint64))
    np.testing.assert_array_equal(h.edges, edges)
    assert h.below == np.count_nonzero(f < -2.0) and h.above == np.count_nonzero(f > 2.0)

    m = ints(rng, 37 * 53).reshape(37, 53)
    np.testing.assert_array_equal(c.scan2d(m), np.cumsum(np.cumsum(m, axis=1, dtype=np.int32), axis=0,
                                                         dtype=np.int32))

    t = c.transport(1 << 18)
    assert t.bytes_in == 1 << 18 and t.bytes_received == 1 << 18, t
    with pytest.raises(gpuscan.FailedPrecondition):  # the kernel suite needs a CUDA server
        c.benchmark(sizes=[1024])


def test_every_rpc(served, rng):
    # Plaintext: scan, reduce and compact take the C++ client (native) by default; grpcio's path too.
    for native in ((None, False) if served.mode == "plain" else (None,)):
        with served.client(chunk_bytes=CHUNK_BYTES, native=native) as c:
            check_every_rpc(c, rng)


def test_refusals(served):
    x = np.arange(1, 1001, dtype=np.int64)
    c = served.cert
    bad = []
    if served.mode == "plain":
        bad.append(("TLS towards plaintext", gpuscan.Tls(ca_file=c("ca.crt"), server_name="localhost")))
    else:
        bad.append(("plaintext towards TLS", None))
        bad.append(("wrong CA", gpuscan.Tls(ca_file=c("rogue-ca.crt"), server_name="localhost",
                                            cert_file=c("client.crt"), key_file=c("client.key"))))
        bad.append(("the certificate does not name the address",
                    gpuscan.Tls(ca_file=c("ca.crt"), cert_file=c("client.crt"), key_file=c("client.key"))))
    if served.mode == "mtls":
        bad.append(("no client certificate", gpuscan.Tls(ca_file=c("ca.crt"), server_name="localhost")))
        bad.append(("a client certificate of another CA",
                    gpuscan.Tls(ca_file=c("ca.crt"), server_name="localhost", cert_file=c("rogue-client.crt"),
                                key_file=c("rogue-client.key"))))
    for what, tls in bad:
        with served.client(tls=tls, timeout=5, native=False) as cl:
            t0 = time.monotonic()
            with pytest.raises(gpuscan.Unavailable):
                got = cl.reduce(x)
                pytest.fail(f"{what}: answered {got}")
            assert time.monotonic() - t0 < 5, what
    with served.client() as cl:  # and still serving
        assert cl.reduce(x) == 500500


def wait_for(pred, timeout_s, step_s=0.1):
    end = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step_s)


def path_of(client) -> str:
    """The data path of a client's plain scans: "native" (the C++ client) or "grpcio"."""
    dp = getattr(client, "data_path", None)  # newer clients say it themselves
    if dp is not None:
        return dp.name
    return "native" if getattr(client, "_native", None) is not None else "grpcio"


class LateCall(AssertionError):
    """The client reported after its deadline (+ MARGIN_S)."""


def cut_link_mid_call(served, veth, rng, native):
    """A scan of SLOW_N int32 in SLOW_CHUNK_BYTES messages with a LINK_DEADLINE_S deadline; the
    host's end of the veth pair goes down once the server holds the call and data has flowed
    for 0.5 s. Then: the client's error (UNAVAILABLE or DEADLINE_EXCEEDED, never a result); the
    link up again (by a watchdog at deadline + margin + 0.5 s if the call has not ended by then,
    so a client that ignores its deadline cannot hang the test); the server's gauges back to
    their baseline; a retried call on the same client and a fresh client's calls correct.
    Raises LateCall last, after every other check, when the error came past deadline + margin."""
    srv = served.server
    base = gauges(srv)
    assert base == {g: 0.0 for g in GAUGES}, base
    x = ints(rng, SLOW_N)
    want = np.cumsum(x, dtype=np.int32)
    seen = {}
    ended = threading.Event()

    def cut():
        # Once the server holds the call and data has flowed for a moment, the link goes down.
        if not wait_for(lambda: gauges(srv)["gpuscan_requests_in_flight"] >= 1 or ended.is_set(),
                        LINK_DEADLINE_S - 1.0, 0.05) or ended.is_set():
            return
        time.sleep(0.5)
        seen["down_at"] = time.monotonic()
        veth.link_down()
        if not ended.wait(max(0.0, t0 + LINK_DEADLINE_S + MARGIN_S + 0.5 - time.monotonic())):
            seen["while_down"] = gauges(srv)
            seen["watchdog_up_at"] = time.monotonic()
            veth.link_up()  # the client ignored its deadline: the link back, so that the call can end

    try:
        with served.client(timeout=LINK_DEADLINE_S, chunk_bytes=SLOW_CHUNK_BYTES, native=native) as c:
            path = path_of(c)
            assert path == ("native" if native else "grpcio"), path
            cutter = threading.Thread(target=cut)
            t0 = time.monotonic()
            cutter.start()
            try:
                got = c.scan(x)
                seen["result"] = got
            except gpuscan.Error as e:
                seen["error"] = e
            elapsed = time.monotonic() - t0
            ended.set()
            cutter.join()
            if "result" in seen:
                np.testing.assert_array_equal(seen["result"], want)  # never a wrong result
                pytest.fail(f"the scan ended ({elapsed:.2f} s) before the link went down: make SLOW_N larger")
            assert "down_at" in seen, "the server never reported the call in flight"
            err = seen["error"]
            assert isinstance(err, (gpuscan.Unavailable, gpuscan.DeadlineExceeded)), repr(err)
            # Scraped inside the namespace (over its loopback) while the link is still down.
            while_down = seen.get("while_down") or gauges(srv)
            veth.link_up()
            checked_at = time.monotonic()  # the link up (or back by the watchdog) and the call over
            freed = wait_for(lambda: gauges(srv) == base, FREED_WITHIN_S, 0.1)
            freed_s = time.monotonic() - checked_at
            assert freed, f"the server still holds the call {FREED_WITHIN_S} s after the link came back: {gauges(srv)}"
            # The same client, its connection through the link that went down: retried on UNAVAILABLE.
            # Its channel may still be in gRPC's reconnect backoff (1 s, then 1.6x, from connects
            # that failed while the link was down: "Network is unreachable"), which a few short
            # retries do not outlast: the retries and deadline cover ~13 s.
            y = ints(rng, 20000)
            t1 = time.monotonic()
            np.testing.assert_array_equal(c.scan(y, retries=10, timeout=20), np.cumsum(y, dtype=np.int32))
            same_client_s = time.monotonic() - t1
        with served.client(timeout=20, native=native) as fresh:
            np.testing.assert_array_equal(fresh.scan(x), want)
            assert fresh.reduce(x) == want[-1]
        m = srv.metrics()
        statuses = {k.split('status="')[1].split('"')[0]: v for k, v in m.items()
                    if k.startswith("gpuscan_requests_total{") and 'op="scan"' in k}
        watchdog = (f"link back by the watchdog at {seen['watchdog_up_at'] - t0:.2f} s; "
                    if "watchdog_up_at" in seen else "")
        print(f"\n[{served.mode}, {path}] link down {seen['down_at'] - t0:.2f} s into the call; client: "
              f"{type(err).__name__} after {elapsed:.2f} s ({str(err)[:60]}); {watchdog}server gauges while down "
              f"(in flight, running, queued): {list(while_down.values())}; at baseline {freed_s:.2f} s after the "
              f"link was up and the call over; scan calls by status {statuses}; the same client's next call {same_client_s:.2f} s")
    finally:
        veth.link_up()  # for the tests after this one, also when it failed
    if elapsed > LINK_DEADLINE_S + MARGIN_S:
        raise LateCall(f"{type(err).__name__} after {elapsed:.2f} s for a {LINK_DEADLINE_S} s deadline")


def test_link_down_mid_call(served, veth, rng):
    """grpcio's path (every mode; TLS and mutual TLS only have this one)."""
    cut_link_mid_call(served, veth, rng, native=False)


# Was a known bug (docs/RELIABILITY.md, "Across a network namespace"): the C++ client's upload
# thread stays blocked in a Write on the silent connection past the deadline (neither the deadline
# nor TryCancel completes it in gRPC 1.51) and RunBidi joins it. The client's default keepalive
# (2 s / 2 s, which also sets TCP_USER_TIMEOUT) now closes the connection ~2.3 s after the cut.
def test_link_down_mid_call_native(served, veth, rng):
    """The C++ client's path (plaintext, Python's default there): scan through the C API."""
    if served.mode != "plain":
        pytest.skip("the native path speaks plaintext only")
    from gpuscan import _native
    lib, why = _native.library()
    if lib is None:
        pytest.skip(f"no native path here: {why}")
    cut_link_mid_call(served, veth, rng, native=True)
