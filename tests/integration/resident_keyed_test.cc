// header.resident of SegmentedScan, ReduceByKey and Scan2D, and narrow dtypes on resident arrays
// (Scan, Reduce and those three), through the raw stub against an in-process server: every result
// bit for bit the streamed call's, on random data (keys in runs of random lengths) and sizes
// around the server's chunk; kept results as the streamed ones; the refusals, naming the field.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

constexpr v1::DType kWide[] = {v1::DTYPE_INT32, v1::DTYPE_INT64, v1::DTYPE_UINT32, v1::DTYPE_UINT64,
                               v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64};
constexpr v1::DType kNarrow[] = {v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_INT16, v1::DTYPE_UINT16,
                                 v1::DTYPE_FLOAT16};
constexpr v1::DType kKeyDTypes[] = {v1::DTYPE_INT32, v1::DTYPE_INT64, v1::DTYPE_UINT32, v1::DTYPE_UINT64};
constexpr uint64_t kSizes[] = {1, 1023, 1024, 1025, 3000};
constexpr v1::Operator kOps[] = {v1::OPERATOR_SUM, v1::OPERATOR_PRODUCT, v1::OPERATOR_MAX};

bool IsNarrowDType(v1::DType d) {
  return d == v1::DTYPE_INT8 || d == v1::DTYPE_UINT8 || d == v1::DTYPE_INT16 || d == v1::DTYPE_UINT16 ||
         d == v1::DTYPE_FLOAT16;
}

size_t ElemSize(v1::DType d) {
  if (d == v1::DTYPE_INT8 || d == v1::DTYPE_UINT8) return 1;
  if (d == v1::DTYPE_INT16 || d == v1::DTYPE_UINT16 || d == v1::DTYPE_FLOAT16) return 2;
  return SizeOf(d);
}

// Random values of any dtype: narrow integers as random bytes, float16 finite (|x| in [2^-5, 8)).
std::string Values(v1::DType d, uint64_t n, uint32_t seed) {
  if (!IsNarrowDType(d)) return RandomArray(d, n, seed);
  if (d != v1::DTYPE_FLOAT16) return RandomBytes(n * ElemSize(d), seed);
  std::mt19937 rng(seed);
  std::string s(n * 2, '\0');
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t h = static_cast<uint16_t>((rng() & 1) << 15 | (10 + rng() % 8) << 10 | (rng() & 0x3ff));
    std::memcpy(&s[i * 2], &h, 2);
  }
  return s;
}

// Keys of key_dtype in runs of 1 to 40 equal keys, each run's key differing from the one before.
std::string Keys(v1::DType key_dtype, uint64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const size_t size = SizeOf(key_dtype);
  std::string s(n * size, '\0');
  uint64_t key = rng(), left = 0;
  for (uint64_t i = 0; i < n; ++i, --left) {
    if (left == 0) {
      key += 1 + rng() % 1000;
      left = 1 + rng() % 40;
    }
    std::memcpy(&s[i * size], &key, size);  // little-endian: the low bytes for 4-byte keys
  }
  return s;
}

// Head flags (UINT8): about one element in twelve begins a segment, with any nonzero byte.
std::string Heads(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = rng() % 12 == 0 ? static_cast<char>(1 + rng() % 255) : '\0';
  return s;
}

class ResidentKeyedTest : public ::testing::Test {
 protected:
  std::string PutOk(v1::DType dtype, const std::string& data, const std::string& tenant = "") {
    v1::ArrayInfo info;
    EXPECT_TRUE(Put(*stub_, dtype, data, &info, tenant, /*declare=*/!IsNarrowDType(dtype)).ok());
    return info.id();
  }
  void Drop(const std::string& id) {
    grpc::ClientContext ctx;
    v1::DropArrayRequest req;
    req.set_id(id);
    v1::DropArrayResponse resp;
    EXPECT_TRUE(stub_->DropArray(&ctx, req, &resp).ok());
  }
  // A kept array's bytes (dropped after), checked to be of `dtype`.
  std::string Kept(const v1::ArrayInfo& info, v1::DType dtype) {
    EXPECT_EQ(info.dtype(), dtype);
    std::string data;
    EXPECT_TRUE(Get(*stub_, info.id(), &data).ok());
    Drop(info.id());
    return data;
  }

  // SegmentedScan: streamed (values and keys cut at the same element, kChunk of values a request)
  // when `values` is given, else on header.resident.
  grpc::Status SegScan(const v1::SegmentedScanHeader& header, const std::string* values, const std::string* keys,
                       std::string* out, v1::ArrayInfo* kept = nullptr, const std::string& tenant = "") {
    grpc::ClientContext ctx;
    Tenant(&ctx, tenant);
    auto stream = stub_->SegmentedScan(&ctx);
    v1::SegmentedScanRequest req;
    *req.mutable_header() = header;
    stream->Write(req);
    if (values) {
      const size_t vsize = ElemSize(header.dtype()), n = values->size() / vsize, ksize = keys->size() / n;
      const size_t step = kChunk / std::max(vsize, ksize);  // neither field past the chunk limit
      for (size_t at = 0; at < n; at += step) {
        v1::SegmentedScanRequest chunk;
        chunk.set_data(values->substr(at * vsize, step * vsize));
        chunk.set_keys(keys->substr(at * ksize, step * ksize));
        stream->Write(chunk);
      }
    }
    return FinishScanStream(*stream, out, kept);
  }

  // ReduceByKey, as SegScan; *last is the final response.
  grpc::Status ByKey(const v1::ReduceByKeyHeader& header, const std::string* values, const std::string* keys,
                     std::string* keys_out, std::string* values_out, v1::ReduceByKeyResponse* last,
                     const std::string& tenant = "") {
    grpc::ClientContext ctx;
    Tenant(&ctx, tenant);
    auto stream = stub_->ReduceByKey(&ctx);
    v1::ReduceByKeyRequest req;
    *req.mutable_header() = header;
    stream->Write(req);
    if (values) {
      const size_t vsize = ElemSize(header.dtype()), ksize = SizeOf(header.key_dtype());
      const size_t step = kChunk / std::max(vsize, ksize);
      for (size_t at = 0; at < values->size() / vsize; at += step) {
        v1::ReduceByKeyRequest chunk;
        chunk.set_data(values->substr(at * vsize, step * vsize));
        chunk.set_keys(keys->substr(at * ksize, step * ksize));
        stream->Write(chunk);
      }
    }
    stream->WritesDone();
    v1::ReduceByKeyResponse resp;
    keys_out->clear();
    values_out->clear();
    while (stream->Read(&resp)) {
      *keys_out += resp.keys();
      *values_out += resp.values();
      *last = resp;
    }
    return stream->Finish();
  }

  // Scan2D, as SegScan (a streamed matrix cut every kChunk bytes, mid-row where it falls).
  grpc::Status Scan2D(const v1::Scan2DHeader& header, const std::string* data, std::string* out,
                      v1::ArrayInfo* kept = nullptr, const std::string& tenant = "") {
    grpc::ClientContext ctx;
    Tenant(&ctx, tenant);
    auto stream = stub_->Scan2D(&ctx);
    v1::Scan2DRequest req;
    *req.mutable_header() = header;
    stream->Write(req);
    for (size_t at = 0; data && at < data->size(); at += kChunk) {
      v1::Scan2DRequest chunk;
      chunk.set_data(data->substr(at, kChunk));
      stream->Write(chunk);
    }
    return FinishScanStream(*stream, out, kept);
  }

  TestServer server_{ResidentOptions(uint64_t{256} << 20)};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

// The output dtype of a call on `d` (output_dtype unset): numpy's rule for narrow dtypes.
v1::DType OutputOf(v1::DType d) {
  if (d == v1::DTYPE_INT8 || d == v1::DTYPE_INT16) return v1::DTYPE_INT64;
  if (d == v1::DTYPE_UINT8 || d == v1::DTYPE_UINT16) return v1::DTYPE_UINT64;
  return d;
}

std::vector<v1::DType> AllDTypes() {
  std::vector<v1::DType> all(std::begin(kWide), std::end(kWide));
  all.insert(all.end(), std::begin(kNarrow), std::end(kNarrow));
  return all;
}

TEST_F(ResidentKeyedTest, SegmentedScansEqualTheStreamedCallsBitForBit) {
  uint32_t seed = 1000;
  int turn = 0;
  for (v1::DType dtype : AllDTypes()) {
    for (uint64_t n : kSizes) {
      const std::string values = Values(dtype, n, seed++);
      const std::string values_id = PutOk(dtype, values);
      // Segments by keys of each key dtype and by head flags, in turn.
      const int segments = turn++ % 5;
      const bool heads = segments == 4;
      const v1::DType key_dtype = heads ? v1::DTYPE_UINT8 : kKeyDTypes[segments];
      const std::string keys = heads ? Heads(n, seed++) : Keys(key_dtype, n, seed++);
      const std::string keys_id = PutOk(key_dtype, keys);
      for (v1::Operator op : kOps) {
        for (v1::ScanKind kind : {v1::SCAN_KIND_INCLUSIVE, v1::SCAN_KIND_EXCLUSIVE}) {
          const std::string what = v1::DType_Name(dtype) + " n=" + std::to_string(n) + " " + v1::Operator_Name(op) +
                                   " " + v1::ScanKind_Name(kind) + " " + v1::DType_Name(key_dtype);
          v1::SegmentedScanHeader h;
          h.set_dtype(dtype);
          h.set_op(op);
          h.set_kind(kind);
          if (heads) {
            h.set_heads(true);
          } else {
            h.set_key_dtype(key_dtype);
          }
          std::string streamed, resident, none;
          const grpc::Status st = SegScan(h, &values, &keys, &streamed);
          ASSERT_TRUE(st.ok()) << what << ": " << st.error_message();
          h.mutable_resident()->set_values(values_id);
          if (heads) {
            h.mutable_resident()->set_flags(keys_id);
          } else {
            h.mutable_resident()->set_keys(keys_id);
          }
          const grpc::Status s = SegScan(h, nullptr, nullptr, &resident);
          ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
          EXPECT_EQ(resident, streamed) << what;
          h.mutable_resident()->set_keep(true);
          v1::ArrayInfo kept;
          ASSERT_TRUE(SegScan(h, nullptr, nullptr, &none, &kept).ok()) << what;
          EXPECT_TRUE(none.empty());
          EXPECT_EQ(kept.element_count(), n);
          EXPECT_EQ(Kept(kept, OutputOf(dtype)), streamed) << what;
        }
      }
      // The inputs are as they were put.
      std::string back;
      ASSERT_TRUE(Get(*stub_, values_id, &back).ok());
      EXPECT_EQ(back, values);
      ASSERT_TRUE(Get(*stub_, keys_id, &back).ok());
      EXPECT_EQ(back, keys);
      Drop(values_id);
      Drop(keys_id);
    }
  }
}

TEST_F(ResidentKeyedTest, ReduceByKeyEqualsTheStreamedCallBitForBit) {
  uint32_t seed = 2000;
  int turn = 0;
  for (v1::DType dtype : AllDTypes()) {
    for (uint64_t n : kSizes) {
      const v1::DType key_dtype = kKeyDTypes[turn++ % 4];
      const std::string values = Values(dtype, n, seed++), keys = Keys(key_dtype, n, seed++);
      const std::string values_id = PutOk(dtype, values), keys_id = PutOk(key_dtype, keys);
      for (v1::Operator op : kOps) {
        const std::string what = v1::DType_Name(dtype) + " n=" + std::to_string(n) + " " + v1::Operator_Name(op) +
                                 " " + v1::DType_Name(key_dtype);
        v1::ReduceByKeyHeader h;
        h.set_dtype(dtype);
        h.set_op(op);
        h.set_key_dtype(key_dtype);
        std::string skeys, svalues, rkeys, rvalues;
        v1::ReduceByKeyResponse slast, rlast;
        ASSERT_TRUE(ByKey(h, &values, &keys, &skeys, &svalues, &slast).ok()) << what;
        h.mutable_resident()->set_values(values_id);
        h.mutable_resident()->set_keys(keys_id);
        const grpc::Status s = ByKey(h, nullptr, nullptr, &rkeys, &rvalues, &rlast);
        ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
        EXPECT_EQ(rkeys, skeys) << what;
        EXPECT_EQ(rvalues, svalues) << what;
        EXPECT_EQ(rlast.run_count(), slast.run_count()) << what;
        EXPECT_EQ(rlast.element_count(), n);
        h.mutable_resident()->set_keep(true);
        ASSERT_TRUE(ByKey(h, nullptr, nullptr, &rkeys, &rvalues, &rlast).ok()) << what;
        EXPECT_TRUE(rkeys.empty() && rvalues.empty()) << what;
        EXPECT_EQ(rlast.run_count(), slast.run_count());
        EXPECT_EQ(rlast.keys_array().element_count(), slast.run_count());
        EXPECT_EQ(rlast.values_array().element_count(), slast.run_count());
        EXPECT_EQ(Kept(rlast.keys_array(), key_dtype), skeys) << what;
        EXPECT_EQ(Kept(rlast.values_array(), OutputOf(dtype)), svalues) << what;
      }
      std::string back;
      ASSERT_TRUE(Get(*stub_, values_id, &back).ok());
      EXPECT_EQ(back, values);
      Drop(values_id);
      Drop(keys_id);
    }
  }
}

TEST_F(ResidentKeyedTest, Scan2DOnEveryAxisEqualsTheStreamedCallBitForBit) {
  uint32_t seed = 3000;
  // cols that divide the chunk's elements and cols that do not (rows then cross chunks mid-row).
  const std::pair<uint64_t, uint64_t> shapes[] = {{1, 1025}, {7, 150}, {64, 40}, {1000, 3}, {1024, 1}, {333, 9}};
  int turn = 0;
  for (v1::DType dtype : AllDTypes()) {
    for (auto [cols, rows] : shapes) {
      const uint64_t n = cols * rows;
      const std::string values = Values(dtype, n, seed++);
      const std::string id = PutOk(dtype, values);
      const v1::Operator op = kOps[turn++ % 3];
      for (v1::ScanAxis axis : {v1::SCAN_AXIS_BOTH, v1::SCAN_AXIS_COLUMNS, v1::SCAN_AXIS_ROWS}) {
        for (v1::ScanKind kind : {v1::SCAN_KIND_INCLUSIVE, v1::SCAN_KIND_EXCLUSIVE}) {
          if (axis == v1::SCAN_AXIS_BOTH && kind == v1::SCAN_KIND_EXCLUSIVE) continue;  // BOTH is inclusive
          const std::string what = v1::DType_Name(dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                   " " + v1::Operator_Name(op) + " " + v1::ScanAxis_Name(axis) + " " +
                                   v1::ScanKind_Name(kind);
          v1::Scan2DHeader h;
          h.set_dtype(dtype);
          h.set_op(op);
          h.set_cols(cols);
          h.set_axis(axis);
          h.set_kind(kind);
          if (turn % 2) h.set_rows(rows);
          std::string streamed, resident, none;
          grpc::Status s = Scan2D(h, &values, &streamed);
          ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
          h.mutable_resident()->set_values(id);
          s = Scan2D(h, nullptr, &resident);
          ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
          EXPECT_EQ(resident, streamed) << what;
          h.mutable_resident()->set_keep(true);
          v1::ArrayInfo kept;
          ASSERT_TRUE(Scan2D(h, nullptr, &none, &kept).ok()) << what;
          EXPECT_TRUE(none.empty());
          EXPECT_EQ(kept.element_count(), n);
          EXPECT_EQ(Kept(kept, OutputOf(dtype)), streamed) << what;
        }
      }
      Drop(id);
    }
  }
}

TEST_F(ResidentKeyedTest, NarrowScanAndReduceEqualTheStreamedCallsBitForBit) {
  uint32_t seed = 4000;
  for (v1::DType dtype : kNarrow) {
    // The default output, and a wider one of the dtype's own (FLOAT16: accumulated in FLOAT32).
    const v1::DType wider = dtype == v1::DTYPE_FLOAT16 ? v1::DTYPE_FLOAT32 : v1::DTYPE_INT32;
    for (uint64_t n : {1ull, 1023ull, 1024ull, 2048ull, 4096ull, 4097ull, 9000ull}) {
      const std::string values = Values(dtype, n, seed++);
      const std::string id = PutOk(dtype, values);
      for (v1::DType output : {v1::DTYPE_UNSPECIFIED, wider}) {
        const v1::DType result = output == v1::DTYPE_UNSPECIFIED ? OutputOf(dtype) : output;
        for (v1::Operator op : kOps) {
          const std::string what = v1::DType_Name(dtype) + "->" + v1::DType_Name(result) + " n=" + std::to_string(n) +
                                   " " + v1::Operator_Name(op);
          for (v1::ScanKind kind : {v1::SCAN_KIND_INCLUSIVE, v1::SCAN_KIND_EXCLUSIVE}) {
            v1::ScanHeader h;
            h.set_dtype(dtype);
            h.set_output_dtype(output);
            h.set_op(op);
            h.set_kind(kind);
            std::string streamed, resident, none;
            ASSERT_TRUE(Scan(*stub_, h, &values, &streamed).ok()) << what;
            h.mutable_resident()->set_values(id);
            const grpc::Status s = Scan(*stub_, h, nullptr, &resident);
            ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
            EXPECT_EQ(resident, streamed) << what;
            h.mutable_resident()->set_keep(true);
            v1::ArrayInfo kept;
            ASSERT_TRUE(Scan(*stub_, h, nullptr, &none, &kept).ok()) << what;
            EXPECT_TRUE(none.empty());
            EXPECT_EQ(kept.element_count(), n);
            EXPECT_EQ(Kept(kept, result), streamed) << what;
          }
          v1::ReduceHeader r;
          r.set_dtype(dtype);
          r.set_output_dtype(output);
          r.set_op(op);
          std::string streamed, resident;
          ASSERT_TRUE(Reduce(*stub_, r, &values, &streamed).ok()) << what;
          r.mutable_resident()->set_values(id);
          const grpc::Status s = Reduce(*stub_, r, nullptr, &resident);
          ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
          EXPECT_EQ(resident, streamed) << what;
        }
      }
      std::string back;
      ASSERT_TRUE(Get(*stub_, id, &back).ok());
      EXPECT_EQ(back, values);
      Drop(id);
    }
  }
}

// One request on a bidi stream of `open`, its responses read: the call's status.
template <class Response, class Request, class Open>
grpc::Status OneRequest(const Request& req, Open&& open) {
  grpc::ClientContext ctx;
  auto stream = open(&ctx);
  stream->Write(req);
  stream->WritesDone();
  Response resp;
  while (stream->Read(&resp)) {
  }
  return stream->Finish();
}

TEST_F(ResidentKeyedTest, RefusalsNameTheField) {
  const uint64_t n = 1000;
  const std::string values_id = PutOk(v1::DTYPE_INT32, Values(v1::DTYPE_INT32, n, 1));
  const std::string keys64 = PutOk(v1::DTYPE_INT64, Keys(v1::DTYPE_INT64, n, 2));
  const std::string keys32 = PutOk(v1::DTYPE_INT32, Keys(v1::DTYPE_INT32, n, 3));
  const std::string short_keys = PutOk(v1::DTYPE_INT64, Keys(v1::DTYPE_INT64, n - 1, 4));
  const std::string flags = PutOk(v1::DTYPE_UINT8, Heads(n, 5));
  const std::string wide_flags = PutOk(v1::DTYPE_INT32, Values(v1::DTYPE_INT32, n, 6));
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  std::string out, out2;
  v1::ReduceByKeyResponse last;

  v1::SegmentedScanHeader seg;
  seg.set_dtype(v1::DTYPE_INT32);
  seg.set_op(v1::OPERATOR_SUM);
  seg.set_key_dtype(v1::DTYPE_INT64);
  seg.mutable_resident()->set_values(values_id);
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out), kInvalid, {"header.resident.keys: required"});
  seg.mutable_resident()->set_keys(keys32);
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out), kInvalid,
                {"header.resident.keys", "is DTYPE_INT32; header.key_dtype is DTYPE_INT64"});
  seg.mutable_resident()->set_keys(short_keys);
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out), kInvalid,
                {"header.resident.keys", "has 999 elements; header.resident.values has 1000"});
  seg.mutable_resident()->set_keys(keys64);
  seg.mutable_resident()->set_flags(flags);
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out), kInvalid,
                {"header.resident.flags: this call takes no such input"});
  seg.set_heads(true);
  seg.mutable_resident()->clear_keys();
  seg.mutable_resident()->set_flags(wide_flags);
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out), kInvalid, {"header.resident.flags", "one byte an element"});
  seg.mutable_resident()->set_flags(flags);
  ASSERT_TRUE(SegScan(seg, nullptr, nullptr, &out).ok());
  ExpectRefused(SegScan(seg, nullptr, nullptr, &out, nullptr, "another"), grpc::StatusCode::NOT_FOUND,
                {"header.resident.values", "no such resident array"});

  v1::ReduceByKeyHeader rbk;
  rbk.set_dtype(v1::DTYPE_INT32);
  rbk.set_op(v1::OPERATOR_SUM);
  rbk.set_key_dtype(v1::DTYPE_INT64);
  rbk.mutable_resident()->set_values(values_id);
  ExpectRefused(ByKey(rbk, nullptr, nullptr, &out, &out2, &last), kInvalid, {"header.resident.keys: required"});
  rbk.mutable_resident()->set_keys(keys32);
  ExpectRefused(ByKey(rbk, nullptr, nullptr, &out, &out2, &last), kInvalid,
                {"header.resident.keys", "header.key_dtype is DTYPE_INT64"});
  rbk.mutable_resident()->set_keys(keys64);
  rbk.mutable_resident()->set_flags(flags);
  ExpectRefused(ByKey(rbk, nullptr, nullptr, &out, &out2, &last), kInvalid, {"header.resident.flags"});
  rbk.mutable_resident()->clear_flags();
  ExpectRefused(ByKey(rbk, nullptr, nullptr, &out, &out2, &last, "another"), grpc::StatusCode::NOT_FOUND,
                {"header.resident.values", "no such resident array"});

  v1::Scan2DHeader s2;
  s2.set_dtype(v1::DTYPE_INT32);
  s2.set_op(v1::OPERATOR_SUM);
  s2.set_cols(7);
  s2.mutable_resident()->set_values(values_id);
  ExpectRefused(Scan2D(s2, nullptr, &out), kInvalid,
                {"header.resident.values", "has 1000 elements", "not a whole number of rows of header.cols=7"});
  s2.set_cols(10);
  s2.set_rows(99);
  ExpectRefused(Scan2D(s2, nullptr, &out), kInvalid, {"header.rows=99", "100 rows of header.cols=10"});
  s2.set_rows(100);
  ASSERT_TRUE(Scan2D(s2, nullptr, &out).ok());
  s2.mutable_resident()->set_keys(keys64);
  ExpectRefused(Scan2D(s2, nullptr, &out), kInvalid, {"header.resident.keys: this call takes no such input"});
  s2.mutable_resident()->clear_keys();
  ExpectRefused(Scan2D(s2, nullptr, &out, nullptr, "another"), grpc::StatusCode::NOT_FOUND,
                {"header.resident.values", "no such resident array"});

  // Data sent with header.resident, in the header's own request (no later one is read).
  v1::SegmentedScanRequest seg_req;
  *seg_req.mutable_header() = seg;
  seg_req.set_data(std::string(8, '\x01'));
  seg_req.set_keys(std::string(2, '\x01'));
  ExpectRefused(OneRequest<v1::ScanResponse>(seg_req, [&](grpc::ClientContext* c) { return stub_->SegmentedScan(c); }),
                kInvalid, {"data", "header.resident"});
  v1::ReduceByKeyRequest rbk_req;
  *rbk_req.mutable_header() = rbk;
  rbk_req.set_keys(std::string(8, '\x01'));
  ExpectRefused(OneRequest<v1::ReduceByKeyResponse>(rbk_req, [&](grpc::ClientContext* c) { return stub_->ReduceByKey(c); }),
                kInvalid, {"keys", "header.resident"});
  v1::Scan2DRequest s2_req;
  *s2_req.mutable_header() = s2;
  s2_req.set_data(std::string(40, '\x01'));
  ExpectRefused(OneRequest<v1::ScanResponse>(s2_req, [&](grpc::ClientContext* c) { return stub_->Scan2D(c); }),
                kInvalid, {"data", "header.resident"});
}

}  // namespace
}  // namespace gpuscan::testing
