"""The I/O of a call, as data. A call's program (see _transport) is a generator that yields these
effects and is sent each one's outcome; Client runs an effect blocking and AsyncClient awaiting it,
which is all that differs between the two clients (tritonclient's grpc and http share their
request and result model the same way)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generator, Iterable, List, Optional

# The stream-unary RPCs (one response); the others that Call runs stream both ways.
UNARY = frozenset({"Reduce", "Histogram", "PutArray"})
# The unary-request RPCs that Single runs and that stream their responses; the others answer one.
STREAMED_REPLY = frozenset({"GetArray"})

# The room _native.NativeClient.header_call gives a final response, at least (a histogram's
# grows with its bins).
NATIVE_RESPONSE_BYTES = 64 << 10

Feed = Callable[[int, bytes], None]  # feed(lane, raw response)
Program = Generator[Any, Any, Any]


@dataclasses.dataclass
class Call:
    """One call of `method` on the main channel; each response to feed(0, raw)."""
    method: str
    requests: Iterable
    timeout: Optional[float]
    feed: Feed


@dataclasses.dataclass
class Single:
    """One call of a unary-request RPC (GetArray, DropArray, ListArrays) on the main channel: its
    serialized request; each response (GetArray's stream, or the one) to feed(0, raw)."""
    method: str
    request: bytes
    timeout: Optional[float]
    feed: Feed


@dataclasses.dataclass
class Lanes:
    """One call of `method` per lane (requests[lane]) at once, each on its lane's channel; every
    response to feed(lane, raw). The first failure cancels them all."""
    method: str
    requests: List[Iterable]
    timeout: Optional[float]
    feed: Feed
    metadata: Any


@dataclasses.dataclass
class HeaderOnly:
    """A call that sends its header alone (its data lie in shared or device memory, or on the
    server: a resident call answered by one message): through the C API where the client has it
    (the call's timeout with it), else grpcio."""
    rpc: int                    # _native.RPC_*
    method: str
    request: bytes
    timeout: Optional[float]
    feed: Feed
    interruptible: bool = True  # Ctrl-C may cancel it (a device call's export must not be left half-done)
    room: int = NATIVE_RESPONSE_BYTES


@dataclasses.dataclass
class Info:
    """The server's ServerInfo: as info()'s dict, or (message=True) the message itself."""
    timeout: Optional[float]
    message: bool = False


@dataclasses.dataclass
class Native:
    """run(the client's _native.NativeClient): a blocking call through the C API (Client only)."""
    run: Callable[[Any], Any]


@dataclasses.dataclass
class Retry:
    """attempt(timeout) (a program) with up to `retries` retries after UNAVAILABLE, each try given
    the time left of the call's `timeout` (see _retry)."""
    retries: int
    timeout: Optional[float]
    attempt: Callable[[Optional[float]], Program]


class Stepper:
    """A program stepped by a client's driver: step() hands it the last effect's outcome (or
    raises that effect's error inside it, so its `with` blocks see the failure) and returns its
    next effect; once it returns, `done` and `result`."""

    def __init__(self, program: Program):
        self._program = program
        self.done = False
        self.result: Any = None

    def step(self, value: Any = None, error: Optional[BaseException] = None) -> Any:
        try:
            if error is not None:
                return self._program.throw(error)
            return self._program.send(value)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
            return None
