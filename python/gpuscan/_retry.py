"""Retries of calls whose input can be replayed, for Client and AsyncClient (README "Retries"; the
C++ client's RetryOptions, client/src/retry.h). A call that fails with UNAVAILABLE (the server
died, restarted, is shutting down or cannot be reached), or with a CANCELLED from the server's
end (see retryable), is tried again as a new call on the same channel, after a backoff; the
client's timeout is the deadline of all tries and waits together. Tries holds that bookkeeping
once; the clients' loops (run, run_async) differ only in how they wait.
"""
from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Awaitable, Callable, Optional, Tuple, TypeVar

import grpc

from ._types import check_int
from .errors import Error, error_for

T = TypeVar("T")

# on_retry(error, next_attempt, wait_s): called before each retry's wait.
OnRetry = Callable[[Error, int, float], None]


def check_retries(retries) -> int:
    """retries as an int >= 0 (ValueError otherwise: -1, 2.5, "3", True)."""
    return check_int(retries, "retries", 0)


def check_backoff(backoff) -> Tuple[float, float]:
    """backoff as (initial, maximum) seconds, 0 <= initial <= maximum, both finite."""
    try:
        initial, maximum = backoff
        if isinstance(initial, bool) or isinstance(maximum, bool):
            raise TypeError
        initial, maximum = float(initial), float(maximum)
    except (TypeError, ValueError):
        raise ValueError(f"gpuscan: backoff must be (initial, maximum) in seconds, got {backoff!r}") from None
    if not (math.isfinite(initial) and math.isfinite(maximum) and 0 <= initial <= maximum):
        raise ValueError(f"gpuscan: backoff must be (initial, maximum) with 0 <= initial <= maximum, got {backoff!r}")
    return initial, maximum


def check_on_retry(on_retry) -> Optional[OnRetry]:
    if on_retry is not None and not callable(on_retry):
        raise ValueError(f"gpuscan: on_retry must be callable, got {on_retry!r}")
    return on_retry


def retryable(error: Error) -> bool:
    """UNAVAILABLE, and CANCELLED from the server's end (a server beginning to shut down cancels
    calls that reach it; a call this client cancels ends with the exception that cancelled it),
    and INTERNAL "Received RST_STREAM" (the HTTP/2 transport reset the stream: a fault of the link,
    as in the C++ client). Other codes (INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...) would recur."""
    if error.code == grpc.StatusCode.UNAVAILABLE:
        return True
    if error.code == grpc.StatusCode.INTERNAL:
        return error.message.startswith("Received RST_STREAM")
    return error.code == grpc.StatusCode.CANCELLED and "Locally cancelled" not in error.message


def backoff_s(backoff: Tuple[float, float], next_attempt: int) -> float:
    """The wait before try `next_attempt` (2, 3, ...): the initial wait doubled per earlier
    retry, capped, with +-20% jitter so clients that failed together do not come back together."""
    initial, maximum = backoff
    wait = min(initial * 2.0 ** min(next_attempt - 2, 64), maximum)
    return wait * random.uniform(0.8, 1.2)


def gave_up(error: Error, tries: int) -> Error:
    """The last try's error (same code and server message), saying how many tries were made."""
    return error_for(error.code, f"{error.message} (gave up after {tries} tries)")


class Tries:
    """One call's tries: `retries` after the first, within `timeout` seconds from now (None: no
    deadline) for all of them and the waits."""

    def __init__(self, retries: int, backoff: Tuple[float, float], on_retry: Optional[OnRetry],
                 timeout: Optional[float]):
        self.retries = retries
        self.backoff = backoff
        self.on_retry = on_retry
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.attempt = 1

    def timeout(self) -> Optional[float]:
        """The current try's timeout: the time left to the deadline (a try that starts with none
        left fails with DEADLINE_EXCEEDED, from grpc)."""
        if self.deadline is None:
            return None
        return max(self.deadline - time.monotonic(), 1e-3)

    def failed(self, error: Error) -> float:
        """After a try failed with `error`: the wait before the next try, or raises the call's
        error when there is none (not retryable, tries used up, or the wait would pass the
        deadline). Must be called while handling `error`."""
        n = self.attempt
        if not retryable(error) or n > self.retries:
            if n > 1:
                raise gave_up(error, n) from None
            raise error
        wait = backoff_s(self.backoff, n + 1)
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            raise gave_up(error, n) from None
        if self.on_retry is not None:
            self.on_retry(error, n + 1, wait)
        self.attempt = n + 1
        return wait


def run(tries: Tries, attempt: Callable[[Optional[float]], T], pause: Callable[[float], None] = time.sleep) -> T:
    """attempt(timeout) until it returns or its error ends the call, pause(seconds) between tries
    (Client)."""
    while True:
        try:
            return attempt(tries.timeout())
        except Error as e:
            wait = tries.failed(e)
        pause(wait)


async def run_async(tries: Tries, attempt: Callable[[Optional[float]], Awaitable[T]]) -> T:
    """run for AsyncClient: attempt is a coroutine function."""
    while True:
        try:
            return await attempt(tries.timeout())
        except Error as e:
            wait = tries.failed(e)
        await asyncio.sleep(wait)
