"""The bench's "do-it-yourself peer": what a Python user builds without gpuscan (issue 12), so that
`python -m gpuscan.bench` measures it beside our scan, in the same run, on the same array.

It is a plain grpcio service with one generic stream-stream method, /peer.Peer/Scan, and no
serializers (raw bytes in and out, no protobuf): the client streams an array in chunks, the server
answers each chunk with its running sum (CuPy on a usable GPU, else numpy), carrying the last sum
into the next chunk. The dtype is the call's metadata ("dtype", e.g. "int32"; default int32).
Integer sums wrap (two's complement) as gpuscan's do.

    python -m gpuscan._peer --port 0     # prints "PORT <n>" once listening; serves until killed

Private: not part of the client's API.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from concurrent import futures
from typing import Optional, Union

import grpc
import numpy as np

from gpuscan import _pump
from gpuscan.testing import LoggedProcess

METHOD = "/peer.Peer/Scan"
# Chunks larger than grpc's 4 MiB default (--chunk-bytes 8MiB) pass both ways.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


# -- the server ---------------------------------------------------------------------------------

def pick_backend():
    """(name, module, why): ("cupy", cupy, version) when cupy imports and a device runs a cumsum,
    else ("numpy", None, the reason)."""
    try:
        import cupy as cp
        cp.cumsum(cp.arange(4, dtype=cp.int32), dtype=cp.int32).get()  # a device, and its kernels compile
        return "cupy", cp, f"cupy {cp.__version__}"
    except Exception as e:  # noqa: BLE001 - no cupy, no device, no compiler: the numpy peer
        return "numpy", None, f"no cupy: {type(e).__name__}: {e}".splitlines()[0]


def scan_chunks(requests, dtype: np.dtype, cp=None):
    """The peer's scan: each request's bytes -> the running sum of its elements (plus the last sum of
    the chunks before) as bytes. cp: the cupy module (sums on the GPU) or None (numpy)."""
    carry = None  # the previous result chunk's last element: a scalar of dtype
    for raw in requests:
        x = np.frombuffer(raw, dtype)
        if x.size == 0:
            yield b""
            continue
        with np.errstate(over="ignore"):  # same-dtype sums: integers wrap, never raise or warn
            if cp is not None:  # the cupy backend: to the device, scan there (wrapping too), back
                yd = cp.cumsum(cp.asarray(x), dtype=dtype)
                if carry is not None:
                    yd += carry
                y = cp.asnumpy(yd)
            else:  # the numpy backend (dtype=: numpy would widen int32 sums to int64)
                y = np.cumsum(x, dtype=dtype)
                if carry is not None:
                    y += carry
        carry = y[-1]
        yield y.tobytes()


def make_handler(cp=None):
    def scan(requests, context):
        try:
            dtype = np.dtype(dict(context.invocation_metadata()).get("dtype", "int32"))
            if dtype.kind not in "iuf":
                raise TypeError(f"not a number: {dtype}")
        except TypeError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"dtype: {e}")
        try:
            yield from scan_chunks(requests, dtype, cp)
        except ValueError as e:  # a chunk that is not whole elements
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
    return grpc.method_handlers_generic_handler(
        "peer.Peer", {"Scan": grpc.stream_stream_rpc_method_handler(scan)})  # no (de)serializers: bytes


def serve(port: int = 0, workers: int = 4) -> None:
    backend, cp, why = pick_backend()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers((make_handler(cp),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    if not bound:
        raise SystemExit(f"gpuscan._peer: cannot listen on 127.0.0.1:{port}")
    server.start()
    print(f"peer backend: {backend} ({why})", file=sys.stderr, flush=True)  # PeerProcess.backend
    print(f"PORT {bound}", flush=True)
    server.wait_for_termination()


class PeerProcess(LoggedProcess):
    """`python -m gpuscan._peer --port 0` with this Python, on a free loopback port; target
    ("127.0.0.1:PORT"), backend ("numpy" or "cupy") and backend_detail (cupy's version, or why
    not cupy) once it listens. Stopped by stop() or `with`. ready_s is generous: importing cupy and
    compiling its first kernels takes seconds."""

    def __init__(self, ready_s: float = 120.0):
        env = dict(os.environ)  # the child imports this very gpuscan, wherever it was found
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        super().__init__([sys.executable, "-m", "gpuscan._peer", "--port", "0"], re.compile(r"^PORT (\d+)$", re.M),
                         "gpuscan-peer", ready_s, env)
        self.target = f"127.0.0.1:{self.ready.group(1)}"
        m = re.search(r"^peer backend: (\w+) \((.*)\)$", self.log_text(), re.M)  # printed before PORT
        self.backend, self.backend_detail = m.groups() if m else ("unknown", "")


# -- the client ---------------------------------------------------------------------------------

def peer_scan(target: Union[str, grpc.Channel], x: np.ndarray, out: np.ndarray, chunk_bytes: int = 1 << 20,
              timeout: Optional[float] = None) -> np.ndarray:
    """Scans x into out (same length and dtype, contiguous) on the peer at target (an address, or
    an open channel to reuse) in chunks of chunk_bytes (whole elements, at least one); returns out.
    grpcio sends only bytes objects (a memoryview fails in grpc's sender thread), so each chunk is
    copied once into bytes, as gpuscan's client does when it frames a chunk."""
    x = np.ascontiguousarray(x)
    if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous {x.dtype}{x.shape} array, not {out.dtype}{out.shape}")
    if isinstance(target, str):
        with grpc.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
            return peer_scan(channel, x, out, chunk_bytes, timeout)
    step = max(1, chunk_bytes // x.itemsize) * x.itemsize
    mv = memoryview(x.reshape(-1)).cast("B") if x.size else memoryview(b"")
    requests = (mv[i:i + step].tobytes() for i in range(0, len(mv), step))
    method = target.stream_stream(METHOD)
    flat = out.reshape(-1)
    done = 0
    # The call is created and read off this thread, so Ctrl-C lands in our wait (see _pump).
    for raw in _pump.ResponsePump(lambda: method(requests, metadata=(("dtype", x.dtype.name),), timeout=timeout)):
        y = np.frombuffer(raw, x.dtype)
        if done + y.size > flat.size:
            raise RuntimeError(f"peer returned more than the {flat.size} elements sent")
        flat[done:done + y.size] = y
        done += y.size
    if done != flat.size:
        raise RuntimeError(f"peer returned {done} of {flat.size} elements")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="the bench's do-it-yourself grpcio scan peer (gpuscan._peer)")
    p.add_argument("--port", type=int, default=0, help="loopback port (0: a free one, printed as PORT <n>)")
    p.add_argument("--workers", type=int, default=4, help="server threads")
    a = p.parse_args(argv)
    serve(a.port, a.workers)


if __name__ == "__main__":
    main()
