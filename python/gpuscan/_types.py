"""numpy <-> wire: dtypes, operators, predicates, and the plain results (Timing, ...).

Everything that turns a Python value into a proto enum or message, or back, is here; the client
modules never spell an enum value.
"""
from __future__ import annotations

import dataclasses
import math
import operator as _operator  # _types.operator() is the wire operator helper
import sys
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np


def check_int(value, what: str, minimum: int) -> int:
    """value as an int >= minimum, else ValueError naming `what` (bools, floats, strings refused)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        k = _operator.index(value)
    except TypeError:
        raise ValueError(f"gpuscan: {what} must be an integer >= {minimum}, got {value!r}") from None
    if k < minimum:
        raise ValueError(f"gpuscan: {what} must be >= {minimum}, got {k}")
    return k

try:
    from .v1 import gpuscan_pb2 as pb
except ModuleNotFoundError as e:  # the source tree: stubs are generated at build time
    if e.name not in ("gpuscan.v1", "gpuscan.v1.gpuscan_pb2"):
        raise
    raise ImportError(
        "gpuscan: the generated stubs (gpuscan.v1) are missing: this looks like the source tree. Install "
        "the package (pip install --no-build-isolation --no-deps ./python), use the build tree "
        "(PYTHONPATH=build/python/pkg after make), or generate them in place: "
        "python3 python/tools/gen_stubs.py python") from None

# dtype <-> wire. The wire is little-endian; `np.dtype(...).newbyteorder("<")` is what travels.
_DTYPES = {
    np.dtype("int32"): pb.DTYPE_INT32,
    np.dtype("int64"): pb.DTYPE_INT64,
    np.dtype("uint32"): pb.DTYPE_UINT32,
    np.dtype("uint64"): pb.DTYPE_UINT64,
    np.dtype("float32"): pb.DTYPE_FLOAT32,
    np.dtype("float64"): pb.DTYPE_FLOAT64,
}
_NP_OF_WIRE = {v: k.newbyteorder("<") for k, v in _DTYPES.items()}
DTYPE_NAMES = tuple(str(d) for d in _DTYPES)

OPERATORS = {
    "sum": pb.OPERATOR_SUM, "product": pb.OPERATOR_PRODUCT, "min": pb.OPERATOR_MIN,
    "max": pb.OPERATOR_MAX, "bit_and": pb.OPERATOR_BIT_AND, "bit_or": pb.OPERATOR_BIT_OR,
    "bit_xor": pb.OPERATOR_BIT_XOR,
}
_OP_ALIASES = {"add": "sum", "+": "sum", "prod": "product", "mul": "product", "*": "product",
               "and": "bit_and", "&": "bit_and", "or": "bit_or", "|": "bit_or",
               "xor": "bit_xor", "^": "bit_xor"}

PREDICATES = {
    "nonzero": pb.PREDICATE_OP_NONZERO, "eq": pb.PREDICATE_OP_EQ, "ne": pb.PREDICATE_OP_NE,
    "lt": pb.PREDICATE_OP_LT, "le": pb.PREDICATE_OP_LE, "gt": pb.PREDICATE_OP_GT,
    "ge": pb.PREDICATE_OP_GE, "in_range": pb.PREDICATE_OP_IN_RANGE, "not_nan": pb.PREDICATE_OP_NOT_NAN,
}
_PRED_ALIASES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "range": "in_range"}
_PRED_ARITY = {"nonzero": 0, "not_nan": 0, "in_range": 2}


def wire_dtype(dtype, narrow: bool = False) -> int:
    """The wire DType of a numpy dtype (native or little-endian); ValueError for any other.
    narrow=True (Compact, Sort, Histogram: taken as they are) also takes int8, uint8, int16,
    uint16, float16 and bool (as UINT8)."""
    d = np.dtype(dtype)
    if d.byteorder == ">" or (d.byteorder == "=" and sys.byteorder == "big"):
        raise ValueError(f"gpuscan: big-endian dtype {d.str}: the wire is little-endian; pass copy=True "
                         f"or convert first, e.g. x.astype('{d.newbyteorder('<').str}')")
    d = d.newbyteorder("=") if d.byteorder == "<" else d
    wire = _DTYPES.get(d)
    if wire is None and narrow:
        wire = _NARROW.get(d)
    if wire is None:
        names = DTYPE_NAMES + (NARROW_NAMES if narrow else ())
        raise ValueError(f"gpuscan: dtype {d} is not served (supported: {', '.join(names)})")
    return wire


# Narrow inputs (issue 47): Scan and Reduce accumulate them in a wider output dtype (numpy's
# dtype=). bool travels as uint8; numpy's defaults: int64 for signed and bool, uint64 for unsigned,
# float16 for float16 (accumulated in float32 by the server, each result rounded once).
_NARROW = {
    np.dtype("int8"): pb.DTYPE_INT8, np.dtype("uint8"): pb.DTYPE_UINT8, np.dtype("bool"): pb.DTYPE_UINT8,
    np.dtype("int16"): pb.DTYPE_INT16, np.dtype("uint16"): pb.DTYPE_UINT16, np.dtype("float16"): pb.DTYPE_FLOAT16,
}
_WIRE_OF_OUTPUT = {**_DTYPES, np.dtype("float16"): pb.DTYPE_FLOAT16}
NARROW_NAMES = ("int8", "uint8", "int16", "uint16", "float16", "bool")


def accumulation(x: np.ndarray, dtype, what: str = "x") -> Tuple[np.ndarray, Optional[int], np.dtype]:
    """dtype= of scan, reduce, segmented_scan and reduce_by_key: (x to send, the header's
    output_dtype or None, the result's numpy dtype). A narrow x (int8, uint8, int16, uint16, bool,
    float16) travels as it is, with output_dtype dtype (None: numpy's default); a 4- or 8-byte x
    with another dtype= is converted here first (what np.cumsum(x, dtype=) computes), as numpy
    casts it. A dtype that is not served as an output (a narrow one, except float16 for float16):
    ValueError."""
    if dtype is not None:
        dtype = np.dtype(dtype).newbyteorder("=")
    src = x.dtype.newbyteorder("=")
    if src in _NARROW:
        if dtype is None:
            dtype = np.dtype("float16") if src.kind == "f" else np.dtype("uint64" if src.kind == "u" else "int64")
        if dtype not in _WIRE_OF_OUTPUT or (dtype == np.dtype("float16") and src.kind != "f"):
            raise ValueError(f"gpuscan: dtype={dtype} for {what} of dtype {src}: outputs are "
                             f"{', '.join(DTYPE_NAMES)} (float16 too for float16)")
        if dtype.kind in "iu" and src.kind == "f":
            raise ValueError(f"gpuscan: dtype={dtype} for {what} of dtype float16: a float16 input accumulates "
                             "in float16, float32 or float64")
        return (x.view(np.uint8) if src.kind == "b" else x), _WIRE_OF_OUTPUT[dtype], dtype
    if dtype is None or dtype == src:
        return x, None, src
    if dtype not in _DTYPES:
        raise ValueError(f"gpuscan: dtype={dtype} is not served as an output (supported: {', '.join(DTYPE_NAMES)})")
    return x.astype(dtype, order="C"), None, dtype  # C order: a matrix's copy streams as it is


def narrow_wire(x: np.ndarray) -> Optional[int]:
    """The wire DType of a narrow x (after accumulation), or None."""
    return _NARROW.get(x.dtype.newbyteorder("="))


def numpy_dtype(wire: int) -> np.dtype:
    return _NP_OF_WIRE[wire]


def any_dtype(wire: int) -> np.dtype:
    """The numpy dtype of any wire DType, narrow ones too (UINT8: uint8, whether it was put as bool
    or not); ValueError for one this package does not know (a newer server's)."""
    d = _NP_OF_WIRE.get(wire) or {v: k for k, v in _NARROW.items() if k.kind != "b"}.get(wire)
    if d is None:
        raise ValueError(f"gpuscan: the server named dtype {wire}, which this client does not know")
    return d.newbyteorder("=")


def check_array(x, what: str = "x", copy: bool = False, narrow: bool = False) -> Tuple[np.ndarray, int]:
    """x as a 1-D C-contiguous little-endian array of a served dtype, and its wire dtype.

    numpy arrays pass without a copy or fail with ValueError (non-contiguous, big-endian, an
    unserved dtype, more than one dimension); with copy=True a non-contiguous or big-endian 1-D
    array is copied into a contiguous native one instead. Anything else (a list, a memoryview)
    is converted with np.asarray, which is the copy the caller asked for by passing it.
    narrow=True (calls that take narrow dtypes as they are: compact, sort, histogram) also takes
    int8, uint8, int16, uint16, float16 and bool arrays (bool stays bool here; it travels as
    UINT8)."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
        if not narrow and (x.dtype == np.dtype("float16") or x.dtype.kind == "b"):
            raise ValueError(f"gpuscan: {what} has dtype {x.dtype}, which is not served")
    if x.ndim != 1:
        if x.ndim == 0:
            raise ValueError(f"gpuscan: {what} must be a 1-D array, got a scalar")
        if not x.flags.c_contiguous:
            raise ValueError(f"gpuscan: {what} is not contiguous; pass np.ascontiguousarray({what}).ravel()")
        raise ValueError(f"gpuscan: {what} must be 1-D, got shape {x.shape}; pass {what}.ravel()")
    if copy and x.dtype.kind in ("biuf" if narrow else "iuf") and (not x.flags.c_contiguous or
                                                                   x.dtype.byteorder == ">"):
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
    if not x.flags.c_contiguous:
        raise ValueError(f"gpuscan: {what} is not contiguous (strides {x.strides}); "
                         f"pass copy=True or np.ascontiguousarray({what}) to send a copy")
    return x, wire_dtype(x.dtype, narrow)


KEY_DTYPE_NAMES = ("int32", "int64", "uint32", "uint64")


def segment_keys(keys, copy: bool = False) -> Tuple[np.ndarray, int]:
    """A segmented scan's keys as a 1-D C-contiguous little-endian int32/int64/uint32/uint64
    array, and its wire dtype. Narrower integers are widened (a copy): int8/int16 to int32,
    uint8/uint16 to uint32 (equal neighbours stay equal, unequal stay unequal). Floats, bools and
    anything else: ValueError. Contiguity and byte order as check_array (copy=True copies)."""
    k = keys if isinstance(keys, np.ndarray) else np.asarray(keys)
    if k.dtype.kind not in "iu":
        raise ValueError(f"gpuscan: keys must be an integer array ({', '.join(KEY_DTYPE_NAMES)}; narrower "
                         f"integers are widened), got dtype {k.dtype}")
    if k.dtype.itemsize < 4:
        k = k.astype(np.int32 if k.dtype.kind == "i" else np.uint32)
    return check_array(k, "keys", copy)


def segment_heads(heads, copy: bool = False) -> np.ndarray:
    """A segmented scan's head flags as a 1-D C-contiguous uint8 view (no copy for a contiguous
    bool, int8 or uint8 array; nonzero begins a segment); a list (or other non-array) of bools
    or integers is converted (heads != 0). Arrays of other dtypes: ValueError."""
    if isinstance(heads, np.ndarray):
        h = heads
    else:
        h = np.asarray(heads)
        if h.dtype.kind in "iu" and h.dtype.itemsize != 1:
            h = h != 0
    if h.dtype.kind not in "biu" or h.dtype.itemsize != 1:
        raise ValueError(f"gpuscan: heads must be a bool, int8 or uint8 array (nonzero begins a segment), "
                         f"got dtype {h.dtype}; pass heads != 0")
    if h.ndim != 1:
        raise ValueError(f"gpuscan: heads must be 1-D, got shape {h.shape}")
    if not h.flags.c_contiguous:
        if not copy:
            raise ValueError(f"gpuscan: heads is not contiguous (strides {h.strides}); "
                             "pass copy=True or np.ascontiguousarray(heads) to send a copy")
        h = np.ascontiguousarray(h)
    return h.view(np.uint8)


def sort_order(keys: np.ndarray) -> np.ndarray:
    """Keys as unsigned integers of their width whose unsigned order is Sort's order (see
    SortHeader): unsigned keys as they are; signed keys with the sign bit flipped; floats in IEEE
    754 total order (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN): negative ones (sign bit set)
    with every bit flipped, the others with the sign bit flipped. Equal keys stay equal. keys:
    a native-order integer, float or bool array (unsigned keys come back as they are, not copied;
    bool ones as a uint8 view)."""
    k = np.asarray(keys)
    if k.dtype.kind == "b":
        return k.view(np.uint8)
    if k.dtype.kind == "u":
        return k
    u = k.view(np.dtype(f"u{k.dtype.itemsize}"))
    bits = 8 * k.dtype.itemsize
    sign = u.dtype.type(1 << (bits - 1))
    if k.dtype.kind == "i":
        return u ^ sign
    ones = u.dtype.type((1 << bits) - 1)
    return u ^ ((u >> u.dtype.type(bits - 1)) * ones | sign)


def operator(op: str, wire: Optional[int] = None) -> int:
    """The wire operator for `op`; with the wire dtype, a bitwise operator on floats is refused
    here, as the server would refuse it: grpc.aio (#36066) can report a server that ends a
    stream while the client still writes as INTERNAL instead of the server's status."""
    name = _OP_ALIASES.get(op, op) if isinstance(op, str) else None
    if name not in OPERATORS:
        raise ValueError(f"gpuscan: unknown operator {op!r} (one of {', '.join(OPERATORS)})")
    if wire in (pb.DTYPE_FLOAT16, pb.DTYPE_FLOAT32, pb.DTYPE_FLOAT64) and name.startswith("bit_"):
        from .errors import InvalidArgument
        dtype = pb.DType.Name(wire).replace("DTYPE_", "").lower()
        raise InvalidArgument(f"header.op={pb.Operator.Name(OPERATORS[name])} is not defined for dtype {dtype} "
                              "(bitwise operators take integer dtypes only)")
    return OPERATORS[name]


def scan_algorithm(algorithm: Optional[Union[str, int]]) -> int:
    if algorithm is None:
        return pb.SCAN_ALGORITHM_DEFAULT
    if isinstance(algorithm, int):
        return algorithm
    try:
        return pb.ScanAlgorithm.Value("SCAN_ALGORITHM_" + algorithm.upper())
    except ValueError:
        names = [n[len("SCAN_ALGORITHM_"):].lower() for n in pb.ScanAlgorithm.keys()]
        raise ValueError(f"gpuscan: unknown scan algorithm {algorithm!r} (one of {', '.join(names)})") from None


def scan_algorithm_name(value: int) -> str:
    return pb.ScanAlgorithm.Name(value)[len("SCAN_ALGORITHM_"):].lower()


def scalar(value, dtype: np.dtype) -> "pb.Scalar":
    """A threshold as the Scalar kind the dtype wants (ValueError when it does not fit). A float16
    array's threshold is rounded to float16 where it fits (numpy compares a float16 array with a
    Python float in float16; the server compares in float32); a bool array's is a uint8's."""
    s = pb.Scalar()
    if dtype.kind == "f":
        v = float(value)
        if dtype.itemsize == 2:
            with np.errstate(over="ignore"):
                h = float(np.float16(v))
            if not (math.isinf(h) and math.isfinite(v)):  # beyond float16: numpy compares wider
                v = h
        s.float_value = v
        return s
    if dtype.kind == "b":
        dtype = np.dtype(np.uint8)
    if isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise ValueError(f"gpuscan: threshold {value!r} is not an integer; the array is {dtype}")
        value = int(value)
    v = int(value)
    info = np.iinfo(dtype)
    if not info.min <= v <= info.max:
        raise ValueError(f"gpuscan: threshold {v} does not fit {dtype}")
    if dtype.kind == "u":
        s.uint_value = v
    else:
        s.int_value = v
    return s


def predicate(spec, dtype: np.dtype) -> "pb.Predicate":
    """("gt", 0), ("in_range", lo, hi), "nonzero", ("not_nan",) -> Predicate."""
    if isinstance(spec, str):
        spec = (spec,)
    if not isinstance(spec, (tuple, list)) or not spec or not isinstance(spec[0], str):
        raise ValueError(f"gpuscan: predicate must be a tuple like ('gt', 0), got {spec!r}")
    name = _PRED_ALIASES.get(spec[0], spec[0])
    if name not in PREDICATES:
        raise ValueError(f"gpuscan: unknown predicate {spec[0]!r} (one of {', '.join(PREDICATES)})")
    arity = _PRED_ARITY.get(name, 1)
    if len(spec) - 1 != arity:
        raise ValueError(f"gpuscan: predicate {name!r} takes {arity} value(s), got {len(spec) - 1}")
    p = pb.Predicate(op=PREDICATES[name])
    if arity >= 1:
        p.threshold.CopyFrom(scalar(spec[1], dtype))
    if arity == 2:
        p.upper.CopyFrom(scalar(spec[2], dtype))
    return p


@dataclasses.dataclass(frozen=True)
class DataPath:
    """The path a client's scan, reduce and compact of plain arrays in memory take (Client.data_path,
    info()["data_path"]): "native" (the C++ client's C API, loaded from `library`) or "grpcio"
    (grpcio in Python; `reason` says why not native). Single calls may still take grpcio on a
    native client: shared memory, in-place scans, scan_iter, a call's own retries= or timeout=."""
    name: str                       # "native" or "grpcio"
    library: Optional[str] = None   # native: the libgpuscan_capi.so in use
    reason: str = ""                # grpcio: why not native

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Timing:
    """The server's measurements of one call (microseconds and bytes; see proto Timing)."""
    receive_us: int = 0
    queue_us: int = 0
    h2d_us: int = 0
    kernel_us: int = 0
    d2h_us: int = 0
    send_us: int = 0
    total_us: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    engine: str = ""
    device: str = ""
    algorithm: str = ""
    chunks: int = 0

    @classmethod
    def from_proto(cls, t: "pb.Timing") -> "Timing":
        return cls(**{f.name: getattr(t, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def from_bytes(cls, raw) -> "Timing":
        return cls.from_proto(pb.Timing.FromString(bytes(raw)))


@dataclasses.dataclass(frozen=True)
class TransportResult:
    """What transport() measured: the gRPC path's ceiling for one call of this size."""
    bytes_in: int          # payload bytes the server received (its count)
    bytes_out: int         # payload bytes the server sent back (0 without echo)
    bytes_received: int    # payload bytes this client received
    requests: int          # request messages the server received
    wall_s: float          # the call as this client saw it
    server_total_us: int   # the server's total_us

    @property
    def gbps(self) -> float:
        """Payload bytes sent by the client per second of wall time (10^9 B/s)."""
        return self.bytes_in / self.wall_s / 1e9 if self.wall_s > 0 else 0.0


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: == on arrays has no single truth value
class HistogramResult:
    """What histogram() returns; `counts, edges = result` unpacks like numpy.histogram's pair."""
    counts: np.ndarray   # uint64, one per bin
    edges: np.ndarray    # float64, bins + 1: the server's (a float32/float16 array's even edges: float32 values)
    below: int           # non-NaN elements below edges[0]
    above: int           # non-NaN elements above edges[-1]
    nan_count: int       # NaN elements (floats only)
    element_count: int   # elements the server received

    def __iter__(self):
        yield self.counts
        yield self.edges


def histogram_header(x: np.ndarray, wire: int, bins, range_) -> "pb.HistogramHeader":
    """numpy.histogram's bins/range as a HistogramHeader: an int is even bins over range_ (None:
    x.min()..x.max(), found here as numpy does; lo == hi widens to lo - 0.5..hi + 0.5), a 1-D
    sequence is explicit edges (float64; range_ ignored). What the client cannot judge better than
    the proto says (lo > hi, too many bins, NaN or decreasing edges) is left to the server."""
    h = pb.HistogramHeader(dtype=wire, element_count=len(x))
    if np.ndim(bins) != 0:
        try:
            edges = np.asarray(bins, dtype=np.float64)
        except (TypeError, ValueError):
            edges = None
        if edges is None or edges.ndim != 1:
            raise ValueError(f"gpuscan: bins must be an integer or a 1-D sequence of edges, got {bins!r}")
        h.edges.extend(edges.tolist())
        return h
    k = check_int(bins, "bins", 1)
    if k > 0xFFFFFFFF:  # a uint32 on the wire; the server's own cap (max_histogram_bins) is far lower
        raise ValueError(f"gpuscan: bins must be below 2**32, got {k}")
    edges = _numpy_edges(x, k, range_)  # numpy's own range (one pass over x when autodetected)
    if edges is None:  # numpy cannot say: the range as given or found, judged here or by the server
        lo, hi = _histogram_range(x, range_)
    else:
        lo, hi = float(edges[0]), float(edges[-1])
        if not np.array_equal(edges, _even_edges(lo, hi, k, x.dtype)):
            h.edges.extend(edges.tolist())  # numpy's edges are not the proto's even ones: send them
            return h
    h.bins, h.lo, h.hi = k, lo, hi
    return h


def _histogram_range(x: np.ndarray, range_) -> Tuple[float, float]:
    """range_ checked, or x's min and max (numpy's default; (0, 1) when x is empty), widened by 0.5
    each side when they are equal, as numpy does."""
    if range_ is not None:
        try:
            lo, hi = (float(v) for v in range_)
        except (TypeError, ValueError):
            raise ValueError(f"gpuscan: range must be a pair (lo, hi) of numbers, got {range_!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"gpuscan: range ({lo}, {hi}) is not finite")
    elif len(x) == 0:
        lo, hi = 0.0, 1.0  # numpy's range for an empty array
    else:
        lo, hi = float(x.min()), float(x.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"gpuscan: autodetected range of [{lo}, {hi}] is not finite; pass range=(lo, hi)")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _numpy_edges(x: np.ndarray, bins: int, range_) -> Optional[np.ndarray]:
    """numpy.histogram_bin_edges of this numpy (float64), or None where numpy cannot say (it
    raises; the server then judges the request as sent). numpy 2 computes the even edges of a
    float32 array's autodetected range in float32 arithmetic (its min and max are float32 scalars),
    numpy 1 and Python-float ranges in float64: asking numpy keeps the counts numpy's either way."""
    if bins > 1 << 20:  # beyond any server's max_histogram_bins: let the server refuse it
        return None
    try:
        with np.errstate(all="ignore"):
            e = np.histogram_bin_edges(x, bins, range_).astype(np.float64)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return e if np.all(np.isfinite(e)) else None  # an overflowing range: the server names lo/hi


def _even_edges(lo: float, hi: float, bins: int, dtype: np.dtype) -> np.ndarray:
    """The even edges the server computes (HistogramHeader): float64 linspace, rounded to float32
    for a float32 or float16 array (float16 is binned as its float32 values)."""
    e = np.linspace(lo, hi, bins + 1)
    return e.astype(np.float32).astype(np.float64) if dtype in (np.float32, np.float16) else e


def server_info(info: "pb.ServerInfo") -> Dict[str, Any]:
    """ServerInfo as plain Python (enums by name, lower case)."""
    def low(name, prefix):
        return name[len(prefix):].lower()
    return {
        "version": info.version,
        "engine": info.engine,
        "devices": [{"ordinal": d.ordinal, "name": d.name, "compute_capability": (d.compute_capability_major, d.compute_capability_minor),
                     "memory_bytes": d.memory_bytes, "multiprocessors": d.multiprocessors,
                     "uuid": d.uuid.hex()} for d in info.devices],
        "scan_algorithms": [low(pb.ScanAlgorithm.Name(a), "SCAN_ALGORITHM_") for a in info.scan_algorithms],
        "reduce_algorithms": list(info.reduce_algorithms),
        "compact_algorithms": list(info.compact_algorithms),
        "dtypes": [str(numpy_dtype(d).newbyteorder("=")) for d in info.dtypes if d in _NP_OF_WIRE],
        "operators": [low(pb.Operator.Name(o), "OPERATOR_") for o in info.operators],
        "limits": {f.name: getattr(info.limits, f.name) for f in info.limits.DESCRIPTOR.fields},
        "cpu_threads": info.cpu_threads,
        "operations": list(info.operations),  # empty from a server older than the field
        "narrow_dtypes": [low(pb.DType.Name(d), "DTYPE_") for d in info.narrow_dtypes],
        # the operations that take them (empty from an older server: scan and reduce only)
        "narrow_operations": list(getattr(info, "narrow_operations", ())),
    }


BENCH_COLUMNS = ("operation", "algorithm", "dtype", "elements", "median_us", "min_us", "max_us",
                 "bytes_moved", "gbps", "pct_of_copy", "ratio_to_cub", "verified", "device")


def bench_row(row: "pb.BenchmarkRow") -> Dict[str, Any]:
    d = {c: getattr(row, c) for c in BENCH_COLUMNS}
    d["dtype"] = str(numpy_dtype(row.dtype).newbyteorder("=")) if row.dtype in _NP_OF_WIRE else "unspecified"
    return d


class Table(list):
    """Rows (dicts) with a plain-text rendering; no pandas needed (`pandas.DataFrame(table)` works)."""

    columns: Sequence[str] = BENCH_COLUMNS

    def __str__(self) -> str:
        def fmt(v):
            return f"{v:.3f}" if isinstance(v, float) else str(v)
        cells = [[fmt(r.get(c, "")) for c in self.columns] for r in self]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
        return "\n".join(lines)


def bench_request(operations=None, algorithms=None, dtypes=None, sizes=None, repetitions=0, warmup=0,
                  devices=None):
    """devices: ordinals (info()["devices"][i]["ordinal"]) measured one after the other; None: the
    server's first device."""
    return pb.BenchmarkRequest(
        operations=list(operations or []), algorithms=list(algorithms or []),
        dtypes=[wire_dtype(d) for d in (dtypes or [])], sizes=[int(s) for s in (sizes or [])],
        repetitions=repetitions, warmup=warmup, devices=[int(d) for d in (devices or [])])
