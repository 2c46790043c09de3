"""Each operation's argument checks and header building, once for both clients: every check runs
before any call (ValueError; a bitwise operator on floats: InvalidArgument, from _types). _ops
puts them together into a prepared call."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _device, _types
from ._types import check_array
from .v1 import gpuscan_pb2 as pb


def flattened(x, op: str, copy: bool, what: str = "x"):
    """An N-D host array flattened in C order, as numpy's axis=None does (np.sum, np.histogram,
    x[x > 0]; python.md's "N-D input" table): a view when C-contiguous, else a copy with copy=True
    (ValueError without). Anything else (1-D, a list, a CUDA or resident array) unchanged."""
    if not isinstance(x, np.ndarray) or x.ndim <= 1:
        return x
    if x.flags.c_contiguous:
        return x.reshape(-1)
    if copy:
        return np.ascontiguousarray(x).reshape(-1)
    raise ValueError(f"gpuscan: {op}: {what} of shape {x.shape} is not C-contiguous (strides {x.strides}): "
                     f"pass copy=True to send a flat copy")


def scan_axis(x, axis, algorithm, copy):
    """scan's (x, axis): axis None or a 1-D array's 0/-1 gives (x, None), the 1-D scan (an
    N-D host array with axis None flattened in C order, as np.cumsum does: without a copy
    when it is C-contiguous, else only with copy=True); a 2-D array's 0, 1, -2, -1 gives
    (x, 0 or 1). Anything else, or algorithm= with a matrix axis: ValueError."""
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise ValueError(f"gpuscan: axis must be None or an integer, got {axis!r}")
    if _device.is_device(x):  # the device path scans any shape flat
        if axis is not None and len(x.__cuda_array_interface__["shape"]) != 1:
            raise TypeError("gpuscan: a scan along an axis takes host arrays, and x is a CUDA matrix: the "
                            "device path scans arrays flat (axis=None)")
        return x, None
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if axis is None:
        if x.ndim > 1:
            if not x.flags.c_contiguous and not copy:
                raise ValueError(f"gpuscan: x of shape {x.shape} is not C-contiguous (strides {x.strides}): "
                                 "pass copy=True to scan a flat copy, or axis=0/1 for a matrix")
            x = (x if x.flags.c_contiguous else np.ascontiguousarray(x)).reshape(-1)  # a view keeps x's region
        return x, None
    if x.ndim not in (1, 2) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"gpuscan: axis {axis} of an array of shape {x.shape}: scans run along axis 0 of a "
                         "1-D array or axis 0 or 1 of a 2-D one (None: the flattened array)")
    if x.ndim == 1:
        return x, None
    if algorithm is not None:
        raise ValueError("gpuscan: algorithm= applies to 1-D scans; a scan along an axis has one algorithm")
    return x, axis % 2


def with_dtype(x, dtype, copy):
    """dtype= of scan (along an axis too), scan2d, reduce, segmented_scan and reduce_by_key:
    (x, None) for the plain path (x converted first where a 4- or 8-byte x asks for another
    dtype, as numpy casts it), or (x, (output wire dtype, result dtype)) for a narrow x (int8,
    uint8, int16, uint16, bool, float16; a 1-D array or a matrix) that travels as it is (see
    _types.accumulation; a list is converted first, so a list of bools is one). A CUDA x with
    dtype=: TypeError."""
    if _device.is_device(x):
        if dtype is not None:
            raise TypeError("gpuscan: dtype= takes host arrays; the device path keeps x's dtype")
        return x, None
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if dtype is None and _types.narrow_wire(x) is None:
        return x, None
    x, wire, result = _types.accumulation(x, dtype)
    if wire is None:
        return x, None
    return x, (wire, result)


def check_out(x, out) -> None:
    """A scan's out= (None passes): a writable contiguous array of x's dtype and shape."""
    if out is not None and (
            not isinstance(out, np.ndarray) or out.shape != x.shape or
            out.dtype.newbyteorder("=") != x.dtype.newbyteorder("=") or not out.flags.c_contiguous
            or not out.flags.writeable or out.dtype.byteorder == ">"):
        raise ValueError(f"gpuscan: out must be a writable contiguous {x.dtype} array of shape {x.shape}")


def narrow_out(x, out, result: np.dtype) -> np.ndarray:
    """A narrow x's scan output: out checked (a writable contiguous array of the result dtype
    and x's shape), or a new one."""
    if out is None:
        return np.empty(len(x), result)
    if (not isinstance(out, np.ndarray) or out.shape != x.shape or out.dtype != result
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"gpuscan: out must be a writable contiguous {result} array of shape {x.shape}")
    return out


def scan_out(x, out):
    """The streamed scan's output array: out, or a new one."""
    return np.empty(len(x), x.dtype.newbyteorder("=")) if out is None else out


def scan_retries(x, out, retries: int) -> int:
    """A streamed scan is retried unless it runs in place (out overlaps x): a failed try may
    have written results over its input, which a retry would then send."""
    return 0 if np.may_share_memory(x, out) else retries


def segmented_retries(x, side, out, retries: int) -> int:
    """As scan_retries, with the keys or heads also an input that out must not overlap."""
    return 0 if np.may_share_memory(x, out) or np.may_share_memory(side, out) else retries


def scan_header(wire, op, exclusive, algorithm, n=None):
    h = pb.ScanHeader(dtype=wire, op=_types.operator(op, wire),
                      kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                      algorithm=_types.scan_algorithm(algorithm))
    if n is not None:
        h.element_count = n
    return h


def carry_bytes(carry, result: np.dtype) -> bytes:
    """scan's carry= as ScanHeader.carry: one little-endian element of the results' dtype, the
    value exactly (ints, floats and numpy scalars; an integral float for an integer dtype). A
    value the dtype cannot hold exactly (2**40 for int32, -1 for uint32, 0.1 for float32): ValueError;
    bool or a non-number: TypeError; a float16 result: ValueError (the server folds no carry into it)."""
    result = np.dtype(result)
    v = carry[()] if isinstance(carry, np.ndarray) and carry.ndim == 0 else carry
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"gpuscan: carry must be a number (an int, a float or a numpy scalar), got {carry!r}")
    if result.kind == "f" and result.itemsize == 2:
        raise ValueError("gpuscan: carry= with a float16 result: the server folds no carry into a float16 "
                         "output (scan with dtype=np.float32 instead)")
    value = None
    with np.errstate(over="ignore", invalid="ignore"):
        if result.kind != "f":
            whole = isinstance(v, (int, np.integer)) or (np.isfinite(v) and float(v).is_integer())
            info = np.iinfo(result)
            if whole and info.min <= int(v) <= info.max:
                value = result.type(int(v))
        elif isinstance(v, (int, np.integer)):
            try:
                f = result.type(int(v))
                value = f if np.isfinite(f) and int(f) == int(v) else None
            except OverflowError:  # beyond float64
                pass
        else:
            f = result.type(v)
            value = f if (np.isnan(f) if np.isnan(v) else float(f) == float(v)) else None
    fits = value is not None
    if not fits:
        raise ValueError(f"gpuscan: carry {carry!r} does not fit the results' dtype {result} exactly: pass a "
                         f"value that does (np.{result}(...))")
    return np.asarray(value, result.newbyteorder("<")).tobytes()


def set_carry(header, carry, result: np.dtype) -> bool:
    """header.carry from scan's carry= (carry_bytes) where it is given: whether it is."""
    if carry is None:
        return False
    header.carry = carry_bytes(carry, result)
    return True


def no_carry(carry) -> None:
    """carry= with a scan along an axis of a matrix (each row or column scanned on its own): ValueError."""
    if carry is not None:
        raise ValueError("gpuscan: carry= applies to 1-D scans (axis=None): a scan along axis 0 or 1 of a matrix "
                         "takes no carry")


def scan_args(x, op, exclusive, algorithm, out, copy=False):
    """x checked, the first request, and out checked (None stays None: see scan_out)."""
    x, wire = check_array(x, copy=copy)
    header = pb.ScanRequest(header=scan_header(wire, op, exclusive, algorithm, len(x)))
    check_out(x, out)
    return x, header, out


def reduce_request(wire, op, n: int):
    return pb.ReduceRequest(header=pb.ReduceHeader(dtype=wire, op=_types.operator(op, wire), element_count=n))


def histogram_args(x, bins, range_, copy=False):
    """x checked (narrow dtypes taken as they are; bool binned as uint8, as numpy.histogram
    converts it) and the first request. N-D: flattened, as numpy.histogram does."""
    x, wire = check_array(flattened(x, "histogram", copy), copy=copy, narrow=True)
    if x.dtype.kind == "b":
        x = x.view(np.uint8)
    return x, pb.HistogramRequest(header=_types.histogram_header(x, wire, bins, range_))


def one_segmentation(keys, heads) -> None:
    if (keys is None) == (heads is None):
        raise ValueError("gpuscan: segmented_scan needs exactly one of keys= (segments: runs of equal "
                         "keys) or heads= (segments begin at nonzero heads)")


def values_and_wires(x, copy, accumulate) -> Tuple[np.ndarray, int, Optional[int]]:
    """The values of a call with dtype= (segmented_scan, reduce_by_key): (x checked, its wire
    dtype, the header's output_dtype or None). accumulate None: x checked as scan's; else
    (from with_dtype) a narrow x, 1-D, contiguous and little-endian (copy=True copies it)."""
    x, wire = check_array(x, copy=copy, narrow=accumulate is not None)
    return x, wire, None if accumulate is None else accumulate[0]


def segmented_args(x, keys, heads, op, exclusive, out, copy=False, accumulate=None):
    """x checked as scan's, the keys or head bytes (`side`: contiguous, little-endian, len(x)
    elements), the first request, and out checked (None stays None; a narrow x's, with
    `accumulate` from with_dtype: out of the result dtype, new if None). Every check before
    any call: ValueError (a bitwise operator on floats: InvalidArgument, as scan's)."""
    one_segmentation(keys, heads)
    x, wire, output = values_and_wires(x, copy, accumulate)
    header = pb.SegmentedScanHeader(dtype=wire, op=_types.operator(op, output or wire),
                                    kind=pb.SCAN_KIND_EXCLUSIVE if exclusive else pb.SCAN_KIND_INCLUSIVE,
                                    element_count=len(x))
    if output is not None:
        header.output_dtype = output
    if keys is not None:
        side, header.key_dtype = _types.segment_keys(keys, copy)
        what = "keys"
    else:
        side = _types.segment_heads(heads, copy)
        header.heads = True
        what = "heads"
    if len(side) != len(x):
        raise ValueError(f"gpuscan: {what} has {len(side)} elements but x has {len(x)}: they must match")
    if accumulate is None:
        check_out(x, out)
    else:
        out = narrow_out(x, out, accumulate[1])
    return x, side, pb.SegmentedScanRequest(header=header), out


def scan2d_args(x, op, out, copy=False, what: str = "scan2d", accumulate=None):
    """x as a 2-D C-contiguous little-endian matrix (copy=True: a non-contiguous or big-endian
    one is copied) flattened without a copy, out (new if None; else checked as scan's, same
    shape; a narrow x's, with `accumulate` from with_dtype: of the result dtype) and its flat
    view, and the first request (a narrow x's with output_dtype). Every check before any
    call: ValueError (a bitwise operator on floats: InvalidArgument, as scan's)."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"gpuscan: {what} takes a 2-D matrix, got shape {x.shape}")
    if x.shape[1] == 0:
        raise ValueError(f"gpuscan: {what} needs at least one column, got shape {x.shape}")
    if copy and x.dtype.kind in "iuf" and (not x.flags.c_contiguous or x.dtype.byteorder == ">"):
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
    if not x.flags.c_contiguous:  # reshape would copy behind the caller's back
        raise ValueError(f"gpuscan: x is not C-contiguous (strides {x.strides}); "
                         "pass copy=True or np.ascontiguousarray(x) to send a copy")
    flat, wire = check_array(x.reshape(-1), copy=copy, narrow=accumulate is not None)
    output, result = accumulate if accumulate is not None else (None, flat.dtype.newbyteorder("="))
    rows, cols = x.shape
    header = pb.Scan2DHeader(dtype=wire, op=_types.operator(op, output or wire), cols=cols, rows=rows)
    if output is not None:
        header.output_dtype = output
    if out is None:
        out = np.empty(x.shape, result)
    elif not isinstance(out, np.ndarray) or out.shape != x.shape or not out.flags.c_contiguous:
        raise ValueError(f"gpuscan: out must be a writable contiguous {result} array of shape {x.shape}")
    out_flat = out.reshape(-1)
    if accumulate is None:
        check_out(flat, out_flat)
    else:
        narrow_out(x, out, result)
    return flat, out, out_flat, pb.Scan2DRequest(header=header)


def reduce_by_key_args(x, keys, op, copy=False, accumulate=None):
    """x checked as scan's (a narrow one with `accumulate` as segmented_args'), the keys
    (contiguous, little-endian, widened as segmented_scan's, len(x) of them) and the first
    request. Every check before any call: ValueError (a bitwise operator on floats:
    InvalidArgument, as scan's)."""
    if keys is None:
        raise ValueError("gpuscan: reduce_by_key needs keys (an integer array of len(x): each run of "
                         "equal consecutive keys gives one value)")
    x, wire, output = values_and_wires(x, copy, accumulate)
    header = pb.ReduceByKeyHeader(dtype=wire, op=_types.operator(op, output or wire), element_count=len(x))
    if output is not None:
        header.output_dtype = output
    side, header.key_dtype = _types.segment_keys(keys, copy)
    if len(side) != len(x):
        raise ValueError(f"gpuscan: keys has {len(side)} elements but x has {len(x)}: they must match")
    return x, side, pb.ReduceByKeyRequest(header=header)


def check_descending(descending) -> None:
    if not isinstance(descending, (bool, np.bool_)):
        raise ValueError(f"gpuscan: descending must be True or False, got {descending!r}")


def sort_args(x, values, descending, output: int, copy=False):
    """x (the keys) checked as scan's, narrow dtypes (bool too) taken as they are, the values
    (None, or checked as x: any served dtype, narrow ones too, len(x) of them) and the first
    request, its output `output` (KEYS_AND_VALUES when values are given). Every check before
    any call: ValueError."""
    check_descending(descending)
    if isinstance(x, np.ndarray) and x.ndim > 1:  # numpy sorts along the last axis: no flat guess
        what = "sort" if output == pb.SORT_OUTPUT_KEYS or output == pb.SORT_OUTPUT_KEYS_AND_VALUES else "argsort"
        raise ValueError(f"gpuscan: {what} takes a 1-D array, x has shape {x.shape} (np.{what} would work along "
                         f"the last axis): pass x.ravel() for the flattened array, as np.{what}(x, axis=None)")
    x, wire = check_array(x, copy=copy, narrow=True)
    header = pb.SortHeader(dtype=wire, descending=bool(descending), output=output, element_count=len(x))
    side = None
    if values is not None:
        side, header.values_dtype = check_array(values, "values", copy, narrow=True)
        if len(side) != len(x):
            raise ValueError(f"gpuscan: values has {len(side)} elements but x has {len(x)}: they must match")
        header.output = pb.SORT_OUTPUT_KEYS_AND_VALUES
    return x, side, pb.SortRequest(header=header)


def flat_compact(x, where, copy):
    """compact's (x, where): an N-D host x, and its where= (of x's shape, as numpy's x[mask]
    wants), flattened: the kept values come in C order, indices into the flattened x
    (np.flatnonzero's)."""
    if isinstance(x, np.ndarray) and x.ndim > 1:
        if where is not None:
            mask = np.asarray(where)
            if mask.shape != x.shape:
                raise ValueError(f"gpuscan: where has shape {mask.shape}, x has {x.shape}")
            where = mask.reshape(-1)
        x = flattened(x, "compact", copy)
    return x, where


def compact_args(x, where, predicate, indices, values, copy=False):
    x, wire = check_array(x, copy=copy, narrow=True)  # narrow dtypes kept as they are
    header = compact_header(wire, x.dtype, len(x), where, predicate, indices, values)
    flags = None
    if where is not None:
        mask = np.asarray(where)
        if mask.shape != x.shape:
            raise ValueError(f"gpuscan: where has shape {mask.shape}, x has {x.shape}")
        flags = np.ascontiguousarray(mask != 0 if mask.dtype != np.bool_ else mask).view(np.uint8)
    return x, flags, pb.CompactRequest(header=header)


def compact_header(wire, dtype: np.dtype, n: int, where, predicate, indices, values) -> "pb.CompactHeader":
    """A compact's header: use_flags for where=, else the predicate; the outputs asked for."""
    if (where is None) == (predicate is None):
        raise ValueError("gpuscan: compact needs exactly one of where= (a mask) or predicate= (e.g. ('gt', 0))")
    header = pb.CompactHeader(dtype=wire, element_count=n)
    if where is not None:
        header.use_flags = True
    else:
        header.predicate.CopyFrom(_types.predicate(predicate, dtype))
    if not values and not indices:
        raise ValueError("gpuscan: compact with values=False needs indices=True")
    header.output = (pb.COMPACT_OUTPUT_VALUES_AND_INDICES if values and indices else
                     pb.COMPACT_OUTPUT_INDICES if indices else pb.COMPACT_OUTPUT_VALUES)
    return header


def compact_outputs(v, i, values, indices):
    """What compact returns: the values, the indices, or both (as asked)."""
    if values and indices:
        return v, i
    return v if values else i
