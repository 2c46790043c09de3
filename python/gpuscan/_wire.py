"""Protobuf wire format for the data path only: a chunk's `bytes` field is framed and parsed here
without building a message object, so a chunk's bytes are copied once on the way out (into the
request) and once on the way in (into the caller's array). Headers, Timing and every other
message go through the generated classes; tests/test_wire.py checks this framing against them.
"""
from __future__ import annotations

from typing import Dict, Tuple, Union

# Field numbers of the data fields (proto/gpuscan/v1/gpuscan.proto).
SCAN_DATA = 2          # ScanRequest.data
REDUCE_DATA = 2        # ReduceRequest.data
COMPACT_VALUES = 2     # CompactRequest.values
COMPACT_FLAGS = 3      # CompactRequest.flags
HISTOGRAM_DATA = 2     # HistogramRequest.data
SEGMENTED_DATA = 2     # SegmentedScanRequest.data
SEGMENTED_KEYS = 3     # SegmentedScanRequest.keys (keys or one head byte per element)
REDUCE_BY_KEY_DATA = 2  # ReduceByKeyRequest.data
REDUCE_BY_KEY_KEYS = 3  # ReduceByKeyRequest.keys
SORT_KEYS = 2          # SortRequest.keys
SORT_VALUES = 3        # SortRequest.values (the values of the same elements)
SCAN2D_DATA = 2        # Scan2DRequest.data (a chunk may end mid-row)
TRANSPORT_DATA = 1     # TransportRequest.data
TRANSPORT_ECHO = 2     # TransportRequest.echo
PUT_DATA = 2           # PutArrayRequest.data
GET_DATA = 1           # GetArrayResponse.data
GET_OFFSET = 2         # GetArrayResponse.offset (elements, in the whole array)
GET_INFO = 3           # GetArrayResponse.info (first response only)
SCAN_RESULT = 1        # ScanResponse.data
SCAN_TIMING = 3        # ScanResponse.timing
SCAN_ARRAY = 5         # ScanResponse.array (the final response of a kept scan)
PIPELINE_DATA = 2      # PipelineRequest.data (the streamed input's chunks)
PIPELINE_STAGE = 1     # PipelineResponse.stage
PIPELINE_TIMING = 7    # PipelineResponse.timing (the last response: the whole pipeline's)
# PipelineResponse.result: the field of each stage operation's own response
PIPELINE_RESULT = {"scan": 2, "segmented_scan": 2, "reduce": 3, "compact": 4, "histogram": 5, "sort": 6}


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_prefix(field: int, length: int) -> bytes:
    """Tag and length of a length-delimited field: what precedes its payload on the wire."""
    return varint((field << 3) | 2) + varint(length)


def varint_field(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def parse(raw: bytes) -> Dict[int, Union[int, Tuple[int, int]]]:
    """Top-level fields of one message: varints as ints, length-delimited fields as (start, end)
    offsets into raw (no copy). A repeated field keeps its last occurrence (these responses have
    none)."""
    fields: Dict[int, Union[int, Tuple[int, int]]] = {}
    i, n = 0, len(raw)
    while i < n:
        key, i = _read_varint(raw, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            fields[field], i = _read_varint(raw, i)
        elif wt == 2:
            length, i = _read_varint(raw, i)
            if i + length > n:
                raise ValueError("gpuscan: truncated message from the server")
            fields[field] = (i, i + length)
            i += length
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"gpuscan: unexpected wire type {wt} from the server")
    return fields


def _read_varint(raw: bytes, i: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = raw[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
