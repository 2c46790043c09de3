from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

COMPACT_OUTPUT_INDICES: CompactOutput
COMPACT_OUTPUT_VALUES: CompactOutput
COMPACT_OUTPUT_VALUES_AND_INDICES: CompactOutput
DESCRIPTOR: _descriptor.FileDescriptor
DTYPE_FLOAT32: DType
DTYPE_FLOAT64: DType
DTYPE_INT32: DType
DTYPE_INT64: DType
DTYPE_UINT32: DType
DTYPE_UINT64: DType
DTYPE_UNSPECIFIED: DType
OPERATOR_BIT_AND: Operator
OPERATOR_BIT_OR: Operator
OPERATOR_BIT_XOR: Operator
OPERATOR_MAX: Operator
OPERATOR_MIN: Operator
OPERATOR_PRODUCT: Operator
OPERATOR_SUM: Operator
OPERATOR_UNSPECIFIED: Operator
PREDICATE_OP_EQ: PredicateOp
PREDICATE_OP_GE: PredicateOp
PREDICATE_OP_GT: PredicateOp
PREDICATE_OP_IN_RANGE: PredicateOp
PREDICATE_OP_LE: PredicateOp
PREDICATE_OP_LT: PredicateOp
PREDICATE_OP_NE: PredicateOp
PREDICATE_OP_NONZERO: PredicateOp
PREDICATE_OP_NOT_NAN: PredicateOp
PREDICATE_OP_UNSPECIFIED: PredicateOp
SCAN_ALGORITHM_BLELLOCH: ScanAlgorithm
SCAN_ALGORITHM_BRENT_KUNG: ScanAlgorithm
SCAN_ALGORITHM_CHAINED: ScanAlgorithm
SCAN_ALGORITHM_CPU_BLOCKED: ScanAlgorithm
SCAN_ALGORITHM_CUB: ScanAlgorithm
SCAN_ALGORITHM_DECOUPLED_LOOKBACK: ScanAlgorithm
SCAN_ALGORITHM_DEFAULT: ScanAlgorithm
SCAN_ALGORITHM_DETERMINISTIC: ScanAlgorithm
SCAN_ALGORITHM_HILLIS_STEELE: ScanAlgorithm
SCAN_ALGORITHM_KOGGE_STONE: ScanAlgorithm
SCAN_ALGORITHM_REDUCE_THEN_SCAN: ScanAlgorithm
SCAN_KIND_EXCLUSIVE: ScanKind
SCAN_KIND_INCLUSIVE: ScanKind

class BenchmarkRequest(_message.Message):
    __slots__ = ["algorithms", "devices", "dtypes", "operations", "repetitions", "sizes", "warmup"]
    ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    DTYPES_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    REPETITIONS_FIELD_NUMBER: _ClassVar[int]
    SIZES_FIELD_NUMBER: _ClassVar[int]
    WARMUP_FIELD_NUMBER: _ClassVar[int]
    algorithms: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[int]
    dtypes: _containers.RepeatedScalarFieldContainer[DType]
    operations: _containers.RepeatedScalarFieldContainer[str]
    repetitions: int
    sizes: _containers.RepeatedScalarFieldContainer[int]
    warmup: int
    def __init__(self, operations: _Optional[_Iterable[str]] = ..., algorithms: _Optional[_Iterable[str]] = ..., dtypes: _Optional[_Iterable[_Union[DType, str]]] = ..., sizes: _Optional[_Iterable[int]] = ..., repetitions: _Optional[int] = ..., warmup: _Optional[int] = ..., devices: _Optional[_Iterable[int]] = ...) -> None: ...

class BenchmarkRow(_message.Message):
    __slots__ = ["algorithm", "bytes_moved", "device", "dtype", "elements", "gbps", "max_us", "median_us", "min_us", "operation", "pct_of_copy", "ratio_to_cub", "verified"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    BYTES_MOVED_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    GBPS_FIELD_NUMBER: _ClassVar[int]
    MAX_US_FIELD_NUMBER: _ClassVar[int]
    MEDIAN_US_FIELD_NUMBER: _ClassVar[int]
    MIN_US_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PCT_OF_COPY_FIELD_NUMBER: _ClassVar[int]
    RATIO_TO_CUB_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    algorithm: str
    bytes_moved: int
    device: str
    dtype: DType
    elements: int
    gbps: float
    max_us: float
    median_us: float
    min_us: float
    operation: str
    pct_of_copy: float
    ratio_to_cub: float
    verified: bool
    def __init__(self, operation: _Optional[str] = ..., algorithm: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., elements: _Optional[int] = ..., median_us: _Optional[float] = ..., min_us: _Optional[float] = ..., max_us: _Optional[float] = ..., bytes_moved: _Optional[int] = ..., gbps: _Optional[float] = ..., pct_of_copy: _Optional[float] = ..., ratio_to_cub: _Optional[float] = ..., verified: bool = ..., device: _Optional[str] = ...) -> None: ...

class CompactHeader(_message.Message):
    __slots__ = ["dtype", "element_count", "lanes", "output", "predicate", "shared_memory", "use_flags"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    USE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    element_count: int
    lanes: Lanes
    output: CompactOutput
    predicate: Predicate
    shared_memory: SharedMemory
    use_flags: bool
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., use_flags: bool = ..., predicate: _Optional[_Union[Predicate, _Mapping]] = ..., output: _Optional[_Union[CompactOutput, str]] = ..., element_count: _Optional[int] = ..., shared_memory: _Optional[_Union[SharedMemory, _Mapping]] = ..., lanes: _Optional[_Union[Lanes, _Mapping]] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ["flags", "header", "values"]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    flags: bytes
    header: CompactHeader
    values: bytes
    def __init__(self, header: _Optional[_Union[CompactHeader, _Mapping]] = ..., values: _Optional[bytes] = ..., flags: _Optional[bytes] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ["element_count", "indices", "kept_count", "kept_offset", "timing", "values"]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    KEPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    KEPT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    element_count: int
    indices: bytes
    kept_count: int
    kept_offset: int
    timing: Timing
    values: bytes
    def __init__(self, values: _Optional[bytes] = ..., indices: _Optional[bytes] = ..., kept_offset: _Optional[int] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ..., kept_count: _Optional[int] = ..., element_count: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ["compute_capability_major", "compute_capability_minor", "memory_bytes", "multiprocessors", "name", "ordinal"]
    COMPUTE_CAPABILITY_MAJOR_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CAPABILITY_MINOR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MULTIPROCESSORS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    compute_capability_major: int
    compute_capability_minor: int
    memory_bytes: int
    multiprocessors: int
    name: str
    ordinal: int
    def __init__(self, name: _Optional[str] = ..., compute_capability_major: _Optional[int] = ..., compute_capability_minor: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., multiprocessors: _Optional[int] = ..., ordinal: _Optional[int] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Lanes(_message.Message):
    __slots__ = ["array_id", "chunk_elements", "lane", "lane_count"]
    ARRAY_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    LANE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    array_id: bytes
    chunk_elements: int
    lane: int
    lane_count: int
    def __init__(self, array_id: _Optional[bytes] = ..., lane: _Optional[int] = ..., lane_count: _Optional[int] = ..., chunk_elements: _Optional[int] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["lane_wait_ms", "max_chunk_bytes", "max_concurrent_requests", "max_lanes", "max_queued_requests", "max_receive_message_bytes", "max_request_bytes", "shared_memory", "shm_dir"]
    LANE_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MAX_LANES_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MAX_RECEIVE_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    SHM_DIR_FIELD_NUMBER: _ClassVar[int]
    lane_wait_ms: int
    max_chunk_bytes: int
    max_concurrent_requests: int
    max_lanes: int
    max_queued_requests: int
    max_receive_message_bytes: int
    max_request_bytes: int
    shared_memory: bool
    shm_dir: str
    def __init__(self, max_chunk_bytes: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., max_concurrent_requests: _Optional[int] = ..., max_queued_requests: _Optional[int] = ..., max_receive_message_bytes: _Optional[int] = ..., max_lanes: _Optional[int] = ..., lane_wait_ms: _Optional[int] = ..., shared_memory: bool = ..., shm_dir: _Optional[str] = ...) -> None: ...

class Predicate(_message.Message):
    __slots__ = ["op", "threshold", "upper"]
    OP_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    op: PredicateOp
    threshold: Scalar
    upper: Scalar
    def __init__(self, op: _Optional[_Union[PredicateOp, str]] = ..., threshold: _Optional[_Union[Scalar, _Mapping]] = ..., upper: _Optional[_Union[Scalar, _Mapping]] = ...) -> None: ...

class ReduceHeader(_message.Message):
    __slots__ = ["dtype", "element_count", "lanes", "op", "shared_memory"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    element_count: int
    lanes: Lanes
    op: Operator
    shared_memory: SharedMemory
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., op: _Optional[_Union[Operator, str]] = ..., element_count: _Optional[int] = ..., shared_memory: _Optional[_Union[SharedMemory, _Mapping]] = ..., lanes: _Optional[_Union[Lanes, _Mapping]] = ...) -> None: ...

class ReduceRequest(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: ReduceHeader
    def __init__(self, header: _Optional[_Union[ReduceHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ReduceResponse(_message.Message):
    __slots__ = ["element_count", "raw_value", "timing", "value"]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    RAW_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    element_count: int
    raw_value: bytes
    timing: Timing
    value: Scalar
    def __init__(self, value: _Optional[_Union[Scalar, _Mapping]] = ..., raw_value: _Optional[bytes] = ..., element_count: _Optional[int] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...

class Scalar(_message.Message):
    __slots__ = ["float_value", "int_value", "uint_value"]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT_VALUE_FIELD_NUMBER: _ClassVar[int]
    float_value: float
    int_value: int
    uint_value: int
    def __init__(self, int_value: _Optional[int] = ..., uint_value: _Optional[int] = ..., float_value: _Optional[float] = ...) -> None: ...

class ScanHeader(_message.Message):
    __slots__ = ["algorithm", "dtype", "element_count", "kind", "lanes", "op", "shared_memory"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    algorithm: ScanAlgorithm
    dtype: DType
    element_count: int
    kind: ScanKind
    lanes: Lanes
    op: Operator
    shared_memory: SharedMemory
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., op: _Optional[_Union[Operator, str]] = ..., kind: _Optional[_Union[ScanKind, str]] = ..., algorithm: _Optional[_Union[ScanAlgorithm, str]] = ..., element_count: _Optional[int] = ..., shared_memory: _Optional[_Union[SharedMemory, _Mapping]] = ..., lanes: _Optional[_Union[Lanes, _Mapping]] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: ScanHeader
    def __init__(self, header: _Optional[_Union[ScanHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ["data", "element_count", "offset", "timing"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    element_count: int
    offset: int
    timing: Timing
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ..., element_count: _Optional[int] = ...) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ["compact_algorithms", "cpu_threads", "devices", "dtypes", "engine", "float_scan_default", "limits", "operators", "reduce_algorithms", "scan_algorithms", "version"]
    COMPACT_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    CPU_THREADS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    DTYPES_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_SCAN_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    REDUCE_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    SCAN_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    compact_algorithms: _containers.RepeatedScalarFieldContainer[str]
    cpu_threads: int
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    dtypes: _containers.RepeatedScalarFieldContainer[DType]
    engine: str
    float_scan_default: ScanAlgorithm
    limits: Limits
    operators: _containers.RepeatedScalarFieldContainer[Operator]
    reduce_algorithms: _containers.RepeatedScalarFieldContainer[str]
    scan_algorithms: _containers.RepeatedScalarFieldContainer[ScanAlgorithm]
    version: str
    def __init__(self, version: _Optional[str] = ..., engine: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., scan_algorithms: _Optional[_Iterable[_Union[ScanAlgorithm, str]]] = ..., reduce_algorithms: _Optional[_Iterable[str]] = ..., compact_algorithms: _Optional[_Iterable[str]] = ..., dtypes: _Optional[_Iterable[_Union[DType, str]]] = ..., operators: _Optional[_Iterable[_Union[Operator, str]]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., cpu_threads: _Optional[int] = ..., float_scan_default: _Optional[_Union[ScanAlgorithm, str]] = ...) -> None: ...

class SharedMemory(_message.Message):
    __slots__ = ["bytes", "flags_offset", "flags_region", "indices_offset", "indices_region", "offset", "output_offset", "output_region", "region"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FLAGS_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FLAGS_REGION_FIELD_NUMBER: _ClassVar[int]
    INDICES_OFFSET_FIELD_NUMBER: _ClassVar[int]
    INDICES_REGION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_REGION_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    flags_offset: int
    flags_region: str
    indices_offset: int
    indices_region: str
    offset: int
    output_offset: int
    output_region: str
    region: str
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ..., bytes: _Optional[int] = ..., output_region: _Optional[str] = ..., output_offset: _Optional[int] = ..., indices_region: _Optional[str] = ..., indices_offset: _Optional[int] = ..., flags_region: _Optional[str] = ..., flags_offset: _Optional[int] = ...) -> None: ...

class Timing(_message.Message):
    __slots__ = ["algorithm", "bytes_in", "bytes_out", "chunks", "d2h_us", "device", "engine", "h2d_us", "kernel_us", "queue_us", "receive_us", "send_us", "total_us"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    D2H_US_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    H2D_US_FIELD_NUMBER: _ClassVar[int]
    KERNEL_US_FIELD_NUMBER: _ClassVar[int]
    QUEUE_US_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_US_FIELD_NUMBER: _ClassVar[int]
    SEND_US_FIELD_NUMBER: _ClassVar[int]
    TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    algorithm: str
    bytes_in: int
    bytes_out: int
    chunks: int
    d2h_us: int
    device: str
    engine: str
    h2d_us: int
    kernel_us: int
    queue_us: int
    receive_us: int
    send_us: int
    total_us: int
    def __init__(self, receive_us: _Optional[int] = ..., queue_us: _Optional[int] = ..., h2d_us: _Optional[int] = ..., kernel_us: _Optional[int] = ..., d2h_us: _Optional[int] = ..., send_us: _Optional[int] = ..., total_us: _Optional[int] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., engine: _Optional[str] = ..., device: _Optional[str] = ..., algorithm: _Optional[str] = ..., chunks: _Optional[int] = ...) -> None: ...

class TransportRequest(_message.Message):
    __slots__ = ["data", "echo"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    echo: bool
    def __init__(self, data: _Optional[bytes] = ..., echo: bool = ...) -> None: ...

class TransportResponse(_message.Message):
    __slots__ = ["bytes_in", "bytes_out", "data", "final", "requests", "total_us"]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    bytes_in: int
    bytes_out: int
    data: bytes
    final: bool
    requests: int
    total_us: int
    def __init__(self, data: _Optional[bytes] = ..., bytes_in: _Optional[int] = ..., bytes_out: _Optional[int] = ..., total_us: _Optional[int] = ..., requests: _Optional[int] = ..., final: bool = ...) -> None: ...

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Operator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScanKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScanAlgorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PredicateOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CompactOutput(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
