"""The plain transport: the whole array on one grpcio call, its requests streamed, retried after
UNAVAILABLE (each try a new call whose responses are collected afresh). A resident call answered
by one message (p.one_answer) sends its header as a HeaderOnly effect: through the C API where
the client has it (on the caller's thread, ~0.2 ms against grpcio's ~1.5: Ctrl-C lands when it
returns), retried all the same."""
from __future__ import annotations

from . import _t_shared
from ._effects import Call, HeaderOnly, Retry


def attempt(p, timeout):
    """One try: (result, Timing)."""
    collector = p.collect(p, 1)
    if p.one_answer:
        yield HeaderOnly(_t_shared.RPCS[p.method], p.method, p.request.SerializeToString(), timeout, collector.feed,
                         interruptible=False)
    else:
        yield Call(p.method, p.requests(), timeout, collector.feed)
    return collector.finish()


def run(c, p):
    return (yield Retry(p.retries, p.timeout, lambda timeout: attempt(p, timeout)))
