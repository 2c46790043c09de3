"""Waiting on grpc calls where Ctrl-C is safe.

A KeyboardInterrupt raised while the calling thread waits inside grpc (the condition variables of
grpc/_channel.py: a response iterator's next(), future.result()) can leave that condition's lock
held; every later call on the channel then hangs in its first `with` (seen in CI: the call after
an interrupted scan never returned). So the calling thread never waits inside grpc: responses are
read on a thread of ours and handed over through queue.SimpleQueue, whose C-level get() an
interrupt leaves intact, and the interrupt then cancels the call.
"""

import queue
import threading
from typing import Any, Iterator

_END = object()
_POLL_S = 0.25  # a get() wakes this often, in case the interrupt went to another thread


def _get(q: "queue.SimpleQueue") -> Any:
    while True:
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            pass


class ResponsePump:
    """Iterates a grpc response iterator (a stream-stream or unary-stream call) on a thread of its
    own; iterating the pump yields the responses on the calling thread. The reader stays at most
    `depth` responses ahead, so grpc's flow control still slows a server whose results are not
    consumed. Leaving the iteration early (an exception, Ctrl-C, close()) cancels the call; grpc's
    errors are re-raised on the calling thread as they are."""

    def __init__(self, call, depth: int = 4):
        self._call = call
        self._items: "queue.SimpleQueue" = queue.SimpleQueue()
        self._credits: "queue.SimpleQueue" = queue.SimpleQueue()
        for _ in range(depth):
            self._credits.put(True)
        self._stopped = False
        threading.Thread(target=self._read, name="gpuscan-responses", daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self._call:
                self._items.put((raw, None))
                self._credits.get()
                if self._stopped:
                    return
        except BaseException as e:  # noqa: B902 - handed to the calling thread
            self._items.put((_END, e))
        else:
            self._items.put((_END, None))

    def __iter__(self) -> Iterator[Any]:
        finished = False
        try:
            while True:
                raw, error = _get(self._items)
                if raw is _END:
                    finished = True
                    if error is not None:
                        raise error
                    return
                self._credits.put(True)
                yield raw
        finally:
            if not finished:
                self.close()

    def close(self) -> None:
        """Cancels the call (nothing when it ended) and lets the reader thread go."""
        self._stopped = True
        self._call.cancel()
        self._credits.put(True)  # wakes a reader waiting for room


def result_of(future) -> Any:
    """future.result() of a grpc future (a stream-unary or unary-unary call), waited for outside
    grpc; Ctrl-C or any exception while waiting cancels the call."""
    done: "queue.SimpleQueue" = queue.SimpleQueue()
    try:
        future.add_done_callback(lambda _f: done.put(True))
        _get(done)
    except BaseException:
        future.cancel()
        raise
    return future.result()


def unary(method, request, timeout) -> Any:
    """A unary-unary call whose wait Ctrl-C can interrupt safely (see the module's note)."""
    return result_of(method.future(request, timeout=timeout))
