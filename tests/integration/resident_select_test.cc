// Compact, Histogram and Sort on resident arrays (header.resident), through the raw stub against
// an in-process server: every result bit for bit the streamed call's, on random data (floats with
// NaN, -0 and +0) and sizes around the chunk; kept results equal the streamed ones through
// GetArray; a chain of calls that keeps its results on the server; the refusals that need an array.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

const v1::DType kDTypes[] = {v1::DTYPE_INT32,  v1::DTYPE_INT64,   v1::DTYPE_UINT32,
                             v1::DTYPE_UINT64, v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64};
// Compact and Sort take the narrow ones as they are (the server runs them as their carriers).
const v1::DType kSelectDTypes[] = {v1::DTYPE_INT32,   v1::DTYPE_INT64, v1::DTYPE_UINT32, v1::DTYPE_UINT64,
                                   v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64, v1::DTYPE_INT8,  v1::DTYPE_UINT8,
                                   v1::DTYPE_INT16,   v1::DTYPE_UINT16,  v1::DTYPE_FLOAT16};

// Around the server's chunk (kChunk bytes): 0, 1, a chunk less one, one, one more, a few chunks.
std::vector<uint64_t> Sizes(v1::DType dtype) {
  const uint64_t per = kChunk / SizeOf(dtype);
  return {0, 1, per - 1, per, per + 1, 3 * per - 72};
}

bool IsFloat(v1::DType d) { return d == v1::DTYPE_FLOAT32 || d == v1::DTYPE_FLOAT64 || d == v1::DTYPE_FLOAT16; }

// RandomArray with, for floats, NaN, -0, +0 and -inf every few elements.
std::string WithSpecials(v1::DType dtype, uint64_t n, uint32_t seed) {
  std::string s = RandomArray(dtype, n, seed);
  const double specials[] = {std::nan(""), -0.0, 0.0, -std::numeric_limits<double>::infinity()};
  for (uint64_t i = 3; IsFloat(dtype) && dtype != v1::DTYPE_FLOAT16 && i < n; i += 5) {  // float16: every pattern
    const double v = specials[i % 4];
    if (dtype == v1::DTYPE_FLOAT32) {
      const float f = static_cast<float>(v);
      std::memcpy(&s[i * 4], &f, 4);
    } else {
      std::memcpy(&s[i * 8], &v, 8);
    }
  }
  return s;
}

// One byte an element, about half of them zero.
std::string Flags(uint64_t n, uint32_t seed) {
  std::string f = RandomBytes(n, seed);
  for (char& c : f) c = (c & 1) ? static_cast<char>(c | 2) : 0;
  return f;
}

// ---- the raw stub's Compact, Histogram and Sort: streamed when the data is given (chunks of
// kChunk bytes), else with only the header; results concatenated, the offsets checked.
struct RawCompactResult {
  std::string values, indices;
  v1::CompactResponse last;
};

grpc::Status Compact(v1::GpuScan::Stub& stub, const v1::CompactHeader& header, const std::string* values,
                     const std::string* flags, RawCompactResult* r, const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto stream = stub.Compact(&ctx);
  v1::CompactRequest req;
  *req.mutable_header() = header;
  stream->Write(req);
  if (values) {
    const size_t size = SizeOf(header.dtype()), per = kChunk / size, n = values->size() / size;
    for (size_t first = 0; first < n; first += per) {
      v1::CompactRequest chunk;
      chunk.set_values(values->substr(first * size, per * size));
      if (flags) chunk.set_flags(flags->substr(first, per));
      stream->Write(chunk);
    }
  }
  stream->WritesDone();
  *r = {};
  v1::CompactResponse resp;
  while (stream->Read(&resp)) {
    if (!resp.values().empty() || !resp.indices().empty()) {
      const uint64_t so_far = header.output() == v1::COMPACT_OUTPUT_INDICES ? r->indices.size() / 8
                                                                           : r->values.size() / SizeOf(header.dtype());
      EXPECT_EQ(resp.kept_offset(), so_far);
    }
    r->values += resp.values();
    r->indices += resp.indices();
    r->last = resp;
  }
  return stream->Finish();
}

grpc::Status Histogram(v1::GpuScan::Stub& stub, const v1::HistogramHeader& header, const std::string* data,
                       v1::HistogramResponse* resp, const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto writer = stub.Histogram(&ctx, resp);
  v1::HistogramRequest req;
  *req.mutable_header() = header;
  writer->Write(req);
  for (size_t at = 0; data && at < data->size(); at += kChunk) {
    v1::HistogramRequest chunk;
    chunk.set_data(data->substr(at, kChunk));
    writer->Write(chunk);
  }
  writer->WritesDone();
  return writer->Finish();
}

struct RawSortResult {
  std::string keys, values, indices;
  v1::SortResponse last;
};

grpc::Status Sort(v1::GpuScan::Stub& stub, const v1::SortHeader& header, const std::string* keys,
                  const std::string* values, RawSortResult* r, const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto stream = stub.Sort(&ctx);
  v1::SortRequest req;
  *req.mutable_header() = header;
  stream->Write(req);
  if (keys) {
    const size_t ks = SizeOf(header.dtype()), per = kChunk / 8, n = keys->size() / ks;
    for (size_t first = 0; first < n; first += per) {
      v1::SortRequest chunk;
      chunk.set_keys(keys->substr(first * ks, per * ks));
      if (values) chunk.set_values(values->substr(first * SizeOf(header.values_dtype()), per * SizeOf(header.values_dtype())));
      stream->Write(chunk);
    }
  }
  stream->WritesDone();
  *r = {};
  v1::SortResponse resp;
  while (stream->Read(&resp)) {
    if (!resp.keys().empty() || !resp.indices().empty()) {
      EXPECT_EQ(resp.offset(), resp.keys().empty() ? r->indices.size() / 8 : r->keys.size() / SizeOf(header.dtype()));
    }
    r->keys += resp.keys();
    r->values += resp.values();
    r->indices += resp.indices();
    r->last = resp;
  }
  return stream->Finish();
}

v1::Resident* Res(v1::CompactHeader* h, const std::string& id) {
  h->mutable_resident()->set_values(id);
  return h->mutable_resident();
}

v1::CompactHeader CompactHead(v1::DType dtype, bool use_flags, v1::CompactOutput output) {
  v1::CompactHeader h;
  h.set_dtype(dtype);
  h.set_output(output);
  if (use_flags) {
    h.set_use_flags(true);
    return h;
  }
  v1::Predicate* p = h.mutable_predicate();
  p->set_op(v1::PREDICATE_OP_GT);
  if (IsFloat(dtype)) {
    p->mutable_threshold()->set_float_value(0.0);
  } else if (dtype == v1::DTYPE_UINT8 || dtype == v1::DTYPE_UINT16 || dtype == v1::DTYPE_UINT32 ||
             dtype == v1::DTYPE_UINT64) {
    p->mutable_threshold()->set_uint_value(1ull << (8 * SizeOf(dtype) - 1));  // about half kept
  } else {
    p->mutable_threshold()->set_int_value(0);
  }
  return h;
}

class ResidentSelectTest : public ::testing::Test {
 protected:
  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

TEST_F(ResidentSelectTest, CompactEqualsTheStreamedCallBitForBitAndKeepsExactly) {
  uint32_t seed = 300;
  const v1::CompactOutput outputs[] = {v1::COMPACT_OUTPUT_VALUES, v1::COMPACT_OUTPUT_INDICES,
                                       v1::COMPACT_OUTPUT_VALUES_AND_INDICES};
  for (v1::DType dtype : kSelectDTypes) {
    for (uint64_t n : Sizes(dtype)) {
      const std::string data = WithSpecials(dtype, n, seed++), flags = Flags(n, seed++);
      const std::string id = PutId(*stub_, dtype, data);
      const std::string flags_id = PutId(*stub_, seed % 2 ? v1::DTYPE_UINT8 : v1::DTYPE_INT8, flags);
      for (bool use_flags : {false, true}) {
        for (v1::CompactOutput output : outputs) {
          SCOPED_TRACE(::testing::Message() << v1::DType_Name(dtype) << " n=" << n << " flags=" << use_flags
                                          << " output=" << output);
          v1::CompactHeader h = CompactHead(dtype, use_flags, output);
          RawCompactResult streamed, resident, kept;
          ASSERT_TRUE(Compact(*stub_, h, &data, use_flags ? &flags : nullptr, &streamed).ok());
          if (use_flags) Res(&h, id)->set_flags(flags_id);
          Res(&h, id);
          ASSERT_TRUE(Compact(*stub_, h, nullptr, nullptr, &resident).ok());
          EXPECT_EQ(resident.values, streamed.values);
          EXPECT_EQ(resident.indices, streamed.indices);
          EXPECT_EQ(resident.last.kept_count(), streamed.last.kept_count());
          EXPECT_EQ(resident.last.element_count(), n);
          EXPECT_FALSE(resident.last.has_values_array() || resident.last.has_indices_array());
          Res(&h, id)->set_keep(true);
          const grpc::Status s = Compact(*stub_, h, nullptr, nullptr, &kept);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_TRUE(kept.values.empty() && kept.indices.empty());
          EXPECT_EQ(kept.last.kept_count(), streamed.last.kept_count());
          const bool want_values = output != v1::COMPACT_OUTPUT_INDICES;
          const bool want_indices = output != v1::COMPACT_OUTPUT_VALUES;
          ASSERT_EQ(kept.last.has_values_array(), want_values);
          ASSERT_EQ(kept.last.has_indices_array(), want_indices);
          if (want_values) {
            EXPECT_EQ(kept.last.values_array().dtype(), dtype);
            EXPECT_EQ(kept.last.values_array().element_count(), streamed.last.kept_count());
            EXPECT_EQ(GetAll(*stub_, kept.last.values_array().id()), streamed.values);
          }
          if (want_indices) {
            EXPECT_EQ(kept.last.indices_array().dtype(), v1::DTYPE_INT64);
            EXPECT_EQ(kept.last.indices_array().bytes(), streamed.indices.size());  // cut to the kept count
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

TEST_F(ResidentSelectTest, HistogramEqualsTheStreamedCallBitForBit) {
  uint32_t seed = 500;
  for (v1::DType dtype : kDTypes) {
    for (uint64_t n : Sizes(dtype)) {
      const std::string data = WithSpecials(dtype, n, seed++);
      const std::string id = PutId(*stub_, dtype, data);
      v1::HistogramHeader bins, edges;
      const bool is_float = IsFloat(dtype);
      bins.set_dtype(dtype);
      bins.set_bins(37);
      bins.set_lo(is_float ? -0.75 : -1e9);
      bins.set_hi(is_float ? 0.5 : 3e9);
      edges.set_dtype(dtype);
      for (double e : {-0.9, -0.25, 0.0, 0.0, 0.125, 0.8}) edges.add_edges(is_float ? e : e * 4e9);
      for (v1::HistogramHeader h : {bins, edges}) {
        SCOPED_TRACE(::testing::Message() << v1::DType_Name(dtype) << " n=" << n << " edges=" << h.edges_size());
        v1::HistogramResponse streamed, resident;
        ASSERT_TRUE(Histogram(*stub_, h, &data, &streamed).ok());
        h.mutable_resident()->set_values(id);
        const grpc::Status s = Histogram(*stub_, h, nullptr, &resident);
        ASSERT_TRUE(s.ok()) << s.error_message();
        EXPECT_EQ(resident.counts(), streamed.counts());
        EXPECT_EQ(resident.edges(), streamed.edges());
        EXPECT_EQ(resident.below(), streamed.below());
        EXPECT_EQ(resident.above(), streamed.above());
        EXPECT_EQ(resident.nan_count(), streamed.nan_count());
        EXPECT_EQ(resident.element_count(), n);
        if (is_float && n > 10) EXPECT_GT(resident.nan_count(), 0u);
      }
    }
  }
}

TEST_F(ResidentSelectTest, HistogramOfNarrowDtypesEqualsTheStreamedCall) {
  uint32_t seed = 600;
  for (v1::DType dtype : {v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_INT16, v1::DTYPE_UINT16, v1::DTYPE_FLOAT16}) {
    const size_t size = dtype == v1::DTYPE_INT8 || dtype == v1::DTYPE_UINT8 ? 1 : 2;
    for (uint64_t n : {0ull, 1ull, 4095ull, 4096ull, 9001ull}) {
      const std::string data = RandomBytes(n * size, seed++);
      v1::HistogramHeader h;
      h.set_dtype(dtype);
      h.set_bins(19);
      h.set_lo(-100);
      h.set_hi(200);
      v1::HistogramResponse streamed, resident;
      ASSERT_TRUE(Histogram(*stub_, h, &data, &streamed).ok());
      h.mutable_resident()->set_values(PutId(*stub_, dtype, data));
      const grpc::Status s = Histogram(*stub_, h, nullptr, &resident);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resident.counts(), streamed.counts()) << v1::DType_Name(dtype) << " n=" << n;
      EXPECT_EQ(resident.below(), streamed.below());
      EXPECT_EQ(resident.above(), streamed.above());
      EXPECT_EQ(resident.nan_count(), streamed.nan_count());
      EXPECT_EQ(resident.element_count(), n);
    }
  }
}

TEST_F(ResidentSelectTest, SortEqualsTheStreamedCallBitForBitAndNeverSortsInPlace) {
  uint32_t seed = 700;
  const v1::SortOutput outputs[] = {v1::SORT_OUTPUT_KEYS, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::SORT_OUTPUT_INDICES,
                                    v1::SORT_OUTPUT_KEYS_AND_INDICES};
  for (v1::DType dtype : kSelectDTypes) {
    const v1::DType values_dtype = kSelectDTypes[(seed / 7) % 11];
    for (uint64_t n : Sizes(dtype)) {
      const std::string keys = WithSpecials(dtype, n, seed++), values = WithSpecials(values_dtype, n, seed++);
      const std::string keys_id = PutId(*stub_, dtype, keys), values_id = PutId(*stub_, values_dtype, values);
      for (bool descending : {false, true}) {
        for (v1::SortOutput output : outputs) {
          SCOPED_TRACE(::testing::Message() << v1::DType_Name(dtype) << " n=" << n << " descending=" << descending
                                          << " output=" << output);
          const bool with_values = output == v1::SORT_OUTPUT_KEYS_AND_VALUES;
          v1::SortHeader h;
          h.set_dtype(dtype);
          h.set_descending(descending);
          h.set_output(output);
          if (with_values) h.set_values_dtype(values_dtype);
          RawSortResult streamed, resident, kept;
          ASSERT_TRUE(Sort(*stub_, h, &keys, with_values ? &values : nullptr, &streamed).ok());
          h.mutable_resident()->set_values(keys_id);
          if (with_values) h.mutable_resident()->set_sort_values(values_id);
          const grpc::Status s = Sort(*stub_, h, nullptr, nullptr, &resident);
          ASSERT_TRUE(s.ok()) << s.error_message();
          EXPECT_EQ(resident.keys, streamed.keys);
          EXPECT_EQ(resident.values, streamed.values);
          EXPECT_EQ(resident.indices, streamed.indices);
          EXPECT_EQ(resident.last.element_count(), n);
          h.mutable_resident()->set_keep(true);
          ASSERT_TRUE(Sort(*stub_, h, nullptr, nullptr, &kept).ok());
          EXPECT_TRUE(kept.keys.empty() && kept.values.empty() && kept.indices.empty());
          const bool want_keys = output != v1::SORT_OUTPUT_INDICES;
          const bool want_indices = output == v1::SORT_OUTPUT_INDICES || output == v1::SORT_OUTPUT_KEYS_AND_INDICES;
          ASSERT_EQ(kept.last.has_keys_array(), want_keys);
          ASSERT_EQ(kept.last.has_values_array(), with_values);
          ASSERT_EQ(kept.last.has_indices_array(), want_indices);
          if (want_keys) {
            EXPECT_EQ(kept.last.keys_array().dtype(), dtype);
            EXPECT_EQ(GetAll(*stub_, kept.last.keys_array().id()), streamed.keys);
          }
          if (with_values) {
            EXPECT_EQ(kept.last.values_array().dtype(), values_dtype);
            EXPECT_EQ(GetAll(*stub_, kept.last.values_array().id()), streamed.values);
          }
          if (want_indices) {
            EXPECT_EQ(kept.last.indices_array().dtype(), v1::DTYPE_INT64);
            EXPECT_EQ(kept.last.indices_array().element_count(), n);
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

// Compact keep -> Sort keep -> Histogram: no data crosses the wire until the counts, which equal
// the streamed chain's.
TEST_F(ResidentSelectTest, ChainOfKeptResultsNeverLeavesTheServer) {
  const v1::DType dtype = v1::DTYPE_FLOAT32;
  const std::string data = WithSpecials(dtype, 5000, 900);
  v1::CompactHeader ch = CompactHead(dtype, false, v1::COMPACT_OUTPUT_VALUES);
  v1::SortHeader sh;
  sh.set_dtype(dtype);
  sh.set_descending(true);
  v1::HistogramHeader hh;
  hh.set_dtype(dtype);
  hh.set_bins(10);
  hh.set_lo(0);
  hh.set_hi(1);
  RawCompactResult compacted;
  RawSortResult sorted;
  v1::HistogramResponse streamed, resident;
  ASSERT_TRUE(Compact(*stub_, ch, &data, nullptr, &compacted).ok());
  ASSERT_TRUE(Sort(*stub_, sh, &compacted.values, nullptr, &sorted).ok());
  ASSERT_TRUE(Histogram(*stub_, hh, &sorted.keys, &streamed).ok());

  Res(&ch, PutId(*stub_, dtype, data))->set_keep(true);
  ASSERT_TRUE(Compact(*stub_, ch, nullptr, nullptr, &compacted).ok());
  EXPECT_TRUE(compacted.values.empty());
  sh.mutable_resident()->set_values(compacted.last.values_array().id());
  sh.mutable_resident()->set_keep(true);
  ASSERT_TRUE(Sort(*stub_, sh, nullptr, nullptr, &sorted).ok());
  EXPECT_TRUE(sorted.keys.empty());
  hh.mutable_resident()->set_values(sorted.last.keys_array().id());
  ASSERT_TRUE(Histogram(*stub_, hh, nullptr, &resident).ok());
  EXPECT_EQ(resident.counts(), streamed.counts());
  EXPECT_EQ(resident.below(), streamed.below());
  EXPECT_EQ(resident.above(), streamed.above());
  EXPECT_EQ(resident.element_count(), compacted.last.kept_count());
  EXPECT_GT(resident.element_count(), 1000u);
}

TEST_F(ResidentSelectTest, RefusalsNameTheField) {
  const std::string data = WithSpecials(v1::DTYPE_INT32, 100, 1000);
  const std::string id = PutId(*stub_, v1::DTYPE_INT32, data);
  const std::string flags_id = PutId(*stub_, v1::DTYPE_UINT8, Flags(100, 1001));
  const std::string short_flags_id = PutId(*stub_, v1::DTYPE_UINT8, Flags(99, 1002));
  const std::string int32_id = PutId(*stub_, v1::DTYPE_INT32, WithSpecials(v1::DTYPE_INT32, 100, 1003));
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  RawCompactResult c;
  v1::CompactHeader flagged = CompactHead(v1::DTYPE_INT32, true, v1::COMPACT_OUTPUT_VALUES);
  Res(&flagged, id);
  ExpectRefused(Compact(*stub_, flagged, nullptr, nullptr, &c), kInvalid, {"header.resident.flags: required"});
  Res(&flagged, id)->set_flags(int32_id);
  ExpectRefused(Compact(*stub_, flagged, nullptr, nullptr, &c), kInvalid,
                {"header.resident.flags", "DTYPE_INT32", "one byte an element"});
  Res(&flagged, id)->set_flags(short_flags_id);
  ExpectRefused(Compact(*stub_, flagged, nullptr, nullptr, &c), kInvalid,
                {"header.resident.flags", "has 99 elements", "header.resident.values has 100"});
  v1::CompactHeader predicate = CompactHead(v1::DTYPE_INT32, false, v1::COMPACT_OUTPUT_VALUES);
  Res(&predicate, id)->set_flags(flags_id);
  ExpectRefused(Compact(*stub_, predicate, nullptr, nullptr, &c), kInvalid,
                {"header.resident.flags: this call takes no such input"});
  v1::CompactHeader narrow = CompactHead(v1::DTYPE_INT8, false, v1::COMPACT_OUTPUT_VALUES);
  Res(&narrow, PutId(*stub_, v1::DTYPE_UINT8, "\x01\x02"));  // narrow arrays are served, in their own dtype
  ExpectRefused(Compact(*stub_, narrow, nullptr, nullptr, &c), kInvalid,
                {"header.dtype DTYPE_INT8 differs from the resident array's DTYPE_UINT8"});
  {  // inline data in the header's request
    grpc::ClientContext ctx;
    auto stream = stub_->Compact(&ctx);
    v1::CompactRequest req;
    predicate.mutable_resident()->clear_flags();
    *req.mutable_header() = predicate;
    req.set_values(data.substr(0, 8));
    stream->Write(req);
    stream->WritesDone();
    while (stream->Read(&c.last)) {
    }
    ExpectRefused(stream->Finish(), kInvalid, {"values: request 0 carries 8 bytes", "header.resident"});
  }

  RawSortResult r;
  v1::SortHeader sh;
  sh.set_dtype(v1::DTYPE_INT32);
  sh.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
  sh.set_values_dtype(v1::DTYPE_FLOAT64);
  sh.mutable_resident()->set_values(id);
  ExpectRefused(Sort(*stub_, sh, nullptr, nullptr, &r), kInvalid, {"header.resident.sort_values: required"});
  sh.mutable_resident()->set_sort_values(int32_id);
  ExpectRefused(Sort(*stub_, sh, nullptr, nullptr, &r), kInvalid,
                {"header.resident.sort_values", "is DTYPE_INT32; header.values_dtype is DTYPE_FLOAT64"});
  sh.set_output(v1::SORT_OUTPUT_KEYS);
  sh.clear_values_dtype();
  ExpectRefused(Sort(*stub_, sh, nullptr, nullptr, &r), kInvalid,
                {"header.resident.sort_values: this call takes no such input"});
  sh.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
  sh.set_values_dtype(v1::DTYPE_UINT16);  // narrow values are served, in their own dtype
  ExpectRefused(Sort(*stub_, sh, nullptr, nullptr, &r), kInvalid,
                {"header.resident.sort_values", "is DTYPE_INT32; header.values_dtype is DTYPE_UINT16"});

  v1::HistogramResponse hr;
  v1::HistogramHeader hh;
  hh.set_dtype(v1::DTYPE_INT32);
  hh.set_bins(4);
  hh.set_lo(0);
  hh.set_hi(1);
  hh.mutable_resident()->set_values(id);
  hh.mutable_resident()->set_keep(true);
  ExpectRefused(Histogram(*stub_, hh, nullptr, &hr), kInvalid, {"header.resident.keep", "answers a value"});
  hh.mutable_resident()->set_keep(false);
  hh.set_dtype(v1::DTYPE_FLOAT32);
  ExpectRefused(Histogram(*stub_, hh, nullptr, &hr), kInvalid, {"header.dtype DTYPE_FLOAT32 differs"});
  hh.set_dtype(v1::DTYPE_INT32);
  {  // inline data in the header's request
    grpc::ClientContext ctx;
    auto writer = stub_->Histogram(&ctx, &hr);
    v1::HistogramRequest req;
    *req.mutable_header() = hh;
    req.set_data(data.substr(0, 4));
    writer->Write(req);
    writer->WritesDone();
    ExpectRefused(writer->Finish(), kInvalid, {"data: request 0 carries 4 bytes", "header.resident"});
  }

  // Another tenant's ids: NOT_FOUND, as unknown ones.
  const auto kNotFound = grpc::StatusCode::NOT_FOUND;
  ExpectRefused(Histogram(*stub_, hh, nullptr, &hr, "other"), kNotFound, {"header.resident.values"});
  ExpectRefused(Compact(*stub_, predicate, nullptr, nullptr, &c, "other"), kNotFound, {"header.resident.values"});
  const std::string own_id = PutId(*stub_, v1::DTYPE_INT32, data, "other");
  Res(&flagged, own_id)->set_flags(flags_id);
  ExpectRefused(Compact(*stub_, flagged, nullptr, nullptr, &c, "other"), kNotFound, {"header.resident.flags"});
  sh.set_values_dtype(v1::DTYPE_INT32);
  sh.mutable_resident()->set_values(own_id);
  sh.mutable_resident()->set_sort_values(int32_id);
  ExpectRefused(Sort(*stub_, sh, nullptr, nullptr, &r, "other"), kNotFound, {"header.resident.sort_values"});
}

}  // namespace
}  // namespace gpuscan::testing
