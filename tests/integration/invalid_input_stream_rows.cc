// The bad-input matrix: the stream and header checks that Scan, Reduce and Compact share (the
// header missing, repeated or late; unknown enums; chunk and request limits; raw encodings).
#include <cstdint>
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {

void StreamRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  using K = std::vector<v1::CompactRequest>;

  // ---- header missing, repeated, after data; empty stream
  ForEveryRpc(rows, "HeaderMissing", kInvalid, {"header missing", "request #0"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Data<C>(16), Data<C>(16)};
  });
  ForEveryRpc(rows, "HeaderAfterData", kInvalid, {"header missing", "request #0"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Data<C>(16), Head<C>()};
  });
  ForEveryRpc(rows, "HeaderRepeated", kInvalid, {"header repeated in request #2"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Head<C>(), Data<C>(16), Head<C>()};
  });
  ForEveryRpc(rows, "HeaderRepeatedWithData", kInvalid, {"header repeated in request #1"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithData(Head<C>(), 16), WithData(Head<C>(), 16)};
  });
  ForEveryRpc(rows, "EmptyStream", kInvalid, {"empty stream", "first request (the header)"},
              [](auto t) { return std::vector<typename decltype(t)::type>{}; });

  // ---- unknown enum values
  ForEveryRpc(rows, "UnknownDType", kInvalid, {"header.dtype=42", "not a known DType"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), 42), Data<C>(16)};
  });
  ForEveryRpc(rows, "NegativeDType", kInvalid, {"header.dtype=-3", "not a known DType"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), -3)};
  });
  ForEveryRpc(rows, "UnspecifiedDType", kInvalid, {"header.dtype", "DTYPE_UNSPECIFIED"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), v1::DTYPE_UNSPECIFIED), Data<C>(16)};
  });
  rows.push_back(MakeRow("UnknownOperator", V{ScanHead(v1::DTYPE_INT32, 99)}, kInvalid, {"header.op=99", "not a known Operator"}));
  rows.push_back(MakeRow("UnknownOperator", R{ReduceHead(v1::DTYPE_UINT64, 8)}, kInvalid, {"header.op=8", "not a known Operator"}));
  rows.push_back(MakeRow("UnspecifiedOperator", V{ScanHead(v1::DTYPE_INT32, 0)}, kInvalid, {"header.op", "OPERATOR_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnspecifiedOperator", R{ReduceHead(v1::DTYPE_FLOAT32, 0)}, kInvalid, {"header.op", "OPERATOR_UNSPECIFIED"}));
  {
    auto h = ScanHead();
    h.mutable_header()->set_kind(static_cast<v1::ScanKind>(7));
    rows.push_back(MakeRow("UnknownKind", V{h}, kInvalid, {"header.kind=7", "not a known ScanKind"}));
    h = ScanHead();
    h.mutable_header()->set_algorithm(static_cast<v1::ScanAlgorithm>(77));
    rows.push_back(MakeRow("UnknownAlgorithm", V{h}, kInvalid, {"header.algorithm=77", "not a known ScanAlgorithm"}));
    auto c = CompactHead();
    c.mutable_header()->set_output(static_cast<v1::CompactOutput>(9));
    rows.push_back(MakeRow("UnknownOutput", K{c}, kInvalid, {"header.output=9", "not a known CompactOutput"}));
    c = CompactHead(v1::DTYPE_INT32, false);
    c.mutable_header()->mutable_predicate()->set_op(static_cast<v1::PredicateOp>(55));
    rows.push_back(MakeRow("UnknownPredicateOp", K{c}, kInvalid, {"header.predicate.op=55", "not a known PredicateOp"}));
    c.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_UNSPECIFIED);
    rows.push_back(MakeRow("UnspecifiedPredicateOp", K{c}, kInvalid, {"header.predicate.op", "PREDICATE_OP_UNSPECIFIED"}));
    c = CompactHead();
    c.mutable_header()->clear_selector();
    rows.push_back(MakeRow("NoSelector", K{c}, kInvalid, {"header has no selector", "use_flags=true or a predicate"}));
    c.mutable_header()->set_use_flags(false);
    rows.push_back(MakeRow("UseFlagsFalse", K{c}, kInvalid, {"header.use_flags=false"}));
  }
  {
    Row row = MakeRow("AlgorithmNotOnThisEngine", V{WithData(ScanHead(), 64)}, kUnimplemented,
                      {"is not available on the"});
    row.missing_algorithm = true;  // the algorithm and its name are filled in when the row runs
    rows.push_back(row);
  }

  // ---- bitwise operator on floats
  rows.push_back(MakeRow("BitAndOnFloat32", V{ScanHead(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)}, kInvalid,
                         {"header.op=OPERATOR_BIT_AND", "dtype float32"}));
  rows.push_back(MakeRow("BitOrOnFloat64", V{WithData(ScanHead(v1::DTYPE_FLOAT64, v1::OPERATOR_BIT_OR), 64)}, kInvalid,
                         {"header.op=OPERATOR_BIT_OR", "dtype float64"}));
  rows.push_back(MakeRow("BitXorOnFloat64", R{ReduceHead(v1::DTYPE_FLOAT64, v1::OPERATOR_BIT_XOR)}, kInvalid,
                         {"header.op=OPERATOR_BIT_XOR", "dtype float64"}));
  rows.push_back(MakeRow("BitAndOnFloat32", R{ReduceHead(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)}, kInvalid,
                         {"header.op=OPERATOR_BIT_AND", "dtype float32"}));

  // ---- chunk length not a multiple of the element size
  ForEveryRpc(rows, "ChunkNotWholeElements", kInvalid,
              {"request #1: $F length 1023 bytes", "not a multiple of the int64 element size 8"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(v1::DTYPE_INT64), Data<C>(1023)};
              });
  ForEveryRpc(rows, "FirstChunkNotWholeElements", kInvalid,
              {"request #0: $F length 6 bytes", "not a multiple of the float32 element size 4"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithData(Head<C>(v1::DTYPE_FLOAT32), 6)};
              });

  // ---- declared count larger and smaller than received
  ForEveryRpc(rows, "DeclaredCountLarger", kInvalid, {"header.element_count=100", "stream carried 50 elements"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithCount(Head<C>(), 100), Data<C>(50 * 4)};
              });
  ForEveryRpc(rows, "DeclaredCountSmaller", kInvalid, {"header.element_count=10", "(50 so far)"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithCount(Head<C>(), 10), Data<C>(50 * 4)};
  });
  ForEveryRpc(rows, "DeclaredCountWithNoData", kInvalid, {"header.element_count=3", "stream carried 0 elements"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithCount(Head<C>(), 3)};
              });

  // ---- flags and values of different lengths (Compact, use_flags)
  rows.push_back(MakeRow("FewerFlagsThanValues", K{CompactHead(), ValuesAndFlags(100, 99)}, kInvalid,
                         {"flags length 99", "values length 100"}));
  rows.push_back(MakeRow("MoreFlagsThanValues", K{CompactHead(), ValuesAndFlags(100, 101)}, kInvalid,
                         {"flags length 101", "values length 100"}));
  rows.push_back(MakeRow("FlagsButNoValues", K{CompactHead(), ValuesAndFlags(0, 8)}, kInvalid,
                         {"flags length 8", "values length 0"}));
  rows.push_back(MakeRow("FlagsWithPredicate", K{CompactHead(v1::DTYPE_INT32, false), ValuesAndFlags(10, 10)}, kInvalid,
                         {"request #1: flags sent (10 bytes)", "selects by predicate"}));
  {
    K far = {CompactHead()};
    for (int i = 0; i < 6; ++i) far.push_back(ValuesAndFlags(kChunkBytes / 4, 0));
    rows.push_back(MakeRow("FlagsFarOutOfStep", far, kInvalid, {"request #5: flags (0 so far)", "out of step by more than 4096"}));
  }
  rows.push_back(MakeRow("FlagsChunkAboveLimit", K{CompactHead(), ValuesAndFlags(0, 2 * kChunkBytes)}, kExhausted,
                         {"request #1: flags length 8192 bytes", "chunk limit of 4096 bytes"}));

  // ---- predicate threshold of the wrong kind (or missing, or out of the dtype's range)
  {
    auto c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_LT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_float_value(1.5);
    rows.push_back(MakeRow("FloatThresholdForInt32", K{c}, kInvalid,
                           {"header.predicate.threshold must be an int_value or uint_value for dtype int32", "float_value=1.5"}));
    c = CompactPredicate(v1::DTYPE_FLOAT64, v1::PREDICATE_OP_GE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(3);
    rows.push_back(MakeRow("IntThresholdForFloat64", K{c}, kInvalid,
                           {"header.predicate.threshold must be a float_value for dtype float64", "int_value=3"}));
    c = CompactPredicate(v1::DTYPE_FLOAT32, v1::PREDICATE_OP_EQ);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_uint_value(7);
    rows.push_back(MakeRow("UintThresholdForFloat32", K{c}, kInvalid,
                           {"header.predicate.threshold must be a float_value for dtype float32", "uint_value=7"}));
    c = CompactPredicate(v1::DTYPE_UINT32, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(-1);
    rows.push_back(MakeRow("NegativeThresholdForUint32", K{c}, kInvalid,
                           {"header.predicate.threshold=-1", "does not fit dtype uint32"}));
    c = CompactPredicate(v1::DTYPE_INT64, v1::PREDICATE_OP_LE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_uint_value(uint64_t{1} << 63);
    rows.push_back(MakeRow("HugeUintThresholdForInt64", K{c}, kInvalid,
                           {"header.predicate.threshold=9223372036854775808", "does not fit dtype int64"}));
    c = CompactPredicate(v1::DTYPE_FLOAT32, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_float_value(1e300);
    rows.push_back(MakeRow("Float64ThresholdBeyondFloat32", K{c}, kInvalid,
                           {"header.predicate.threshold=1e+300", "does not fit dtype float32"}));
    c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_EQ);
    rows.push_back(MakeRow("ThresholdMissing", K{c}, kInvalid, {"header.predicate.threshold is required"}));
    c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_IN_RANGE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(0);
    rows.push_back(MakeRow("UpperMissing", K{c}, kInvalid, {"header.predicate.upper is required"}));
    c.mutable_header()->mutable_predicate()->mutable_upper()->set_int_value(int64_t{1} << 40);
    rows.push_back(MakeRow("UpperBeyondInt32", K{c}, kInvalid,
                           {"header.predicate.upper=1099511627776", "does not fit dtype int32"}));
    c.mutable_header()->mutable_predicate()->mutable_upper()->set_float_value(2.0);
    rows.push_back(MakeRow("FloatUpperForInt32", K{c}, kInvalid,
                           {"header.predicate.upper must be an int_value or uint_value", "float_value=2"}));
    // A narrow array's bounds in its own dtype, not its carrier's (int32, uint32, float32).
    struct NarrowRow {
      const char* name;
      v1::DType dtype;
      int64_t value;
      const char* says;
    };
    for (const NarrowRow& r : {NarrowRow{"Int8Threshold300", v1::DTYPE_INT8, 300, "=300 does not fit dtype int8"},
                               NarrowRow{"Int8ThresholdMinus129", v1::DTYPE_INT8, -129, "=-129 does not fit dtype int8"},
                               NarrowRow{"Uint8Threshold256", v1::DTYPE_UINT8, 256, "=256 does not fit dtype uint8"},
                               NarrowRow{"Uint8ThresholdMinus1", v1::DTYPE_UINT8, -1, "=-1 does not fit dtype uint8"},
                               NarrowRow{"Int16Threshold40000", v1::DTYPE_INT16, 40000, "=40000 does not fit dtype int16"},
                               NarrowRow{"Uint16Threshold65536", v1::DTYPE_UINT16, 65536,
                                         "=65536 does not fit dtype uint16"}}) {
      c = CompactPredicate(r.dtype, v1::PREDICATE_OP_GT);
      c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(r.value);
      rows.push_back(MakeRow(r.name, K{c}, kInvalid, {std::string("header.predicate.threshold") + r.says}));
    }
    c = CompactPredicate(v1::DTYPE_INT8, v1::PREDICATE_OP_IN_RANGE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(-5);
    c.mutable_header()->mutable_predicate()->mutable_upper()->set_uint_value(128);
    rows.push_back(MakeRow("Int8UpperBeyond", K{c}, kInvalid, {"header.predicate.upper=128 does not fit dtype int8"}));
    c = CompactPredicate(v1::DTYPE_FLOAT16, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(3);
    rows.push_back(MakeRow("IntThresholdForFloat16", K{c}, kInvalid,
                           {"header.predicate.threshold must be a float_value for dtype float16", "int_value=3"}));
    c = CompactPredicate(v1::DTYPE_UINT8, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_float_value(1.5);
    rows.push_back(MakeRow("FloatThresholdForUint8", K{c}, kInvalid,
                           {"header.predicate.threshold must be an int_value or uint_value for dtype uint8"}));
  }

  // ---- a chunk above the chunk limit; a call above --max-request-bytes; a message above the
  // gRPC receive limit (refused by gRPC itself, which names the sizes but no field)
  ForEveryRpc(rows, "ChunkAboveLimit", kExhausted,
              {"request #1: $F length 8192 bytes", "exceeds the chunk limit of 4096 bytes"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(), Data<C>(2 * kChunkBytes)};
              });
  ForEveryRpc(rows, "AboveMaxRequestBytes", kExhausted,
              {"--max-request-bytes=65536", "received 69632 so far"}, [](auto t) {
                using C = typename decltype(t)::type;
                std::vector<C> r = {Head<C>()};
                for (uint64_t sent = 0; sent <= kMaxRequestBytes; sent += kChunkBytes) r.push_back(Data<C>(kChunkBytes));
                return r;
              });
  ForEveryRpc(rows, "MessageAboveReceiveLimit", kExhausted, {"larger than max", std::to_string(kReceiveLimit)},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(), Data<C>(kReceiveLimit + 4096)};
              });
  {
    // Values within the limit, values and flags together above it: flags are input too.
    K r = {CompactHead()};
    for (uint64_t sent = 0; sent + kChunkBytes <= kMaxRequestBytes; sent += kChunkBytes) {
      r.push_back(ValuesAndFlags(kChunkBytes / 4, kChunkBytes / 4));
    }
    rows.push_back(MakeRow("ValuesAndFlagsAboveMaxRequestBytes", r, kExhausted,
                           {"--max-request-bytes=65536", "values and flags"}));
  }
  // Scan is read raw (service/wire.h): encodings protobuf would refuse are refused there too.
  {
    Row row{"MalformedEncoding", Rpc::kScan};
    row.raw = {std::string("\x12\x05" "abc", 5)};  // data says 5 bytes, 3 follow
    row.expect = {"request #0", "the ScanRequest is not a valid message", "field 2 says 5 bytes, 3 remain"};
    rows.push_back(row);
    row.name = "MalformedEncodingAfterAValidChunk";
    row.raw = {ScanHead().SerializeAsString() + Data<v1::ScanRequest>(64).SerializeAsString(),
               std::string("\x0b", 1)};  // field 1 as a group (wire type 3)
    row.expect = {"request #1", "the ScanRequest is not a valid message", "wire type 3 of field 1"};
    rows.push_back(row);
    Row reduce{"Reduce_MalformedEncoding", Rpc::kReduce};
    reduce.raw = {ReduceHead().SerializeAsString(), std::string("\x12\x80", 2)};  // a length cut off
    reduce.expect = {"request #1", "the ReduceRequest is not a valid message", "truncated or overlong length of field 2"};
    rows.push_back(reduce);
    // Compact reads values (2) and flags (3) raw.
    Row compact{"Compact_MalformedFlags", Rpc::kCompact};
    compact.raw = {CompactHead().SerializeAsString() + std::string("\x12\x04" "abcd" "\x1a\x09" "\x01\x00", 10)};
    compact.expect = {"request #0", "the CompactRequest is not a valid message", "field 3 says 9 bytes, 2 remain"};
    rows.push_back(compact);
    compact.name = "Compact_OverlongTag";  // a tag in six bytes: protobuf reads tags in five
    compact.raw = {CompactHead().SerializeAsString(), std::string("\x92\x80\x80\x80\x80\x00\x00", 7)};
    compact.expect = {"request #1", "the CompactRequest is not a valid message", "overlong field tag"};
    rows.push_back(compact);
  }
}

}  // namespace gpuscan::matrix
