"""Running grpc calls where Ctrl-C is safe.

Python delivers KeyboardInterrupt to the main thread only, at any bytecode. One that lands while
the main thread is inside grpc (creating a call, adding a callback, waiting in future.result(),
cancelling) can leave a lock of the channel or the call held, and every later call on the channel
would then hang in its first `with`. (The Ctrl-C hangs CI saw were another cause, in the native
path: see client/src/stream_driver.h, ReceiveInitialMetadata; this guards the grpcio path by
construction.) So the calling thread never enters grpc while a call runs: calls are created, read
and waited for on threads of ours, results come back through queue.SimpleQueue (whose C-level
get() an interrupt leaves intact), and an interrupt asks the canceller thread to cancel the call.
"""

import os
import queue
import threading
from typing import Any, Callable, Iterator

_END = object()
_POLL_S = 0.25  # a get() wakes this often, in case the interrupt went to another thread


def wait(q: "queue.SimpleQueue") -> Any:
    """q.get(), in short waits so that Ctrl-C reaches the calling thread."""
    while True:
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            pass


# -- the canceller: runs cancellations asked for by an interrupted thread, outside that thread
_cancels: "queue.SimpleQueue" = queue.SimpleQueue()
_canceller_lock = threading.Lock()
_canceller_pid = -1


def _cancel_forever() -> None:
    while True:
        fn = _cancels.get()
        try:
            fn()
        except Exception:  # noqa: BLE001 - a failed cancel must not stop later ones
            pass


def start_canceller() -> None:
    """Starts the canceller thread (once per process: a forked child starts its own). Called when
    a call starts, so that no thread needs starting once an interrupt has landed."""
    global _canceller_pid
    if _canceller_pid == os.getpid():
        return
    with _canceller_lock:
        if _canceller_pid != os.getpid():
            threading.Thread(target=_cancel_forever, name="gpuscan-canceller", daemon=True).start()
            _canceller_pid = os.getpid()


def cancel_later(fn: Callable[[], None]) -> None:
    """fn() on the canceller thread; the caller only puts it in a queue."""
    start_canceller()
    _cancels.put(fn)


class CallSlot:
    """A grpc call created on another thread, cancellable from any thread before or after it
    exists: set() stores the call and then reads `cancelled`, cancel() sets `cancelled` and then
    reads the call, so (under the GIL) one of the two always sees the other."""

    def __init__(self):
        self.call = None
        self.cancelled = False

    def set(self, call):
        self.call = call
        if self.cancelled:
            call.cancel()
        return call

    def cancel(self) -> None:
        self.cancelled = True
        call = self.call
        if call is not None:
            call.cancel()


class ResponsePump:
    """Starts a stream-stream or unary-stream call (start() returns it) and iterates its responses
    on a thread of its own; iterating the pump yields them on the calling thread. The reader stays
    at most `depth` responses ahead, so grpc's flow control still slows a server whose results are
    not consumed. Leaving the iteration early (an exception, Ctrl-C, close()) cancels the call;
    grpc's errors are re-raised on the calling thread as they are."""

    def __init__(self, start: Callable[[], Any], depth: int = 4):
        self._slot = CallSlot()
        self._items: "queue.SimpleQueue" = queue.SimpleQueue()
        self._credits: "queue.SimpleQueue" = queue.SimpleQueue()
        for _ in range(depth):
            self._credits.put(True)
        self._stopped = False
        start_canceller()
        threading.Thread(target=self._read, args=(start,), name="gpuscan-responses", daemon=True).start()

    def _read(self, start: Callable[[], Any]) -> None:
        try:
            for raw in self._slot.set(start()):
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
                raw, error = wait(self._items)
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
        """Cancels the call (nothing when it ended; on the canceller thread) and lets the reader
        thread go."""
        self._stopped = True
        cancel_later(self._slot.cancel)
        self._credits.put(True)  # wakes a reader waiting for room


def result_of(start: Callable[[], Any]) -> Any:
    """The result of a grpc future (a stream-unary or unary-unary call; start() creates it),
    created and waited for on a helper thread; Ctrl-C or any exception while waiting cancels the
    call."""
    slot = CallSlot()
    done: "queue.SimpleQueue" = queue.SimpleQueue()

    def run() -> None:
        try:
            done.put((slot.set(start()).result(), None))
        except BaseException as e:  # noqa: B902 - handed to the calling thread
            done.put((None, e))
    start_canceller()
    threading.Thread(target=run, name="gpuscan-call", daemon=True).start()
    try:
        value, error = wait(done)
    except BaseException:
        cancel_later(slot.cancel)
        raise
    if error is not None:
        raise error
    return value


def unary(method, request, timeout, metadata=None) -> Any:
    """A unary-unary call whose wait Ctrl-C can interrupt safely (see the module's note)."""
    return result_of(lambda: method.future(request, timeout=timeout, metadata=metadata))
