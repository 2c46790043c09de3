// The bad-input matrix: the headers and streams of Histogram, SegmentedScan, ReduceByKey, Sort and
// Scan2D, and every place a narrow dtype is checked.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <limits>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {

void HistogramRows(std::vector<Row>& rows) {
  using H = std::vector<v1::HistogramRequest>;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  rows.push_back(MakeRow("NeitherBinsNorEdges", H{HistogramHead(v1::DTYPE_FLOAT32, 0)}, kInvalid,
                         {"neither bins nor edges"}));
  {
    H h{HistogramHead()};
    h[0].mutable_header()->add_edges(0.5);
    h[0].mutable_header()->add_edges(1.5);
    rows.push_back(MakeRow("BothBinsAndEdges", h, kInvalid, {"both bins=16 and 2 edges"}));
  }
  rows.push_back(MakeRow("BinsAboveLimit", H{HistogramHead(v1::DTYPE_INT32, 65537)}, kInvalid,
                         {"header.bins: 65537 bins", "limit of 65536", "max_histogram_bins"}));
  // More edges than max_histogram_bins + 1 are refused naming header.edges (histogram_header_test.cc);
  // here the header alone is beyond this server's receive limit, which gRPC enforces first.
  rows.push_back(MakeRow("EdgesAboveReceiveLimit", H{HistogramEdges(std::vector<double>(65538, 1.0))}, kExhausted,
                         {"Received message larger than max"}));
  rows.push_back(MakeRow("LoNaN", H{HistogramHead(v1::DTYPE_FLOAT64, 4, nan, 1)}, kInvalid, {"header.lo=nan", "not finite"}));
  rows.push_back(MakeRow("HiInfinite", H{HistogramHead(v1::DTYPE_FLOAT64, 4, 0, inf)}, kInvalid, {"header.hi=inf", "not finite"}));
  rows.push_back(MakeRow("LoNotBelowHi", H{HistogramHead(v1::DTYPE_INT64, 4, 3, 3)}, kInvalid,
                         {"header.lo=3 must be below header.hi=3"}));
  rows.push_back(MakeRow("LoAboveHi", H{HistogramHead(v1::DTYPE_UINT32, 4, 2.5, -1)}, kInvalid,
                         {"header.lo=2.5 must be below header.hi=-1"}));
  // 17 subnormal ulps over 33 bins: the rounded step makes the last edge fall below the one before.
  rows.push_back(MakeRow("RangeTooNarrowForBins", H{HistogramHead(v1::DTYPE_UINT32, 33, 0, 17 * 4.9406564584124654e-324)},
                         kInvalid, {"header.bins=33", "edges that decrease", "too narrow"}));
  rows.push_back(MakeRow("RangeOverflows", H{HistogramHead(v1::DTYPE_FLOAT64, 4, -1e308, 1e308)}, kInvalid,
                         {"header.hi - header.lo", "overflows float64"}));
  rows.push_back(MakeRow("OneEdge", H{HistogramEdges({1.0})}, kInvalid, {"header.edges has 1 edge"}));
  rows.push_back(MakeRow("NaNEdge", H{HistogramEdges({0, nan, 2})}, kInvalid, {"header.edges[1] is NaN"}));
  rows.push_back(MakeRow("DecreasingEdge", H{HistogramEdges({0, 2, 1.5, 3})}, kInvalid,
                         {"header.edges[2]=1.5 is below header.edges[1]=2"}));
  rows.push_back(MakeRow("UnspecifiedDType", H{HistogramHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("HeaderMissing", H{HistogramData(16)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("ChunkNotWholeElements", H{HistogramHead(v1::DTYPE_FLOAT64), HistogramData(1023)}, kInvalid,
                         {"request #1: data length 1023 bytes", "not a multiple of the float64 element size 8"}));
  {
    H h{HistogramHead(), HistogramData(50 * 4)};
    h[0].mutable_header()->set_element_count(100);
    rows.push_back(MakeRow("DeclaredCountLarger", h, kInvalid, {"header.element_count=100", "stream carried 50 elements"}));
  }
  rows.push_back(MakeRow("ChunkAboveLimit", H{HistogramHead(), HistogramData(2 * kChunkBytes)}, kExhausted,
                         {"request #1: data length 8192 bytes", "chunk limit of 4096 bytes"}));
}

void SegmentedRows(std::vector<Row>& rows) {
  using S = std::vector<v1::SegmentedScanRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{SegHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOperator", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_INT64, 99)}, kInvalid,
                         {"header.op=99"}));
  rows.push_back(MakeRow("BitwiseOnFloat", S{SegHead(v1::DTYPE_FLOAT64, v1::DTYPE_INT64, v1::OPERATOR_BIT_OR)},
                         kInvalid, {"header.op=OPERATOR_BIT_OR", "dtype float64"}));
  {
    S s{SegHead()};
    s[0].mutable_header()->set_kind(static_cast<v1::ScanKind>(7));
    rows.push_back(MakeRow("UnknownKind", s, kInvalid, {"header.kind=7"}));
  }
  {
    S s{SegHead()};
    s[0].mutable_header()->clear_segments();
    rows.push_back(MakeRow("NeitherKeysNorHeads", s, kInvalid, {"neither key_dtype nor heads"}));
  }
  {
    S s{SegHead()};
    s[0].mutable_header()->set_heads(false);
    rows.push_back(MakeRow("HeadsFalse", s, kInvalid, {"header.heads=false"}));
  }
  rows.push_back(MakeRow("FloatKeys", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_FLOAT32)}, kInvalid,
                         {"header.key_dtype=DTYPE_FLOAT32", "INT32, INT64, UINT32 or UINT64"}));
  rows.push_back(MakeRow("UnknownKeyDType", S{SegHead(v1::DTYPE_INT32, 42)}, kInvalid, {"header.key_dtype=42"}));
  rows.push_back(MakeRow("UnspecifiedKeyDType", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.key_dtype=0"}));
  rows.push_back(MakeRow("HeaderMissing", S{SegChunk(16, 32)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("DataNotWholeElements", S{SegHead(), SegChunk(1023, 2048)}, kInvalid,
                         {"request #1: data length 1023 bytes", "int32 element size 4"}));
  rows.push_back(MakeRow("KeysNotWholeKeys", S{SegHead(), SegChunk(1024, 2047)}, kInvalid,
                         {"request #1: keys length 2047 bytes", "key_dtype int64 size 8"}));
  rows.push_back(MakeRow("KeysAboveChunkLimit", S{SegHead(), SegChunk(1024, 2 * kChunkBytes)}, kExhausted,
                         {"request #1: keys length 8192 bytes", "chunk limit of 4096 bytes"}));
  rows.push_back(MakeRow("FewerKeysThanValues", S{SegHead(), SegChunk(1024, 1024)}, kInvalid,
                         {"keys length 128 differs from data length 256", "one key per value"}));
  {
    S s{SegHead(v1::DTYPE_FLOAT32)};
    s[0].mutable_header()->set_heads(true);
    s.push_back(SegChunk(400, 101));
    rows.push_back(MakeRow("MoreHeadsThanValues", s, kInvalid,
                           {"keys length 101 differs from data length 100", "one head byte per value"}));
  }
  {
    // Values far ahead of their keys: more than 4 chunks out of step.
    S s{SegHead()};
    for (int i = 0; i < 6; ++i) s.push_back(SegChunk(kChunkBytes, 0));
    rows.push_back(MakeRow("KeysOutOfStep", s, kInvalid, {"keys (0 so far)", "out of step"}));
  }
  {
    S s{SegHead(), SegChunk(400, 800)};
    s[0].mutable_header()->set_element_count(101);
    rows.push_back(MakeRow("DeclaredCountLarger", s, kInvalid, {"header.element_count=101", "stream carried 100"}));
  }
}

void ReduceByKeyRows(std::vector<Row>& rows) {
  using B = std::vector<v1::ReduceByKeyRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", B{ByKeyHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnspecifiedOperator", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_INT32, 0)}, kInvalid,
                         {"header.op", "OPERATOR_UNSPECIFIED"}));
  rows.push_back(MakeRow("BitwiseOnFloat", B{ByKeyHead(v1::DTYPE_FLOAT32, v1::DTYPE_INT32, v1::OPERATOR_BIT_AND)},
                         kInvalid, {"header.op=OPERATOR_BIT_AND", "dtype float32"}));
  rows.push_back(MakeRow("KeyDTypeMissing", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.key_dtype=0", "not a known DType"}));
  rows.push_back(MakeRow("FloatKeys", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_FLOAT64)}, kInvalid,
                         {"header.key_dtype=DTYPE_FLOAT64", "INT32, INT64, UINT32 or UINT64"}));
  rows.push_back(MakeRow("HeaderMissing", B{ByKeyChunk(16, 16)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("KeysNotWholeKeys", B{ByKeyHead(), ByKeyChunk(400, 399)}, kInvalid,
                         {"request #1: keys length 399 bytes", "key_dtype int32 size 4"}));
  rows.push_back(MakeRow("MoreKeysThanValues", B{ByKeyHead(), ByKeyChunk(400, 404)}, kInvalid,
                         {"keys length 101 differs from data length 100", "one key per value"}));
  rows.push_back(MakeRow("DataAboveChunkLimit", B{ByKeyHead(), ByKeyChunk(2 * kChunkBytes, 2 * kChunkBytes)},
                         kExhausted, {"request #1: data length 8192 bytes", "chunk limit of 4096 bytes"}));
}

void SortRows(std::vector<Row>& rows) {
  using S = std::vector<v1::SortRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{SortHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOutput", S{SortHead(v1::DTYPE_INT32, 9)}, kInvalid,
                         {"header.output=9", "not a known SortOutput"}));
  rows.push_back(MakeRow("ValuesDTypeWithoutValues", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES, v1::DTYPE_INT32)},
                         kInvalid, {"header.values_dtype=1", "SORT_OUTPUT_INDICES has no values"}));
  rows.push_back(MakeRow("ValuesDTypeMissing", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES)}, kInvalid,
                         {"header.values_dtype is DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownValuesDType", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, 42)},
                         kInvalid, {"header.values_dtype=42", "not a known DType"}));
  rows.push_back(MakeRow("ValuesWithoutValuesOutput", S{SortHead(), SortChunk(400, 400)}, kInvalid,
                         {"request #1: values sent (400 bytes)", "not SORT_OUTPUT_KEYS_AND_VALUES"}));
  rows.push_back(MakeRow("FewerValuesThanKeys",
                         S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_FLOAT64),
                           SortChunk(400, 792)},
                         kInvalid, {"values length 99 differs from keys length 100", "one value per key"}));
  rows.push_back(MakeRow("KeysNotWholeElements", S{SortHead(v1::DTYPE_INT64), SortChunk(404, 0)}, kInvalid,
                         {"request #1: keys length 404 bytes", "int64 element size 8"}));
  {
    S s{SortHead()};
    s[0].mutable_header()->set_element_count(uint64_t{1} << 40);
    rows.push_back(MakeRow("DeclaredCountAboveMaxSortBytes", s, kExhausted,
                           {"header.element_count=1099511627776", "--max-sort-bytes=", "Limits.max_sort_bytes"}));
  }
  {  // 2^62 int32 keys: 2^64 bytes, which a multiplication would wrap to 0 (found in review)
    S s{SortHead()};
    s[0].mutable_header()->set_element_count(uint64_t{1} << 62);
    rows.push_back(MakeRow("DeclaredCountWhoseBytesWrap", s, kExhausted,
                           {"header.element_count=4611686018427387904", "--max-sort-bytes="}));
  }
  rows.push_back(MakeRow("HeaderMissing", S{SortChunk(16, 0)}, kInvalid, {"header missing", "request #0"}));
}

void Scan2DRows(std::vector<Row>& rows) {
  using S = std::vector<v1::Scan2DRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{Scan2DHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOperator", S{Scan2DHead(v1::DTYPE_INT32, 10, 42)}, kInvalid, {"header.op", "42"}));
  rows.push_back(MakeRow("BitwiseOnFloat", S{Scan2DHead(v1::DTYPE_FLOAT32, 10, v1::OPERATOR_BIT_XOR)}, kInvalid,
                         {"header.op", "float32"}));
  rows.push_back(MakeRow("ZeroColumns", S{Scan2DHead(v1::DTYPE_INT32, 0)}, kInvalid, {"header.cols=0"}));
  rows.push_back(MakeRow("RowAboveMaxRowBytes", S{Scan2DHead(v1::DTYPE_FLOAT64, uint64_t{1} << 40)}, kExhausted,
                         {"header.cols=1099511627776", "--max-scan2d-row-bytes", "Limits.max_scan2d_row_bytes"}));
  {
    S s{Scan2DHead(v1::DTYPE_INT64, uint64_t{1} << 20)};
    s[0].mutable_header()->set_rows(uint64_t{1} << 50);
    rows.push_back(MakeRow("RowsTimesColsOverflow", s, kInvalid, {"header.rows=1125899906842624", "overflows"}));
  }
  rows.push_back(MakeRow("EndsInsideARow", S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 25)}, kInvalid,
                         {"ended inside a row", "25 elements", "header.cols=10"}));
  {
    S s{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 30)};
    s[0].mutable_header()->set_rows(4);
    rows.push_back(MakeRow("FewerRowsThanDeclared", s, kInvalid, {"header.rows=4", "carried 3 rows"}));
    s[0].mutable_header()->set_rows(2);
    rows.push_back(MakeRow("MoreRowsThanDeclared", s, kInvalid, {"more than header.rows=2", "30 elements"}));
  }
  rows.push_back(MakeRow("DataNotWholeElements", S{Scan2DHead(v1::DTYPE_INT64, 10), Scan2DChunk(84)}, kInvalid,
                         {"request #1: data length 84 bytes", "int64 element size 8"}));
  rows.push_back(MakeRow("ChunkAboveLimit", S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(kChunkBytes + 40)}, kExhausted,
                         {"exceeds the chunk limit"}));
  rows.push_back(MakeRow("HeaderMissing", S{Scan2DChunk(16)}, kInvalid, {"header missing", "request #0"}));
  // The axis and kind of axis scans (issue 47).
  {
    S s{Scan2DHead(v1::DTYPE_INT32, 10)};
    s[0].mutable_header()->set_axis(static_cast<v1::ScanAxis>(3));
    rows.push_back(MakeRow("UnknownAxis", s, kInvalid, {"header.axis=3", "ScanAxis"}));
    s[0].mutable_header()->set_axis(static_cast<v1::ScanAxis>(-1));
    rows.push_back(MakeRow("NegativeAxis", s, kInvalid, {"header.axis=-1", "ScanAxis"}));
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    s[0].mutable_header()->set_kind(static_cast<v1::ScanKind>(2));
    rows.push_back(MakeRow("AxisUnknownKind", s, kInvalid, {"header.kind=2", "ScanKind"}));
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_BOTH);
    s[0].mutable_header()->set_kind(v1::SCAN_KIND_EXCLUSIVE);
    rows.push_back(MakeRow("ExclusiveOfBothAxes", s, kInvalid,
                           {"header.kind=SCAN_KIND_EXCLUSIVE", "axis scans only", "SCAN_AXIS_BOTH"}));
    s = S{Scan2DHead(v1::DTYPE_FLOAT64, 10, v1::OPERATOR_BIT_AND)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_COLUMNS);
    rows.push_back(MakeRow("AxisBitwiseOnFloat", s, kInvalid, {"header.op", "float64"}));
    s = S{Scan2DHead(v1::DTYPE_INT32, 0)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    rows.push_back(MakeRow("AxisZeroColumns", s, kInvalid, {"header.cols=0"}));
    s = S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 25)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_COLUMNS);
    s[0].mutable_header()->set_kind(v1::SCAN_KIND_EXCLUSIVE);
    rows.push_back(MakeRow("AxisEndsInsideARow", s, kInvalid, {"ended inside a row", "25 elements"}));
  }
}

void NarrowRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  for (const bool scan : {true, false}) {
    auto add = [&](const std::string& name, auto make, grpc::StatusCode code, std::vector<std::string> expect) {
      if (scan) {
        rows.push_back(MakeRow(name, V(make(v1::ScanRequest{})), code, expect));
      } else {
        rows.push_back(MakeRow(name, R(make(v1::ReduceRequest{})), code, expect));
      }
    };
    auto head = [](auto r, v1::DType dtype, int op = v1::OPERATOR_SUM) {
      r.mutable_header()->set_dtype(dtype);
      r.mutable_header()->set_op(static_cast<v1::Operator>(op));
      return r;
    };
    add("NarrowOutputForIntegers", [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_INT8), v1::DTYPE_INT16)}; },
        kInvalid, {"header.output_dtype=DTYPE_INT16", "header.dtype=DTYPE_INT8", "narrow output"});
    // numpy's cumsum(int8, dtype=float16): not served (the proto's ScanHeader.output_dtype).
    add("Float16OutputForIntegers",
        [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_INT8), v1::DTYPE_FLOAT16)}; }, kInvalid,
        {"header.output_dtype=DTYPE_FLOAT16 for header.dtype=DTYPE_INT8", "served for FLOAT16 input only"});
    add("OutputDTypeOfAWideInput",
        [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_INT32), v1::DTYPE_INT64)}; }, kInvalid,
        {"header.output_dtype=DTYPE_INT64 differs from header.dtype=DTYPE_INT32"});
    add("UnknownOutputDType", [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_UINT8), 42)}; }, kInvalid,
        {"header.output_dtype=42", "not a known DType"});
    add("IntegerOutputForFloat16",
        [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_FLOAT16), v1::DTYPE_INT64)}; }, kInvalid,
        {"header.output_dtype=DTYPE_INT64", "DTYPE_FLOAT16", "FLOAT32"});
    add("BitwiseOnFloat16", [&](auto r) { return std::vector{head(r, v1::DTYPE_FLOAT16, v1::OPERATOR_BIT_XOR)}; },
        kInvalid, {"header.op=OPERATOR_BIT_XOR", "float16"});
    add("NarrowNotWholeElements",
        [&](auto r) {
          auto d = r;
          d.set_data(std::string(3, '\x07'));
          return std::vector{head(r, v1::DTYPE_INT16), d};
        },
        kInvalid, {"request #1: data length 3 bytes", "int16 element size 2"});
    add("NarrowCountMismatch",
        [&](auto r) {
          auto h = head(r, v1::DTYPE_UINT8);
          h.mutable_header()->set_element_count(5);
          auto d = r;
          d.set_data(std::string(3, '\x07'));
          return std::vector{h, d};
        },
        kInvalid, {"header.element_count=5", "carried 3 elements"});
    add("NarrowInSharedMemory", [&](auto r) { return std::vector{WithShm(head(r, v1::DTYPE_INT8), "in64")}; },
        kInvalid, {"header.shared_memory", "narrow header.dtype=DTYPE_INT8", "in the stream only"});
    add("NarrowInDeviceMemory", [&](auto r) { return std::vector{WithDevice(head(r, v1::DTYPE_FLOAT16))}; }, kInvalid,
        {"header.device_memory", "narrow header.dtype=DTYPE_FLOAT16"});
    add("NarrowOnLanes", [&](auto r) { return std::vector{WithLanes(head(r, v1::DTYPE_UINT16), 0, 2, 64)}; },
        kInvalid, {"header.dtype=DTYPE_UINT16", "no lanes"});
  }
  // SegmentedScan and ReduceByKey accumulate as Scan does: header.output_dtype's rules.
  const std::vector<std::string> narrow_out = {"header.output_dtype=DTYPE_INT16", "header.dtype=DTYPE_INT8",
                                               "narrow output"};
  const std::vector<std::string> float16_out = {"header.output_dtype=DTYPE_INT64", "DTYPE_FLOAT16", "FLOAT32"};
  const std::vector<std::string> wide_out = {"header.output_dtype=DTYPE_INT64 differs from header.dtype=DTYPE_INT32"};
  const std::vector<std::string> bitwise = {"header.op=OPERATOR_BIT_OR", "float16"};
  using G = std::vector<v1::SegmentedScanRequest>;
  using B = std::vector<v1::ReduceByKeyRequest>;
  rows.push_back(MakeRow("NarrowOutputForIntegers", G{WithOutput(SegHead(v1::DTYPE_INT8), v1::DTYPE_INT16)}, kInvalid,
                         narrow_out));
  rows.push_back(MakeRow("NarrowOutputForIntegers", B{WithOutput(ByKeyHead(v1::DTYPE_INT8), v1::DTYPE_INT16)},
                         kInvalid, narrow_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", G{WithOutput(SegHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", B{WithOutput(ByKeyHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", G{WithOutput(SegHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", B{WithOutput(ByKeyHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  rows.push_back(MakeRow("UnknownOutputDType", B{WithOutput(ByKeyHead(v1::DTYPE_UINT16), 42)}, kInvalid,
                         {"header.output_dtype=42", "not a known DType"}));
  rows.push_back(MakeRow("BitwiseOnFloat16", G{SegHead(v1::DTYPE_FLOAT16, v1::DTYPE_INT64, v1::OPERATOR_BIT_OR)},
                         kInvalid, bitwise));
  rows.push_back(MakeRow("BitwiseOnFloat16", B{ByKeyHead(v1::DTYPE_FLOAT16, v1::DTYPE_INT32, v1::OPERATOR_BIT_OR)},
                         kInvalid, bitwise));
  rows.push_back(MakeRow("NarrowNotWholeElements", G{SegHead(v1::DTYPE_INT16), SegChunk(3, 8)}, kInvalid,
                         {"request #1: data length 3 bytes", "int16 element size 2"}));
  rows.push_back(MakeRow("NarrowKeysOutOfStep", B{ByKeyHead(v1::DTYPE_UINT8), ByKeyChunk(3, 8)}, kInvalid,
                         {"keys length 2", "data length 3"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", G{WithDevice(SegHead(v1::DTYPE_UINT8))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_UINT8", "in the stream only"}));
  // Compact, Sort and Histogram take them as they are, in the stream only.
  using K = std::vector<v1::CompactRequest>;
  rows.push_back(MakeRow("NarrowNotWholeElements", K{CompactHead(v1::DTYPE_FLOAT16, false), Data<v1::CompactRequest>(5)}, kInvalid,
                         {"request #1: values length 5 bytes", "float16 element size 2"}));
  rows.push_back(MakeRow("NarrowInSharedMemory", K{WithShm(CompactHead(v1::DTYPE_INT8, false), "in64")}, kInvalid,
                         {"header.shared_memory", "narrow header.dtype=DTYPE_INT8", "in the stream only"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", K{WithDevice(CompactHead(v1::DTYPE_UINT16, false))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_UINT16"}));
  rows.push_back(MakeRow("NarrowOnLanes", K{WithLanes(CompactHead(v1::DTYPE_INT16, false), 0, 2, 64)}, kInvalid,
                         {"header.dtype=DTYPE_INT16", "no lanes"}));
  rows.push_back(MakeRow("NarrowFlagsOutOfStep", K{CompactHead(v1::DTYPE_UINT8, true), ValuesAndFlags(4, 3, 1)}, kInvalid,
                         {"flags length 3 differs from values length 4"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", std::vector{WithDeviceInput(HistogramHead(v1::DTYPE_FLOAT16))},
                         kInvalid, {"header.device_memory", "narrow header.dtype=DTYPE_FLOAT16"}));
  rows.push_back(MakeRow("NarrowNotWholeElements", std::vector{HistogramHead(v1::DTYPE_INT16), Data<v1::HistogramRequest>(7)},
                         kInvalid, {"request #1: data length 7 bytes", "int16 element size 2"}));
  using T = std::vector<v1::SortRequest>;
  rows.push_back(MakeRow("NarrowNotWholeElements", T{SortHead(v1::DTYPE_UINT16), SortChunk(3, 0)}, kInvalid,
                         {"request #1: keys length 3 bytes", "uint16 element size 2"}));
  rows.push_back(MakeRow("NarrowValuesNotWhole",
                         T{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_FLOAT16), SortChunk(8, 3)},
                         kInvalid, {"request #1: values length 3 bytes", "values_dtype float16 size 2"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", T{WithDeviceInput(SortHead(v1::DTYPE_INT8))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_INT8"}));
  rows.push_back(
      MakeRow("NarrowValuesInDeviceMemory",
              T{WithDeviceInput(SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_UINT8))}, kInvalid,
              {"header.device_memory", "narrow header.values_dtype=DTYPE_UINT8"}));
  // Where narrow dtypes are not served (keys): the field named, and what is.
  using D = std::vector<v1::Scan2DRequest>;
  rows.push_back(MakeRow("NarrowOutputForIntegers", D{WithOutput(Scan2DHead(v1::DTYPE_INT8), v1::DTYPE_INT16)},
                         kInvalid, narrow_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", D{WithOutput(Scan2DHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", D{WithOutput(Scan2DHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  {
    D d{Scan2DHead(v1::DTYPE_UINT8, 10), Scan2DChunk(25)};  // 25 one-byte elements: 2.5 rows of 10
    d[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    rows.push_back(MakeRow("NarrowEndsInsideARow", d, kInvalid, {"ended inside a row", "25 elements"}));
  }
  rows.push_back(MakeRow("NarrowKeyDType", std::vector{SegHead(v1::DTYPE_INT32, v1::DTYPE_INT16)}, kInvalid,
                         {"header.key_dtype=DTYPE_INT16", "narrow dtypes"}));
  rows.push_back(MakeRow("NarrowKeyDType", std::vector{ByKeyHead(v1::DTYPE_INT8, v1::DTYPE_UINT8)}, kInvalid,
                         {"header.key_dtype=DTYPE_UINT8", "narrow dtypes"}));
}

// ScanHeader.carry: one element of the results' dtype, on one stream, not into a float16 output.
void CarryRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  auto carried = [](v1::ScanRequest r, std::string carry) {
    r.mutable_header()->set_carry(std::move(carry));
    return r;
  };
  rows.push_back(MakeRow("CarryOfTwoElements", V{carried(ScanHead(), std::string(8, '\x01'))}, kInvalid,
                         {"header.carry has 8 bytes", "one int32 element", "is 4"}));
  rows.push_back(MakeRow("CarryEmpty", V{carried(ScanHead(v1::DTYPE_FLOAT64), "")}, kInvalid,
                         {"header.carry has 0 bytes", "one float64 element", "is 8"}));
  // A narrow input's carry is one element of its output (int8's default: int64), not of the input.
  rows.push_back(MakeRow("CarryOfTheNarrowInput", V{carried(ScanHead(v1::DTYPE_INT8), std::string(1, '\x05'))},
                         kInvalid, {"header.carry has 1 bytes", "int8->int64", "is 8"}));
  rows.push_back(MakeRow("CarryIntoAFloat16Output", V{carried(ScanHead(v1::DTYPE_FLOAT16), std::string(2, '\x00'))},
                         kInvalid, {"header.carry with a float16 output is not served", "FLOAT32"}));
  rows.push_back(MakeRow("CarryWithLanes", V{carried(WithLanes(ScanHead(), 0, 2, 64), std::string(4, '\x02'))},
                         kInvalid, {"header.carry with header.lanes is not served"}));
}

}  // namespace gpuscan::matrix
