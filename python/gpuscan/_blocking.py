"""Client's grpcio calls, each run blocking on the caller's thread: a stream-unary call's
response (unary) and a stream-stream call's responses (stream), the requests uploaded through
_chunking.Upload (an error of the caller's data source cancels the call and is raised as itself)
and the call created and read off the caller's thread (_pump), so Ctrl-C or any failure cancels it."""
from __future__ import annotations

from typing import Any, Callable, Generator, Optional, cast

import grpc

from . import _chunking, _pump
from .errors import from_rpc_error, raised


def call(method: Any, unary_: bool, requests: Any, timeout: Optional[float], feed: Callable[[int, bytes], Any],
         metadata: Any) -> None:
    """One call of `method` (a grpc multi-callable), each response fed to feed(0, response)."""
    if unary_:
        feed(0, unary(method, requests, timeout, metadata))
    else:
        for raw in stream(method, requests, timeout, metadata):
            feed(0, raw)


def stream(method: Any, requests: Any, timeout: Optional[float], metadata: Any) -> Generator[bytes, None, None]:
    """A stream-stream call's responses; any exit but the end cancels it."""
    upload = _chunking.Upload(requests)

    def start() -> Any:
        call = method(iter(upload), timeout=timeout, metadata=metadata)
        upload.attach(call)
        return call
    responses = _pump.ResponsePump(start)  # created and read off this thread: Ctrl-C-safe (see _pump)
    try:
        for raw in responses:
            yield raw
    except grpc.RpcError as e:
        if upload.error is not None:
            raise upload.error from None
        raise from_rpc_error(e) from None
    except BaseException:  # KeyboardInterrupt, an assembler error, the consumer stopping early
        responses.close()
        raise
    if upload.error is not None:
        raise upload.error


def unary(method: Any, requests: Any, timeout: Optional[float], metadata: Any) -> bytes:
    """One stream-unary call (Reduce, Histogram): the serialized response; Ctrl-C or any
    failure cancels it."""
    upload = _chunking.Upload(requests)

    def start() -> Any:
        fut = method.future(iter(upload), timeout=timeout, metadata=metadata)
        upload.attach(fut)
        return fut
    with raised():
        return cast(bytes, _pump.result_of(start))  # created and waited for off this thread (see _pump)
