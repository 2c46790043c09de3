"""The plain transport: the whole array on one grpcio call, its requests streamed, retried after
UNAVAILABLE (each try a new call whose responses are collected afresh)."""
from __future__ import annotations

from ._effects import Call, Retry


def attempt(p, timeout):
    """One try: (result, Timing)."""
    collector = p.collect(p, 1)
    yield Call(p.method, p.requests(), timeout, collector.feed)
    return collector.finish()


def run(c, p):
    return (yield Retry(p.retries, p.timeout, lambda timeout: attempt(p, timeout)))
