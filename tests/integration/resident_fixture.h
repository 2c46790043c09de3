// Helpers of the resident-array tests (resident_*_test.cc): an in-process server with a budget,
// random arrays, and the raw stub's Put, Get, Scan and Reduce.
#pragma once

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_server.h"

namespace gpuscan::testing::resident {

inline constexpr uint64_t kChunk = 4096;  // the server's chunk: small, so arrays cross many

inline server::ServerOptions ResidentOptions(uint64_t budget = uint64_t{64} << 20) {
  server::ServerOptions o;
  o.chunk_bytes = kChunk;
  o.resident_bytes = budget;
  return o;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

inline size_t SizeOf(v1::DType d) {
  switch (d) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_UINT8: return 1;
    case v1::DTYPE_INT16:
    case v1::DTYPE_UINT16:
    case v1::DTYPE_FLOAT16: return 2;
    case v1::DTYPE_INT64:
    case v1::DTYPE_UINT64:
    case v1::DTYPE_FLOAT64: return 8;
    default: return 4;
  }
}

// Floats kept finite and small, so sums stay meaningful (the bits still compared exactly).
inline std::string RandomArray(v1::DType dtype, uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s;
  if (dtype == v1::DTYPE_FLOAT32) {
    std::vector<float> v(n);
    for (float& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
    s.assign(reinterpret_cast<const char*>(v.data()), n * 4);
  } else if (dtype == v1::DTYPE_FLOAT64) {
    std::vector<double> v(n);
    for (double& x : v) x = std::uniform_real_distribution<double>(-1, 1)(rng);
    s.assign(reinterpret_cast<const char*>(v.data()), n * 8);
  } else {  // integers, and float16's every pattern (NaN and infinities among them)
    s = RandomBytes(n * SizeOf(dtype), seed);
  }
  return s;
}

inline void Tenant(grpc::ClientContext* ctx, const std::string& tenant) {
  if (!tenant.empty()) ctx->AddMetadata("gpuscan-tenant", tenant);
}

inline grpc::Status Put(v1::GpuScan::Stub& stub, v1::DType dtype, const std::string& data, v1::ArrayInfo* info,
                 const std::string& tenant = "", bool declare = true, uint64_t ttl_ms = 0) {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto writer = stub.PutArray(&ctx, info);
  v1::PutArrayRequest req;
  req.mutable_header()->set_dtype(dtype);
  if (declare) req.mutable_header()->set_element_count(data.size() / SizeOf(dtype));
  req.mutable_header()->set_ttl_ms(ttl_ms);
  req.mutable_header()->set_label("test");
  writer->Write(req);
  for (size_t at = 0; at < data.size(); at += kChunk) {
    v1::PutArrayRequest chunk;
    chunk.set_data(data.substr(at, kChunk));
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

inline grpc::Status Get(v1::GpuScan::Stub& stub, const std::string& id, std::string* data, const std::string& tenant = "",
                 uint64_t offset = 0, std::optional<uint64_t> count = std::nullopt) {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  v1::GetArrayRequest req;
  req.set_id(id);
  req.set_offset(offset);
  if (count) req.set_count(*count);
  auto reader = stub.GetArray(&ctx, req);
  v1::GetArrayResponse resp;
  data->clear();
  while (reader->Read(&resp)) *data += resp.data();
  return reader->Finish();
}

// The rest of a call answering ScanResponses (Scan, SegmentedScan, Scan2D) once its requests are
// written: the data, the kept array's info when asked for and sent, and the status.
template <class Stream>
grpc::Status FinishScanStream(Stream& stream, std::string* out, v1::ArrayInfo* kept) {
  stream.WritesDone();
  v1::ScanResponse resp;
  out->clear();
  while (stream.Read(&resp)) {
    *out += resp.data();
    if (kept && resp.has_array()) *kept = resp.array();
  }
  return stream.Finish();
}

// A Scan: streamed when `data` is given, else on the resident `id`; the result's data or kept info.
inline grpc::Status Scan(v1::GpuScan::Stub& stub, v1::ScanHeader header, const std::string* data, std::string* out,
                  v1::ArrayInfo* kept = nullptr, const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto stream = stub.Scan(&ctx);
  v1::ScanRequest req;
  *req.mutable_header() = header;
  stream->Write(req);
  if (data) {
    for (size_t at = 0; at < data->size(); at += kChunk) {
      v1::ScanRequest chunk;
      chunk.set_data(data->substr(at, kChunk));
      stream->Write(chunk);
    }
  }
  return FinishScanStream(*stream, out, kept);
}

inline grpc::Status Reduce(v1::GpuScan::Stub& stub, v1::ReduceHeader header, const std::string* data, std::string* raw,
                    const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  v1::ReduceResponse resp;
  auto writer = stub.Reduce(&ctx, &resp);
  v1::ReduceRequest req;
  *req.mutable_header() = header;
  writer->Write(req);
  if (data) {
    for (size_t at = 0; at < data->size(); at += kChunk) {
      v1::ReduceRequest chunk;
      chunk.set_data(data->substr(at, kChunk));
      writer->Write(chunk);
    }
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  *raw = resp.raw_value();
  return s;
}

// The id of a new array of these bytes (no declared count: what arrives), the Put expected to
// succeed.
inline std::string PutId(v1::GpuScan::Stub& stub, v1::DType dtype, const std::string& data,
                         const std::string& tenant = "") {
  v1::ArrayInfo info;
  const grpc::Status s = Put(stub, dtype, data, &info, tenant, /*declare=*/false);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info.id();
}

// Array `id`'s bytes, the Get expected to succeed.
inline std::string GetAll(v1::GpuScan::Stub& stub, const std::string& id, const std::string& tenant = "") {
  std::string data;
  const grpc::Status s = Get(stub, id, &data, tenant);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return data;
}

// A refusal: its code, and a message that holds each of `parts` (the field, the value).
inline void ExpectRefused(const grpc::Status& s, grpc::StatusCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  for (const std::string& p : parts) EXPECT_NE(s.error_message().find(p), std::string::npos) << s.error_message();
}

}  // namespace gpuscan::testing::resident
