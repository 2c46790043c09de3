"""Pipelines (the Pipeline RPC; docs/python.md, "Pipelines"): `p = c.pipeline()`, then each of
p.scan, p.reduce, p.histogram, p.compact, p.segmented_scan, p.sort and p.argsort adds a stage and
returns its Stage; `res = p.run()` (AsyncClient: `await p.run()`) sends them as one call, the server
runs them in order, and res[stage] is what the stage's own call returns. A stage takes its call's
arguments, checked and its header built by that call's code (_checks, _types) when
the stage is added (ValueError, TypeError before any call). Its inputs: RemoteArrays, earlier
stages' arrays (a Stage, or its .keys/.values/.indices) and at most one host array, the pipeline's
streamed input. Reading the responses is _pipeline_run's."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _checks, _device, _pipeline_run, _resident, _types
from ._pipeline_run import INDICES, SORT_VALUES, VALUES, Arrays, StagePlan
from ._resident import RemoteArray
from ._types import Timing
from .v1 import gpuscan_pb2 as pb

class StageOutput:
    """One array a pipeline stage makes (stage.keys, .values, .indices): an input of a later
    stage, or res[...]'s key for that array alone. dtype: its numpy dtype."""

    __slots__ = ("stage", "array", "name", "dtype")

    def __init__(self, stage: "Stage", array: Any, name: str, dtype: np.dtype):  # array: a pb.StageArray
        self.stage, self.array, self.name, self.dtype = stage, array, name, dtype

    def __repr__(self) -> str:
        return f"{self.stage!r}.{self.name}"


class Stage:
    """What a Pipeline's stage method returns: the stage's handle. As a later stage's input it is
    the array its call returns first (scan: the result; compact: the kept values, or the indices
    with values=False; sort: the sorted keys; argsort: the indices); .keys, .values and .indices
    name its others (compact: values, indices; sort: keys, values (values=), indices (argsort)).
    A reduce or histogram stage answers a value: it is no input. After p.run(), res[stage]."""

    __slots__ = ("_pipeline", "index", "op", "_outputs", "_first")

    def __init__(self, pipeline: "Pipeline", index: int, op: str, outputs: Mapping[str, Tuple[int, np.dtype]],
                 first: Optional[str]):
        self._pipeline, self.index, self.op, self._first = pipeline, index, op, first
        self._outputs = {name: StageOutput(self, a, name, d) for name, (a, d) in outputs.items()}

    def _output(self, name: str) -> StageOutput:
        out = self._outputs.get(name)
        if out is None:
            makes = ", ".join(self._outputs) or "a value, no arrays"
            raise ValueError(f"gpuscan: {self!r} makes no {name} (it makes {makes})")
        return out

    @property
    def keys(self) -> StageOutput:
        """A sort stage's sorted keys."""
        return self._output("keys")

    @property
    def values(self) -> StageOutput:
        """A scan's result, a compact stage's kept values, a sort stage's values moved with the keys."""
        return self._output("values")

    @property
    def indices(self) -> StageOutput:
        """A compact stage's kept indices (indices=True), an argsort stage's permutation (int64)."""
        return self._output("indices")

    def _as_input(self, op: str, name: str) -> StageOutput:
        if self._first is None:
            raise TypeError(f"gpuscan: pipeline {op}: {name} is {self!r}, which answers a value, not an array: a "
                            "stage's inputs are arrays (RemoteArrays, earlier stages' arrays, the streamed host array)")
        return self._outputs[self._first]

    def __repr__(self) -> str:
        return f"Stage({self.index}, {self.op!r})"


class PipelineResult:
    """p.run()'s answer. res[stage]: what the stage's own call returns (arrays, a reduce's
    scalar, a HistogramResult), RemoteArrays in place of arrays for a stage with keep=True;
    res[stage.indices] (or .keys, .values): that array alone. A stage whose arrays were
    intermediates (read by a later stage, without fetch=True or keep=True) returned nothing:
    KeyError. timing: the whole pipeline's Timing (also the client's last_timing); timings[i]:
    stage i's (its operation's, as its call's Timing)."""

    def __init__(self, stages: Tuple[Stage, ...], shapes: List[Callable[[Any], Any]], results: List[Any],
                 timings: List[Timing], timing: Timing):
        self.stages = stages
        self._shapes, self._results = shapes, results
        self.timings = timings
        self.timing = timing

    def __getitem__(self, key: Union[Stage, StageOutput]) -> Any:
        stage = key.stage if isinstance(key, StageOutput) else key
        if not isinstance(stage, Stage):
            raise TypeError(f"gpuscan: a PipelineResult is indexed by the pipeline's stages, got {type(key).__name__}")
        if stage.index >= len(self.stages) or self.stages[stage.index] is not stage:
            raise KeyError(f"{stage!r} is not a stage of this run")
        result = self._results[stage.index]
        if result is None:
            raise KeyError(f"{stage!r} returned nothing: its arrays were intermediates of later stages (fetch=True "
                           "returns them, keep=True keeps them)")
        if isinstance(key, StageOutput):
            return result[key.array]
        return self._shapes[stage.index](result)

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return f"PipelineResult({len(self.stages)} stages, total_us={self.timing.total_us})"


@dataclasses.dataclass
class _Input:
    """One resolved stage input: its StageInput, dtype, element count (None: known only once the
    run made it) and, for the streamed host array, (the caller's object, the array sent)."""
    message: Any  # pb.StageInput
    dtype: np.dtype
    size: Optional[int]
    stage: Optional[int] = None
    host: Optional[Tuple[Any, np.ndarray]] = None

    @property
    def wire(self) -> Any:  # a pb.DType (the stubs type enum fields apart from int)
        return _types.wire_dtype(self.dtype, narrow=True)


class Pipeline:
    """Stages run on the server in order as one call (the Pipeline RPC): c.pipeline(). Each stage
    method takes its call's arguments (c.scan's op, exclusive, algorithm, dtype; c.compact's where,
    predicate, indices, values; ...; not out=, copy=, lanes=, retries= or timeout=: run()'s) and
    returns a Stage. Inputs: RemoteArrays, earlier stages (Stage or stage.keys/.values/.indices) and
    at most one host array (the same object in as many stages as read it; a second one is a
    ValueError: put it first), streamed once at run() and held by the server while the call runs.
    Narrow dtypes (int8, uint8, int16, uint16, float16, bool as uint8) are taken as the calls take
    them (a narrow scan's result in its wider dtype= or numpy's). A stage's arrays: keep=True (ttl=, label= as put's) keeps them as RemoteArrays;
    fetch=True returns them; by default (fetch=None) they come back when no later stage reads them,
    else they are intermediates, freed on the server after their last reader. run() answers a
    PipelineResult; the results are bit for bit those of the calls one by one."""

    def __init__(self, client):
        self._client = client
        self._plans: List[StagePlan] = []
        self._stages: List[Stage] = []
        self._shapes: List[Callable[[Any], Any]] = []
        self._stream: Optional[Tuple[Any, np.ndarray]] = None  # (the caller's host array, the array sent)
        self._pending: Optional[Tuple[Any, np.ndarray]] = None  # the stage being added's, until it is

    @property
    def stages(self) -> Tuple[Stage, ...]:
        """The stages added so far, in order."""
        return tuple(self._stages)

    def __len__(self) -> int:
        return len(self._stages)

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(s.op for s in self._stages)})"

    # -- the stages
    def scan(self, x, op: str = "sum", exclusive: bool = False, algorithm: Optional[str] = None, *, dtype=None,
             keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None,
             fetch: Optional[bool] = None, carry=None) -> Stage:
        """A scan stage: c.scan(x, op, exclusive, algorithm, dtype=, carry=) of a 1-D input; res[stage] its result."""
        v, out_wire, result = self._accumulated("scan", x, dtype)
        header = _checks.scan_header(v.wire, op, exclusive, algorithm, v.size)
        if out_wire is not None:
            header.output_dtype = out_wire
        _checks.set_carry(header, carry, result)
        return self._add("scan", pb.PipelineStage(scan=header), [("values", v)], {"values": (VALUES, result)},
                         "values", v, _pipeline_run.scan_data(result), lambda a: a[VALUES], keep, ttl, label, fetch)

    def reduce(self, x, op: str = "sum", *, dtype=None) -> Stage:
        """A reduce stage: c.reduce(x, op, dtype=); res[stage] the numpy scalar."""
        v, out_wire, result = self._accumulated("reduce", x, dtype)
        header = _checks.reduce_request(v.wire, op, 0).header
        if out_wire is not None:
            header.output_dtype = out_wire
        _count(header, v.size)
        plan = StagePlan("reduce", pb.PipelineStage(reduce=header), None, value=_pipeline_run.reduce_value(result))
        return self._commit(plan, [("values", v)], {}, None, lambda value: value)

    def histogram(self, x, bins=10, range=None) -> Stage:
        """A histogram stage: c.histogram(x, bins, range); res[stage] a HistogramResult. range=None
        (numpy's: x's min and max) takes the host array alone; another input needs range= or edges."""
        v = self._values("histogram", "x", x)
        sample = v.host[1] if v.host is not None else np.empty(0, v.dtype)
        if v.host is None and np.ndim(bins) == 0 and range is None and v.size != 0:
            raise ValueError("gpuscan: pipeline histogram of a RemoteArray or a stage's array needs range=(lo, hi) or "
                             "explicit edges (numpy's default range would need its min and max here)")
        header = _types.histogram_header(sample, v.wire, bins, range)
        _count(header, v.size)
        plan = StagePlan("histogram", pb.PipelineStage(histogram=header), None, value=_pipeline_run.histogram_value)
        return self._commit(plan, [("values", v)], {}, None, lambda value: value)

    def compact(self, x, where=None, predicate=None, *, indices: bool = False, values: bool = True,
                keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None,
                fetch: Optional[bool] = None) -> Stage:
        """A compact stage: c.compact(x, where, predicate, indices=, values=); where= a uint8/int8
        RemoteArray or the host array (a mask). res[stage]: the kept values, (values, indices) or
        indices; as an input the stage is its kept values (indices with values=False)."""
        v = self._values("compact", "x", x)
        header = _checks.compact_header(v.wire, v.dtype, 0, where, predicate, indices, values)
        _count(header, v.size)
        inputs = [("values", v)]
        if where is not None:
            inputs.append(("flags", self._flags("compact", "where", where, v)))
        outputs = {}
        if values:
            outputs["values"] = (VALUES, v.dtype)
        if indices:
            outputs["indices"] = (INDICES, np.dtype(np.int64))
        shape = _compact_shape(bool(values), bool(indices))
        return self._add("compact", pb.PipelineStage(compact=header), inputs, outputs,
                         "values" if values else "indices", None,
                         _pipeline_run.compact_data(v.dtype, bool(values), bool(indices)), shape, keep, ttl, label,
                         fetch)

    def segmented_scan(self, x, keys=None, *, heads=None, op: str = "sum", exclusive: bool = False, dtype=None,
                       keep: bool = False, ttl: Optional[float] = None, label: Optional[str] = None,
                       fetch: Optional[bool] = None) -> Stage:
        """A segmented scan stage: c.segmented_scan(x, keys, heads=, op=, exclusive=, dtype=);
        keys an integer array (4 or 8 bytes), heads a uint8/int8 one; res[stage] its result."""
        _checks.one_segmentation(keys, heads)
        v, out_wire, result = self._accumulated("segmented_scan", x, dtype)
        operator: Any = _types.operator(op, v.wire)  # a pb.Operator
        header = pb.SegmentedScanHeader(dtype=v.wire, op=operator,
                                        kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE)
        if out_wire is not None:
            header.output_dtype = out_wire
        _count(header, v.size)
        inputs = [("values", v)]
        if keys is not None:
            k = self._input("segmented_scan", "keys", keys, "keys")
            if k.dtype.kind not in "iu" or k.dtype.itemsize < 4:
                raise ValueError(f"gpuscan: pipeline segmented_scan: keys must be int32, int64, uint32 or uint64, "
                                 f"got {k.dtype}")
            _same_length("segmented_scan", v, "keys", k)
            header.key_dtype = k.wire
            inputs.append(("keys", k))
        else:
            header.heads = True
            inputs.append(("flags", self._flags("segmented_scan", "heads", heads, v)))
        return self._add("segmented_scan", pb.PipelineStage(segmented_scan=header), inputs,
                         {"values": (VALUES, result)}, "values", v, _pipeline_run.scan_data(result),
                         lambda a: a[VALUES], keep, ttl, label, fetch)

    def sort(self, x, *, values=None, descending: bool = False, keep: bool = False, ttl: Optional[float] = None,
             label: Optional[str] = None, fetch: Optional[bool] = None) -> Stage:
        """A sort stage: c.sort(x, values=, descending=); res[stage] the sorted keys, or (keys,
        values) with values=; .keys and .values name them as inputs (the stage itself: the keys)."""
        shape = (lambda a: a[VALUES]) if values is None else (lambda a: (a[VALUES], a[SORT_VALUES]))
        return self._sort("sort", x, values, descending, pb.SORT_OUTPUT_KEYS, shape, keep, ttl, label, fetch)

    def argsort(self, x, *, descending: bool = False, return_keys: bool = False, keep: bool = False,
                ttl: Optional[float] = None, label: Optional[str] = None, fetch: Optional[bool] = None) -> Stage:
        """An argsort stage: c.argsort(x, descending=, return_keys=); res[stage] the permutation
        (int64), or (keys, permutation); as an input the stage is the permutation (.keys: the keys)."""
        output = pb.SORT_OUTPUT_KEYS_AND_INDICES if return_keys else pb.SORT_OUTPUT_INDICES
        shape = (lambda a: (a[VALUES], a[INDICES])) if return_keys else (lambda a: a[INDICES])
        return self._sort("argsort", x, None, descending, output, shape, keep, ttl, label, fetch)

    def _sort(self, what: str, x, values, descending, output: Any, shape: Callable[[Arrays], Any], keep, ttl, label,
              fetch) -> Stage:
        _checks.check_descending(descending)
        k = self._values(what, "x", x)
        header = pb.SortHeader(dtype=k.wire, descending=bool(descending), output=output)
        _count(header, k.size)
        inputs = [("values", k)]
        outputs: Dict[str, Tuple[int, np.dtype]] = {}
        if output != pb.SORT_OUTPUT_INDICES:
            outputs["keys"] = (VALUES, k.dtype)
        values_dtype = None
        if values is not None:
            sv = self._served(what, "values", self._input(what, "values", values, "values"))
            _same_length(what, k, "values", sv)
            header.values_dtype, header.output, values_dtype = sv.wire, pb.SORT_OUTPUT_KEYS_AND_VALUES, sv.dtype
            inputs.append(("sort_values", sv))
            outputs["values"] = (SORT_VALUES, sv.dtype)
        if output in (pb.SORT_OUTPUT_INDICES, pb.SORT_OUTPUT_KEYS_AND_INDICES):
            outputs["indices"] = (INDICES, np.dtype(np.int64))
        collect = _pipeline_run.sort_data(k.dtype, values_dtype, header.output, bool(descending))
        return self._add("sort", pb.PipelineStage(sort=header), inputs, outputs,
                         "indices" if what == "argsort" else "keys", k, collect, shape, keep, ttl, label, fetch, what)

    # -- running
    def run(self, *, retries: Optional[int] = None, timeout: Optional[float] = None) -> Any:
        """Sends the pipeline as one call and answers a PipelineResult (AsyncClient: a coroutine).
        retries, timeout as a streamed call's (c.scan's: None the client's); a pipeline with a
        keep=True stage is not retried. The server's errors as the client's (gpuscan.InvalidArgument
        naming the stage, gpuscan.NotFound for a dropped RemoteArray, ...); a failed pipeline keeps
        nothing. It may run again (the host array is read again; kept arrays are kept again)."""
        if not self._plans:
            raise ValueError("gpuscan: the pipeline has no stages (add them with p.scan(...), p.reduce(...), ...)")
        c = self._client
        tries, seconds = c._call_options(retries, timeout)
        stages, plans, shapes = tuple(self._stages), list(self._plans), list(self._shapes)
        streamed = None
        if self._stream is not None:
            sent = self._stream[1]
            streamed = (sent, _types.wire_dtype(sent.dtype, narrow=True))
        call = _pipeline_run.program(c, plans, streamed, tries, seconds)

        def program():
            results, timings, timing = yield from call
            return PipelineResult(stages, shapes, results, timings, timing)
        return c._drive(program())

    # -- inputs
    def _values(self, op: str, name: str, x) -> _Input:
        """The array a stage's header describes, narrow dtypes as they are (compact, sort and
        histogram take them so; bool as uint8, as the calls send it)."""
        self._pending = None
        return self._served(op, name, self._input(op, name, x, "values"))

    def _accumulated(self, op: str, x, dtype) -> Tuple[_Input, Optional[int], np.dtype]:
        """scan's, reduce's and segmented_scan's x: (the input, the header's output_dtype or None,
        the result's dtype). A narrow x accumulates as the call's does (dtype=, else numpy's
        default: int64, uint64 or float16); a 4- or 8-byte one in its own dtype (dtype= only that:
        a stage computes in its input's dtype)."""
        v = self._values(op, "x", x)
        if _types.narrow_wire(np.empty(0, v.dtype)) is not None:
            _, out_wire, result = _types.accumulation(np.empty(0, v.dtype), dtype)
            return v, out_wire, result
        if dtype is not None and np.dtype(dtype).newbyteorder("=") != v.dtype:
            raise ValueError(f"gpuscan: pipeline {op}: dtype={np.dtype(dtype)} for an input of {v.dtype}: a stage "
                             "computes in its input's dtype (convert the host array, or call the operation itself)")
        return v, None, v.dtype

    @staticmethod
    def _served(op: str, name: str, v: _Input) -> _Input:
        try:
            _types.wire_dtype(v.dtype, narrow=True)
        except ValueError as e:
            raise ValueError(f"gpuscan: pipeline {op}: {name}: {e}") from None
        return v

    def _flags(self, op: str, name: str, mask, values: _Input) -> _Input:
        """where= or heads=: one byte an element (uint8 or int8), values' length."""
        f = self._input(op, name, mask, name)
        if f.dtype.itemsize != 1 or f.dtype.kind not in "iub":
            raise ValueError(f"gpuscan: pipeline {op}: {name} must be one byte an element (a uint8 or int8 "
                             f"RemoteArray, or a host mask), got {f.dtype}")
        _same_length(op, values, name, f)
        return f

    def _input(self, op: str, name: str, x, role: str) -> _Input:
        """x as a stage input: an earlier stage's array, a RemoteArray or the streamed host array
        (role: how a host array is sent: "values", "keys" as segmented_scan's, "where" and "heads"
        as those masks' bytes)."""
        if isinstance(x, Stage):
            x = x._as_input(op, name)
        if isinstance(x, StageOutput):
            if x.stage._pipeline is not self:
                raise ValueError(f"gpuscan: pipeline {op}: {name} is a stage of another pipeline")
            plan = self._plans[x.stage.index]
            size = plan.count if plan.count_stage is None else None
            return _Input(pb.StageInput(stage=x.stage.index, array=x.array), x.dtype, size, stage=x.stage.index)
        if isinstance(x, RemoteArray):
            if x.ndim != 1:
                raise ValueError(f"gpuscan: pipeline {op}: {name} is a matrix handle; pipeline stages are 1-D "
                                 f"({name}.reshape(-1))")
            return _Input(pb.StageInput(id=x.id), x.dtype, x.size)
        _device.refuse(f"a pipeline's {op}", **{name: x})
        if role == "keys":
            sent, _ = _types.segment_keys(x)
        elif role == "heads":
            sent = _types.segment_heads(x)
        elif role == "where":
            mask = np.asarray(x)
            if mask.ndim != 1:
                raise ValueError(f"gpuscan: where must be 1-D, got shape {mask.shape}")
            sent = np.ascontiguousarray(mask != 0 if mask.dtype != np.bool_ else mask)  # bool: as the values' bytes
        else:
            sent, _ = _types.check_array(x, name, narrow=True)
        held = self._stream or self._pending
        if held is not None and held[0] is not x:
            raise ValueError(f"gpuscan: pipeline {op}: {name} is a second host array: a pipeline streams one (the "
                             "same object in every stage that reads it); put the others first (c.put(a): "
                             "RemoteArrays)")
        if held is not None and held[1].dtype != sent.dtype:
            raise ValueError(f"gpuscan: pipeline {op}: the host array is read as {held[1].dtype} and as {name} "
                             f"({sent.dtype}): one streamed input has one dtype")
        host = held or (x, sent)
        self._pending = host
        return _Input(pb.StageInput(streamed=True), host[1].dtype, len(host[1]), host=host)

    # -- adding a stage
    def _add(self, op: str, message, inputs: List[Tuple[str, _Input]], outputs: Mapping[str, Tuple[int, np.dtype]],
             first: str, counted: Optional[_Input], collect, shape: Callable[[Arrays], Any], keep, ttl, label,
             fetch, name: Optional[str] = None) -> Stage:
        """An array-making stage: keep/ttl/label/fetch checked; its arrays' count is counted's
        (None: not known before it runs, a compact's)."""
        if fetch is not None and not isinstance(fetch, (bool, np.bool_)):
            raise ValueError(f"gpuscan: fetch must be True, False or None, got {fetch!r}")
        if keep:
            if fetch:
                raise ValueError("gpuscan: keep=True and fetch=True: a kept stage's arrays stay on the server "
                                 "(res[stage] is RemoteArrays; .get() them)")
            message.ttl_ms, message.label = _resident.ttl_ms(ttl), _resident.check_label(label)
        elif ttl is not None or label is not None:
            raise ValueError("gpuscan: ttl= and label= describe kept arrays: they need keep=True")
        plan = StagePlan(op, message, collect, keep=bool(keep), fetch=None if fetch is None else bool(fetch))
        if counted is not None:
            plan.count = counted.size
            plan.count_stage = counted.stage if counted.size is None else None
        return self._commit(plan, inputs, outputs, first, shape, name)

    def _commit(self, plan: StagePlan, inputs: List[Tuple[str, _Input]], outputs: Mapping[str, Tuple[int, np.dtype]],
                first: Optional[str], shape: Callable[[Any], Any], name: Optional[str] = None) -> Stage:
        """Every check passed: the inputs set in its message, the stages it reads marked, the host
        array held; the stage added."""
        for field, inp in inputs:
            getattr(plan.message, field).CopyFrom(inp.message)
            if inp.stage is not None:
                self._plans[inp.stage].read = True
        if self._pending is not None:
            self._stream, self._pending = self._pending, None
        stage = Stage(self, len(self._stages), name or plan.op, outputs, first)
        self._plans.append(plan)
        self._stages.append(stage)
        self._shapes.append(shape)
        return stage


def _count(header, size: Optional[int]) -> None:
    """header.element_count: the input's count when known (the server checks it), else unset."""
    if size is None:
        header.ClearField("element_count")
    else:
        header.element_count = size


def _same_length(op: str, v: _Input, name: str, other: _Input) -> None:
    """Inputs of one stage of known counts must match (else the server says so when it runs)."""
    if v.size is not None and other.size is not None and v.size != other.size:
        raise ValueError(f"gpuscan: pipeline {op}: {name} has {other.size} elements but x has {v.size}: they must "
                         "match")


def _compact_shape(values: bool, indices: bool) -> Callable[[Arrays], Any]:
    """What compact returns, from a compact stage's arrays (numpy or RemoteArrays)."""
    return lambda a: _checks.compact_outputs(a.get(VALUES), a.get(INDICES), values, indices)


