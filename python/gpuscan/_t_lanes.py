"""The striped transport (lanes): one array over K concurrent calls, each on its own connection,
chunk i on lane i mod K; K capped by the server's Limits.max_lanes (asked once; 0: it does not
join lanes) and the array's chunk count; one call (_t_stream) when that leaves one lane. The
whole striped call is retried as one."""
from __future__ import annotations

from . import _chunking, _t_stream
from ._effects import Info, Lanes, Retry


def usable(c, lanes, n: int, per: int, timeout):
    """Lanes for an n-element array: the wanted count (lanes=, None: the client's) capped by the
    server's max_lanes (asked within `timeout`) and by the number of chunks."""
    wanted = c._wanted_lanes(lanes)
    chunks = _chunking.chunk_count(n, per)
    if wanted <= 1 or chunks <= 1:
        return 1
    if c._max_lanes is None:
        c._max_lanes = int((yield Info(timeout))["limits"].get("max_lanes", 0))
    return _chunking.lane_count(chunks, wanted, c._max_lanes)


def run(c, p):
    def attempt(timeout):
        k = yield from usable(c, p.lanes, len(p.x), p.per, timeout)
        if k <= 1:
            return (yield from _t_stream.attempt(p, timeout))
        collector = p.collect(p, k)  # per try: a failed try's pieces are dropped
        requests, metadata = p.lane_requests(k)
        yield Lanes(p.method, requests, timeout, collector.feed, metadata)
        return collector.finish()
    return (yield Retry(p.retries, p.timeout, attempt))
