// Compact and Sort of narrow dtypes (int8, uint8, int16, uint16, float16) on resident arrays,
// through the raw stub against an in-process server: values, indices and kept counts bit for bit
// the streamed call's, returned and kept (in the narrow dtype), with flags, sort values of narrow
// and wide dtypes, descending; random bytes (float16's NaN and inf among them), sizes around the
// chunk; and the budget counting the widened copies.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing::resident_narrow {

using namespace resident;  // NOLINT: the fixture's helpers

const v1::DType kNarrowDTypes[] = {v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_INT16, v1::DTYPE_UINT16,
                                   v1::DTYPE_FLOAT16};

// Around the server's chunk (kChunk bytes of the narrow dtype): 0, 1, a chunk less one, one, one
// more, a few chunks.
std::vector<uint64_t> ChunkSizes(v1::DType dtype) {
  const uint64_t per = kChunk / SizeOf(dtype);
  return {0, 1, per - 1, per, per + 1, 3 * per - 72};
}

// Random elements: narrow ones as random bytes (float16's NaN, inf, -0 included).
std::string Elements(v1::DType dtype, uint64_t n, uint32_t seed) {
  return SizeOf(dtype) <= 2 ? RandomBytes(n * SizeOf(dtype), seed) : RandomArray(dtype, n, seed);
}

struct CompactOut {
  std::string values, indices;
  v1::CompactResponse last;
};

// Streamed when values are given (requests of at most kChunk bytes), else the header alone.
grpc::Status CompactCall(v1::GpuScan::Stub& stub, const v1::CompactHeader& h, const std::string* values,
                         const std::string* flags, CompactOut* r) {
  grpc::ClientContext ctx;
  auto stream = stub.Compact(&ctx);
  v1::CompactRequest req;
  *req.mutable_header() = h;
  stream->Write(req);
  const size_t size = SizeOf(h.dtype()), per = kChunk / size;
  for (size_t first = 0; values && first < values->size() / size; first += per) {
    v1::CompactRequest chunk;
    chunk.set_values(values->substr(first * size, per * size));
    if (flags) chunk.set_flags(flags->substr(first, per));
    stream->Write(chunk);
  }
  stream->WritesDone();
  *r = {};
  v1::CompactResponse resp;
  while (stream->Read(&resp)) {
    r->values += resp.values();
    r->indices += resp.indices();
    r->last = resp;
  }
  return stream->Finish();
}

struct SortOut {
  std::string keys, values, indices;
  v1::SortResponse last;
};

grpc::Status SortCall(v1::GpuScan::Stub& stub, const v1::SortHeader& h, const std::string* keys,
                      const std::string* values, SortOut* r) {
  grpc::ClientContext ctx;
  auto stream = stub.Sort(&ctx);
  v1::SortRequest req;
  *req.mutable_header() = h;
  stream->Write(req);
  const size_t ks = SizeOf(h.dtype()), vs = values ? SizeOf(h.values_dtype()) : 0, per = kChunk / 8;
  for (size_t first = 0; keys && first < keys->size() / ks; first += per) {
    v1::SortRequest chunk;
    chunk.set_keys(keys->substr(first * ks, per * ks));
    if (values) chunk.set_values(values->substr(first * vs, per * vs));
    stream->Write(chunk);
  }
  stream->WritesDone();
  *r = {};
  v1::SortResponse resp;
  while (stream->Read(&resp)) {
    r->keys += resp.keys();
    r->values += resp.values();
    r->indices += resp.indices();
    r->last = resp;
  }
  return stream->Finish();
}

// A predicate that keeps about half of random elements of `dtype`.
v1::CompactHeader PredicateHead(v1::DType dtype, v1::CompactOutput output) {
  v1::CompactHeader h;
  h.set_dtype(dtype);
  h.set_output(output);
  v1::Predicate* p = h.mutable_predicate();
  p->set_op(v1::PREDICATE_OP_GT);
  if (dtype == v1::DTYPE_FLOAT16) {
    p->mutable_threshold()->set_float_value(0.0);
  } else if (dtype == v1::DTYPE_UINT8 || dtype == v1::DTYPE_UINT16) {
    p->mutable_threshold()->set_uint_value(dtype == v1::DTYPE_UINT8 ? 127 : 32767);
  } else {
    p->mutable_threshold()->set_int_value(0);
  }
  return h;
}

class ResidentNarrowTest : public ::testing::Test {
 protected:
  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

TEST_F(ResidentNarrowTest, CompactEqualsTheStreamedCallBitForBitReturnedAndKept) {
  uint32_t seed = 4100;
  const v1::CompactOutput outputs[] = {v1::COMPACT_OUTPUT_VALUES, v1::COMPACT_OUTPUT_INDICES,
                                       v1::COMPACT_OUTPUT_VALUES_AND_INDICES};
  for (v1::DType dtype : kNarrowDTypes) {
    for (uint64_t n : ChunkSizes(dtype)) {
      const std::string data = Elements(dtype, n, seed++);
      std::string flags = RandomBytes(n, seed++);
      for (char& c : flags) c = (c & 1) ? static_cast<char>(c | 2) : 0;  // about half zero
      const std::string id = PutId(*stub_, dtype, data);
      const std::string flags_id = PutId(*stub_, seed % 2 ? v1::DTYPE_UINT8 : v1::DTYPE_INT8, flags);
      for (bool use_flags : {false, true}) {
        for (v1::CompactOutput output : outputs) {
          SCOPED_TRACE(::testing::Message() << v1::DType_Name(dtype) << " n=" << n << " flags=" << use_flags
                                          << " output=" << output);
          v1::CompactHeader h = PredicateHead(dtype, output);
          if (use_flags) h.set_use_flags(true);
          CompactOut streamed, returned, kept;
          ASSERT_TRUE(CompactCall(*stub_, h, &data, use_flags ? &flags : nullptr, &streamed).ok());
          if (n > 100) {
            ASSERT_GT(streamed.last.kept_count(), 0u);  // the comparison has something to compare
            ASSERT_LT(streamed.last.kept_count(), n);
          }
          h.mutable_resident()->set_values(id);
          if (use_flags) h.mutable_resident()->set_flags(flags_id);
          grpc::Status s = CompactCall(*stub_, h, nullptr, nullptr, &returned);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_EQ(returned.values, streamed.values);
          EXPECT_EQ(returned.indices, streamed.indices);
          EXPECT_EQ(returned.last.kept_count(), streamed.last.kept_count());
          EXPECT_EQ(returned.last.element_count(), n);
          h.mutable_resident()->set_keep(true);
          s = CompactCall(*stub_, h, nullptr, nullptr, &kept);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_TRUE(kept.values.empty() && kept.indices.empty());
          EXPECT_EQ(kept.last.kept_count(), streamed.last.kept_count());
          ASSERT_EQ(kept.last.has_values_array(), output != v1::COMPACT_OUTPUT_INDICES);
          ASSERT_EQ(kept.last.has_indices_array(), output != v1::COMPACT_OUTPUT_VALUES);
          if (kept.last.has_values_array()) {
            EXPECT_EQ(kept.last.values_array().dtype(), dtype);
            EXPECT_EQ(kept.last.values_array().bytes(), streamed.values.size());  // narrow, cut to the kept count
            EXPECT_EQ(GetAll(*stub_, kept.last.values_array().id()), streamed.values);
          }
          if (kept.last.has_indices_array()) {
            EXPECT_EQ(kept.last.indices_array().dtype(), v1::DTYPE_INT64);
            EXPECT_EQ(GetAll(*stub_, kept.last.indices_array().id()), streamed.indices);
          }
        }
      }
      v1::ArrayInfo input;
      input.set_id(id);
      EXPECT_EQ(GetAll(*stub_, input.id()), data);  // never written
    }
  }
}

TEST_F(ResidentNarrowTest, SortEqualsTheStreamedCallBitForBitReturnedAndKept) {
  uint32_t seed = 4200;
  const v1::SortOutput outputs[] = {v1::SORT_OUTPUT_KEYS, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::SORT_OUTPUT_INDICES,
                                    v1::SORT_OUTPUT_KEYS_AND_INDICES};
  int turn = 0;
  for (v1::DType dtype : kNarrowDTypes) {
    for (uint64_t n : ChunkSizes(dtype)) {
      // Values of a narrow dtype and of a wide one, by turns.
      const v1::DType values_dtype = (turn++ % 2) ? kNarrowDTypes[turn % 5] : (turn % 4 ? v1::DTYPE_INT64
                                                                                        : v1::DTYPE_FLOAT32);
      const std::string keys = Elements(dtype, n, seed++), values = Elements(values_dtype, n, seed++);
      const std::string keys_id = PutId(*stub_, dtype, keys), values_id = PutId(*stub_, values_dtype, values);
      for (bool descending : {false, true}) {
        for (v1::SortOutput output : outputs) {
          SCOPED_TRACE(::testing::Message() << v1::DType_Name(dtype) << " n=" << n << " values="
                                          << v1::DType_Name(values_dtype) << " descending=" << descending
                                          << " output=" << output);
          const bool with_values = output == v1::SORT_OUTPUT_KEYS_AND_VALUES;
          v1::SortHeader h;
          h.set_dtype(dtype);
          h.set_descending(descending);
          h.set_output(output);
          if (with_values) h.set_values_dtype(values_dtype);
          SortOut streamed, returned, kept;
          ASSERT_TRUE(SortCall(*stub_, h, &keys, with_values ? &values : nullptr, &streamed).ok());
          h.mutable_resident()->set_values(keys_id);
          if (with_values) h.mutable_resident()->set_sort_values(values_id);
          grpc::Status s = SortCall(*stub_, h, nullptr, nullptr, &returned);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_EQ(returned.keys, streamed.keys);
          EXPECT_EQ(returned.values, streamed.values);
          EXPECT_EQ(returned.indices, streamed.indices);
          EXPECT_EQ(returned.last.element_count(), n);
          h.mutable_resident()->set_keep(true);
          s = SortCall(*stub_, h, nullptr, nullptr, &kept);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_TRUE(kept.keys.empty() && kept.values.empty() && kept.indices.empty());
          ASSERT_EQ(kept.last.has_keys_array(), output != v1::SORT_OUTPUT_INDICES);
          ASSERT_EQ(kept.last.has_values_array(), with_values);
          if (kept.last.has_keys_array()) {
            EXPECT_EQ(kept.last.keys_array().dtype(), dtype);
            EXPECT_EQ(kept.last.keys_array().bytes(), n * SizeOf(dtype));
            EXPECT_EQ(GetAll(*stub_, kept.last.keys_array().id()), streamed.keys);
          }
          if (with_values) {
            EXPECT_EQ(kept.last.values_array().dtype(), values_dtype);
            EXPECT_EQ(GetAll(*stub_, kept.last.values_array().id()), streamed.values);
          }
          if (kept.last.has_indices_array()) {
            EXPECT_EQ(GetAll(*stub_, kept.last.indices_array().id()), streamed.indices);
          }
        }
      }
      v1::ArrayInfo k, v;
      k.set_id(keys_id);
      v.set_id(values_id);
      EXPECT_EQ(GetAll(*stub_, k.id()), keys);  // the inputs stay as they were
      EXPECT_EQ(GetAll(*stub_, v.id()), values);
    }
  }
}

// Wide keys with narrow sort values: only the values are widened.
TEST_F(ResidentNarrowTest, SortOfWideKeysMovesNarrowValuesAsTheStreamedCall) {
  const uint64_t n = 3 * kChunk / 2 + 5;
  const std::string keys = RandomArray(v1::DTYPE_FLOAT64, n, 4300), values = Elements(v1::DTYPE_FLOAT16, n, 4301);
  v1::SortHeader h;
  h.set_dtype(v1::DTYPE_FLOAT64);
  h.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
  h.set_values_dtype(v1::DTYPE_FLOAT16);
  SortOut streamed, returned;
  ASSERT_TRUE(SortCall(*stub_, h, &keys, &values, &streamed).ok());
  h.mutable_resident()->set_values(PutId(*stub_, v1::DTYPE_FLOAT64, keys));
  h.mutable_resident()->set_sort_values(PutId(*stub_, v1::DTYPE_FLOAT16, values));
  const grpc::Status s = SortCall(*stub_, h, nullptr, nullptr, &returned);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(returned.keys, streamed.keys);
  EXPECT_EQ(returned.values, streamed.values);
  EXPECT_NE(returned.values, values);  // moved
}

// The widened copies count against the budget: an int8 array of a quarter of it cannot be
// compacted (its int32 carrier is the whole budget), and the refusal keeps nothing.
TEST_F(ResidentNarrowTest, WidenedCopiesCountAgainstTheBudget) {
  const uint64_t budget = 64 * 1024;
  TestServer server{ResidentOptions(budget)};
  auto stub = server.stub();
  const std::string data = Elements(v1::DTYPE_INT8, budget / 4, 4400);
  const std::string id = PutId(*stub, v1::DTYPE_INT8, data);
  v1::CompactHeader h = PredicateHead(v1::DTYPE_INT8, v1::COMPACT_OUTPUT_VALUES);
  h.mutable_resident()->set_values(id);
  h.mutable_resident()->set_keep(true);
  CompactOut r;
  const grpc::Status s = CompactCall(*stub, h, nullptr, nullptr, &r);
  ExpectRefused(s, grpc::StatusCode::RESOURCE_EXHAUSTED, {"--resident-bytes"});
  grpc::ClientContext ctx;
  v1::ListArraysResponse list;
  ASSERT_TRUE(stub->ListArrays(&ctx, v1::ListArraysRequest(), &list).ok());
  EXPECT_EQ(list.arrays_size(), 1);  // the input only
  EXPECT_EQ(list.used_bytes(), data.size());
  // A smaller array fits, widened copy and all.
  const std::string small = Elements(v1::DTYPE_INT8, budget / 8, 4401);
  h.mutable_resident()->set_values(PutId(*stub, v1::DTYPE_INT8, small));
  const grpc::Status ok = CompactCall(*stub, h, nullptr, nullptr, &r);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

}  // namespace gpuscan::testing::resident_narrow

namespace gpuscan::testing::resident_narrow {

// The refusals of narrow calls that need arrays on the server, each naming the field and value.
TEST_F(ResidentNarrowTest, RefusalsNameTheFieldAndValue) {
  const uint64_t n = 100;
  const std::string i8 = PutId(*stub_, v1::DTYPE_INT8, Elements(v1::DTYPE_INT8, n, 4500));
  const std::string u8 = PutId(*stub_, v1::DTYPE_UINT8, Elements(v1::DTYPE_UINT8, n, 4501));
  const std::string i16 = PutId(*stub_, v1::DTYPE_INT16, Elements(v1::DTYPE_INT16, n, 4502));
  const std::string short_u8 = PutId(*stub_, v1::DTYPE_UINT8, Elements(v1::DTYPE_UINT8, n - 1, 4503));
  CompactOut c;
  SortOut s;
  {  // flags of two bytes an element
    v1::CompactHeader h = PredicateHead(v1::DTYPE_INT8, v1::COMPACT_OUTPUT_VALUES);
    h.set_use_flags(true);
    h.mutable_resident()->set_values(i8);
    h.mutable_resident()->set_flags(i16);
    ExpectRefused(CompactCall(*stub_, h, nullptr, nullptr, &c), grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.resident.flags", "DTYPE_INT16", "one byte an element"});
    h.mutable_resident()->set_flags(short_u8);  // one flag short
    ExpectRefused(CompactCall(*stub_, h, nullptr, nullptr, &c), grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.resident.flags", "99 elements", "100"});
  }
  {  // the header's dtype is not the array's
    v1::CompactHeader h = PredicateHead(v1::DTYPE_UINT8, v1::COMPACT_OUTPUT_VALUES);
    h.mutable_resident()->set_values(i8);
    ExpectRefused(CompactCall(*stub_, h, nullptr, nullptr, &c), grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.dtype DTYPE_UINT8 differs from the resident array's DTYPE_INT8"});
  }
  {  // sort values of another dtype than values_dtype
    v1::SortHeader h;
    h.set_dtype(v1::DTYPE_INT8);
    h.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
    h.set_values_dtype(v1::DTYPE_INT8);
    h.mutable_resident()->set_values(i8);
    h.mutable_resident()->set_sort_values(u8);
    ExpectRefused(SortCall(*stub_, h, nullptr, nullptr, &s), grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.resident.sort_values", "DTYPE_UINT8", "header.values_dtype is DTYPE_INT8"});
  }
}

// --max-sort-bytes counts a narrow sort's keys and values at their own size, as a streamed call's.
TEST(ResidentNarrowSortBudget, MaxSortBytesAppliesAsToTheStreamedCall) {
  server::ServerOptions o = ResidentOptions();
  o.max_sort_bytes = 3000;
  TestServer server{o};
  auto stub = server.stub();
  v1::SortHeader h;
  h.set_dtype(v1::DTYPE_INT16);
  h.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
  h.set_values_dtype(v1::DTYPE_UINT8);
  for (uint64_t n : {uint64_t{1000}, uint64_t{1001}}) {  // 3 bytes an element: 3000 fits, 3003 does not
    const std::string keys = Elements(v1::DTYPE_INT16, n, 4600), values = Elements(v1::DTYPE_UINT8, n, 4601);
    v1::SortHeader r = h;
    r.mutable_resident()->set_values(PutId(*stub, v1::DTYPE_INT16, keys));
    r.mutable_resident()->set_sort_values(PutId(*stub, v1::DTYPE_UINT8, values));
    SortOut streamed, resident;
    const grpc::Status ss = SortCall(*stub, h, &keys, &values, &streamed);
    const grpc::Status rs = SortCall(*stub, r, nullptr, nullptr, &resident);
    if (n == 1000) {
      ASSERT_TRUE(ss.ok() && rs.ok()) << ss.error_message() << " / " << rs.error_message();
      EXPECT_EQ(resident.keys, streamed.keys);
      EXPECT_EQ(resident.values, streamed.values);
    } else {
      EXPECT_EQ(ss.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      ExpectRefused(rs, grpc::StatusCode::RESOURCE_EXHAUSTED, {"3003 bytes", "--max-sort-bytes=3000"});
    }
  }
}

}  // namespace gpuscan::testing::resident_narrow
