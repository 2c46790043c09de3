"""transport(): the transport ceiling, for both clients. Its tally counts each lane's requests and
the responses fed in; program() is its calls (see _effects)."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List

from . import _chunking, _wire
from ._channel import check_lanes
from ._effects import Call, Lanes
from ._types import TransportResult


class Tally:
    """transport()'s bookkeeping, for both clients: each lane's requests, the responses fed in
    (any lane), and the TransportResult."""

    def __init__(self, total_bytes: int, echo: bool, chunk_bytes: int, lanes: int):
        self.total, self.echo, self.chunk_bytes = int(total_bytes), echo, chunk_bytes
        self.lanes = check_lanes(lanes)  # Transport is not joined: not capped by max_lanes
        self.received = [0] * self.lanes
        self.finals: List[Dict[int, Any]] = [{} for _ in range(self.lanes)]
        self.t0 = time.perf_counter()

    @staticmethod
    def metadata() -> tuple:
        """The lanes' call metadata: a fresh array id, so a balancer sends them to one replica, as
        a striped array's lanes."""
        return _chunking.array_id_metadata(os.urandom(16))

    def requests(self, lane: int = 0):
        if self.lanes == 1:
            return _chunking.transport_requests(self.total, self.chunk_bytes, self.echo)
        return _chunking.transport_requests(self.total, self.chunk_bytes, self.echo, lane, self.lanes)

    def feed(self, lane: int, raw: bytes) -> None:
        f = _wire.parse(raw)
        if 1 in f:
            self.received[lane] += f[1][1] - f[1][0]
        if f.get(6):
            self.finals[lane] = f

    def result(self) -> TransportResult:
        wall = time.perf_counter() - self.t0
        finals = self.finals
        return TransportResult(bytes_in=sum(f.get(2, 0) for f in finals), bytes_out=sum(f.get(3, 0) for f in finals),
                               bytes_received=sum(self.received), requests=sum(f.get(5, 0) for f in finals),
                               wall_s=wall, server_total_us=max(f.get(4, 0) for f in finals))



def program(tally: Tally, timeout):
    """One Transport call, or one per lane (chunk k on lane k mod K), the totals summed."""
    if tally.lanes == 1:
        yield Call("Transport", tally.requests(), timeout, tally.feed)
    else:
        yield Lanes("Transport", [tally.requests(lane) for lane in range(tally.lanes)], timeout, tally.feed,
                    tally.metadata())
    return tally.result()
