"""A Pipeline's run (the Pipeline RPC; _pipeline builds the stages): its requests (the header with
every stage, then the one streamed input's chunks), and its responses routed stage by stage, in
order, to each stage's collector: the assemblers of the stage's own call (_chunking) for returned
data, _resident_ops's reader of kept arrays, or its final response alone. A program of effects
(_effects), which Client drives blocking and AsyncClient awaits; a pipeline that keeps arrays is
not retried (a try whose answer was lost may have kept them, as put)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _chunking, _resident_ops, _wire
from ._effects import Call, Program, Retry
from ._ops import Collector
from ._types import Timing
from .errors import Internal
from .v1 import gpuscan_pb2 as pb

VALUES, INDICES, SORT_VALUES = pb.STAGE_ARRAY_VALUES, pb.STAGE_ARRAY_INDICES, pb.STAGE_ARRAY_SORT_VALUES

# A stage's arrays by StageArray: those it made, fetched (numpy) or kept (RemoteArrays).
Arrays = Dict[int, Any]
# A stage's returned data, given the element count of the arrays it makes (None: not known before
# its responses, a compact stage's).
DataCollect = Callable[[Optional[int]], Collector]

# Each array-making operation's response: its class, the field of its final response that counts
# the arrays it made, and its kept arrays' ArrayInfo fields with their StageArray.
_RESPONSES: Dict[str, Tuple[Any, int, Tuple[Tuple[str, int], ...]]] = {
    "scan": (pb.ScanResponse, 4, (("array", VALUES),)),
    "segmented_scan": (pb.ScanResponse, 4, (("array", VALUES),)),
    "compact": (pb.CompactResponse, 5, (("values_array", VALUES), ("indices_array", INDICES))),
    "sort": (pb.SortResponse, 6, (("keys_array", VALUES), ("values_array", SORT_VALUES),
                                  ("indices_array", INDICES))),
}
_DATA_FIELDS = ("data", "values", "indices", "keys")  # a response's data, in any operation's


@dataclasses.dataclass
class StagePlan:
    """One stage as built and checked (_pipeline): its PipelineStage (operation header, inputs,
    ttl and label; `returns` is set at run), and how its answer is read."""
    op: str                        # the PipelineStage oneof: "scan", "reduce", "compact", ...
    message: Any                   # pb.PipelineStage
    data: Optional[DataCollect]    # its returned data's collector; None: a value (reduce, histogram)
    value: Optional[Callable[[], Collector]] = None  # reduce's and histogram's final response
    count: Optional[int] = None    # its arrays' element count when known now (scan, sort: their input's)
    count_stage: Optional[int] = None  # else the earlier stage whose arrays' count it is
    keep: bool = False
    fetch: Optional[bool] = None   # None: fetched when no later stage reads its arrays
    read: bool = False             # a later stage reads one of its arrays

    def returns(self) -> int:
        """Its StageReturn: KEEP with keep=True; DATA with fetch=True, or fetch=None and no later
        stage reading it; else NONE (reduce and histogram answer values: always NONE)."""
        if self.data is None:
            return pb.STAGE_RETURN_NONE
        if self.keep:
            return pb.STAGE_RETURN_KEEP
        fetched = (not self.read) if self.fetch is None else self.fetch
        return pb.STAGE_RETURN_DATA if fetched else pb.STAGE_RETURN_NONE


# -- collectors of a stage's responses (its operation's own messages, cut out of PipelineResponse)
def scan_data(dtype: np.dtype) -> DataCollect:
    """A returned scan's or segmented scan's results, placed by offset (as the call's)."""
    def collect(n: Optional[int]) -> Collector:
        out = np.empty(n or 0, dtype)
        asm = _chunking.ScanAssembler(out)
        return Collector(lambda lane, raw: asm.feed(raw), lambda: ({VALUES: out}, asm.finish()))
    return collect


def compact_data(dtype: np.dtype, values: bool, indices: bool) -> DataCollect:
    """A returned compact's kept values and indices, placed by kept_offset (as the call's)."""
    def collect(n: Optional[int]) -> Collector:
        asm = _chunking.CompactAssembler(dtype)

        def finish():
            v, i = asm.result(values, indices)
            got = {VALUES: v, INDICES: i}
            return {a: x for a, x in got.items() if x is not None}, asm.timing or Timing()
        return Collector(lambda lane, raw: asm.feed(raw), finish)
    return collect


def sort_data(key_dtype: np.dtype, values_dtype: Optional[np.dtype], output: int, descending: bool) -> DataCollect:
    """A returned sort's keys, values and indices, checked as the call's (SortAssembler)."""
    def collect(n: Optional[int]) -> Collector:
        asm = _chunking.SortAssembler(key_dtype, values_dtype, output, descending, n or 0)

        def finish():
            got = dict(zip((VALUES, SORT_VALUES, INDICES), asm.result()))
            return {a: x for a, x in got.items() if x is not None}, asm.timing or Timing()
        return Collector(lambda lane, raw: asm.feed(raw), finish)
    return collect


def reduce_value(dtype: np.dtype) -> Callable[[], Collector]:
    """A reduce stage's value: a numpy scalar of its input's dtype, as the call's."""
    def collect() -> Collector:
        raws = [b""]

        def finish():
            value, _, timing = _chunking.reduce_value(raws[0], dtype)
            return value, timing
        return Collector(lambda lane, raw: raws.__setitem__(0, bytes(raw)), finish)
    return collect


def histogram_value() -> Collector:
    """A histogram stage's HistogramResult, as the call's."""
    raws = [b""]
    return Collector(lambda lane, raw: raws.__setitem__(0, bytes(raw)), lambda: _chunking.histogram_result(raws[0]))


def _kept(c, op: str) -> Collector:
    """A kept stage's final response: its arrays as RemoteArrays of client c (_resident_ops's reader)."""
    response, _, fields = _RESPONSES[op]
    kept = _resident_ops._kept(c, response, tuple(f for f, _ in fields))
    arrays = [a for _, a in fields]

    def finish():
        got, timing = kept.finish()
        got = got if isinstance(got, tuple) else (got,)
        return {a: r for a, r in zip(arrays, got) if r is not None}, timing
    return Collector(lambda lane, raw: kept.feed(lane, bytes(raw)), finish)


def _final_only(op: str, index: int) -> Collector:
    """A stage whose arrays were intermediates: its final response's Timing, and no data."""
    response = _RESPONSES[op][0]
    timing = [Timing()]

    def feed(lane: int, raw) -> None:
        m = response.FromString(bytes(raw))
        if any(getattr(m, d, b"") for d in _DATA_FIELDS):
            raise Internal(f"the server sent stage {index}'s ({op}) arrays, which the pipeline did not ask for")
        timing[0] = Timing.from_proto(m.timing)
    return Collector(feed, lambda: (None, timing[0]))


class _Router:
    """One try's responses, stage by stage in order: each to its stage's collector; a stage is
    finished when a later one answers (its final response was its last), and the last response
    (stage == the number of stages) carries the whole pipeline's Timing."""

    def __init__(self, c, plans: List[StagePlan], returns: List[int]):
        self.c, self.plans, self.returns = c, plans, returns
        n = len(plans)
        self.collectors: List[Optional[Collector]] = [None] * n
        self.last: List[Any] = [None] * n          # each stage's last response (its final one)
        self.counts: List[Optional[int]] = [None] * n  # the element count of the arrays each made
        self.results: List[Any] = [None] * n
        self.timings: List[Timing] = [Timing()] * n
        self.current = 0                           # the stage answering now
        self.timing: Optional[Timing] = None

    def feed(self, lane: int, raw: bytes) -> None:
        f = _wire.parse(raw)
        stage = f.get(_wire.PIPELINE_STAGE, 0)
        if not isinstance(stage, int):
            raise Internal("the server sent a pipeline response whose stage is not a number")
        if self.timing is not None:
            raise Internal("the server sent pipeline responses after its last one")
        if stage < self.current or stage > len(self.plans):
            raise Internal(f"the server answered stage {stage} after stage {self.current} of {len(self.plans)}")
        while self.current < stage:
            self._finish(self.current)
            self.current += 1
        if stage == len(self.plans):
            at = f.get(_wire.PIPELINE_TIMING)
            self.timing = Timing.from_bytes(memoryview(raw)[at[0]:at[1]]) if isinstance(at, tuple) else Timing()
            return
        plan = self.plans[stage]
        at = f.get(_wire.PIPELINE_RESULT[plan.op])
        if not isinstance(at, tuple):
            raise Internal(f"the server answered stage {stage} ({plan.op}) with another operation's response")
        piece = memoryview(raw)[at[0]:at[1]]
        collector = self.collectors[stage]
        if collector is None:
            collector = self.collectors[stage] = self._collector(stage)
        collector.feed(0, piece)
        self.last[stage] = piece

    def _collector(self, i: int) -> Collector:
        plan, returns = self.plans[i], self.returns[i]
        if plan.value is not None:
            return plan.value()
        if returns == pb.STAGE_RETURN_KEEP:
            return _kept(self.c, plan.op)
        if returns == pb.STAGE_RETURN_NONE or plan.data is None:
            return _final_only(plan.op, i)
        count = plan.count if plan.count is not None else \
            self.counts[plan.count_stage] if plan.count_stage is not None else None
        return plan.data(count)

    def _finish(self, i: int) -> None:
        collector = self.collectors[i]
        if collector is None:
            raise Internal(f"the server sent no response for stage {i} ({self.plans[i].op})")
        self.results[i], self.timings[i] = collector.finish()
        if self.plans[i].op in _RESPONSES:
            count = _wire.parse(self.last[i]).get(_RESPONSES[self.plans[i].op][1], 0)
            self.counts[i] = count if isinstance(count, int) else None

    def finish(self) -> Tuple[List[Any], List[Timing], Timing]:
        if self.timing is None:
            raise Internal("the server ended the pipeline without its last response (the whole Timing)")
        return self.results, self.timings, self.timing


def program(c, plans: List[StagePlan], streamed: Optional[Tuple[np.ndarray, Any]], retries: int,
            timeout: Optional[float]) -> Program:
    """The Pipeline call of `plans` (with `streamed`, (the host array, its wire dtype), as
    header.input): (each stage's result, each stage's Timing, the whole Timing); c's last_timing
    is the whole one. Retried as a streamed call unless a stage keeps. The request is built now
    (stages added to the pipeline later are not in it), the call made when the program is driven."""
    returns = [p.returns() for p in plans]
    header = pb.PipelineHeader()
    for p, r in zip(plans, returns):
        stage = header.stages.add()
        stage.CopyFrom(p.message)
        stage.returns = r
    x = np.empty(0, np.uint8)
    if streamed is not None:
        x, header.input.dtype = streamed
        header.input.element_count = len(x)
    request = pb.PipelineRequest(header=header)
    per = _chunking.chunk_elements(c.chunk_bytes, x.itemsize)

    def attempt(t: Optional[float]) -> Program:
        router = _Router(c, plans, returns)
        yield Call("Pipeline", _chunking.data_requests(request, _wire.PIPELINE_DATA, x, per), t, router.feed)
        return router.finish()

    def run() -> Program:
        answer = yield Retry(0 if pb.STAGE_RETURN_KEEP in returns else retries, timeout, attempt)
        c._set_timing(answer[2])
        return answer
    return run()

