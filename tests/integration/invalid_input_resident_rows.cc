// The bad-input matrix: resident arrays (issue 56). Scan's and Reduce's header.resident, where
// the refusal needs no array on the server (those that need one, a dtype or count that differs,
// data sent with it, a range past the end, are in resident_test.cc), and the resident RPCs'
// own input: PutArray's header and chunks, GetArray's and DropArray's id, the tenant metadata.
#include <cstdint>
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {
namespace {

constexpr auto kNotFound = grpc::StatusCode::NOT_FOUND;

// An id of another run of the server: 24 bytes whose last 8 are not this run's epoch (8 random
// bytes: equal to these with chance 2^-64).
const std::string kOtherRunId(24, '\x5a');
std::string Hex5a(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "5a";
  return s;
}
const std::string kOtherRunHex = Hex5a(24);
// A 24-byte id whose last 8 bytes the runner makes this run's epoch (Row::same_epoch).
const std::string kThisRunId = std::string(16, '\x6b') + std::string(8, '\0');

template <class C>
C WithResident(C r, const std::string& values) {
  r.mutable_header()->mutable_resident()->set_values(values);
  return r;
}

// The row's call as tenant "t" x bytes (metadata gpuscan-tenant).
Row AsTenant(Row row, size_t bytes) {
  row.metadata.emplace_back("gpuscan-tenant", std::string(bytes, 't'));
  return row;
}

v1::PutArrayRequest PutHead(int dtype = v1::DTYPE_INT32) {
  v1::PutArrayRequest r;
  r.mutable_header()->set_dtype(static_cast<v1::DType>(dtype));
  return r;
}
v1::PutArrayRequest PutData(size_t bytes) {
  v1::PutArrayRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

Row GetRow(std::string name, const std::string& id, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"GetArray_" + std::move(name), Rpc::kGetArray};
  row.get.set_id(id);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}
Row DropRow(std::string name, const std::string& id, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"DropArray_" + std::move(name), Rpc::kDropArray};
  row.drop.set_id(id);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

// header.resident of Scan and Reduce: make(Tag<C>{}) builds the requests, for C = ScanRequest
// and ReduceRequest.
template <class Make>
void ForScanAndReduce(std::vector<Row>& rows, const std::string& name, grpc::StatusCode code,
                      const std::vector<std::string>& expect, Make make, bool same_epoch = false) {
  Row scan = MakeRow(name, make(Tag<v1::ScanRequest>{}), code, expect);
  Row reduce = MakeRow(name, make(Tag<v1::ReduceRequest>{}), code, expect);
  scan.same_epoch = reduce.same_epoch = same_epoch;
  rows.push_back(scan);
  rows.push_back(reduce);
}

void HeaderResidentRows(std::vector<Row>& rows) {
  ForScanAndReduce(
      rows, "ResidentUnknownId", kNotFound, {"header.resident.values 6b6b6b6b", "no such resident array"},
      [](auto t) { return std::vector{WithResident(Head<typename decltype(t)::type>(), kThisRunId)}; },
      /*same_epoch=*/true);
  ForScanAndReduce(rows, "ResidentIdOfAnotherRun", kNotFound,
                   {"header.resident.values " + kOtherRunHex, "the server restarted since this id was issued"},
                   [](auto t) { return std::vector{WithResident(Head<typename decltype(t)::type>(), kOtherRunId)}; });
  ForScanAndReduce(rows, "ResidentIdShort", kNotFound, {"header.resident.values 0102030405:", "no such resident array"},
                   [](auto t) {
                     return std::vector{WithResident(Head<typename decltype(t)::type>(), std::string("\x01\x02\x03\x04\x05"))};
                   });
  ForScanAndReduce(rows, "ResidentIdOddLength", kNotFound, {"header.resident.values " + kOtherRunHex + "5a:", "no such resident array"},
                   [](auto t) { return std::vector{WithResident(Head<typename decltype(t)::type>(), kOtherRunId + "\x5a")}; });
  ForScanAndReduce(rows, "ResidentValuesMissing", kInvalid, {"header.resident.values: required"}, [](auto t) {
    using C = typename decltype(t)::type;
    C r = Head<C>();
    r.mutable_header()->mutable_resident()->set_ttl_ms(5);  // set, but without values
    return std::vector{r};
  });
  {
    auto scan = ScanHead();
    scan.mutable_header()->mutable_resident()->set_keep(true);
    rows.push_back(MakeRow("ResidentKeepWithoutValues", std::vector{scan}, kInvalid,
                           {"header.resident.values: required", "a streamed input's result is not kept yet"}));
  }
  ForScanAndReduce(rows, "ResidentWithShm", kInvalid,
                   {"header.resident: cannot be combined with header.shared_memory"}, [](auto t) {
                     return std::vector{WithResident(WithShm(Head<typename decltype(t)::type>(), "in64"), kOtherRunId)};
                   });
  ForScanAndReduce(rows, "ResidentWithDeviceMemory", kInvalid,
                   {"header.resident: cannot be combined with header.device_memory"}, [](auto t) {
                     return std::vector{WithResident(WithDevice(Head<typename decltype(t)::type>()), kOtherRunId)};
                   });
  ForScanAndReduce(rows, "ResidentWithLanes", kInvalid, {"header.resident: cannot be combined with header.lanes"},
                   [](auto t) {
                     return std::vector{WithResident(WithLanes(Head<typename decltype(t)::type>(), 0, 2, 16), kOtherRunId)};
                   });
  // Narrow dtypes are served on resident arrays: such a call gets as far as looking the array up.
  ForScanAndReduce(rows, "ResidentNarrowDTypeIsServed", kNotFound,
                   {"header.resident.values " + kOtherRunHex, "the server restarted since this id was issued"},
                   [](auto t) {
                     return std::vector{WithResident(Head<typename decltype(t)::type>(v1::DTYPE_INT8), kOtherRunId)};
                   });
  ForScanAndReduce(rows, "ResidentLabelTooLong", kInvalid, {"header.resident.label has 129 bytes; at most 128"},
                   [](auto t) {
                     using C = typename decltype(t)::type;
                     C r = WithResident(Head<C>(), kOtherRunId);
                     r.mutable_header()->mutable_resident()->set_label(std::string(129, 'l'));
                     return std::vector{r};
                   });
  {
    auto reduce = WithResident(ReduceHead(), kOtherRunId);
    reduce.mutable_header()->mutable_resident()->set_keep(true);
    rows.push_back(MakeRow("ResidentKeep", std::vector{reduce}, kInvalid,
                           {"header.resident.keep", "answers a value, not an array to keep"}));
  }
  // The tenant (metadata gpuscan-tenant, without mutual TLS) is read once the header is checked.
  rows.push_back(AsTenant(MakeRow("ResidentTenantTooLong", std::vector{WithResident(ScanHead(), kOtherRunId)}, kInvalid,
                                {"metadata gpuscan-tenant has 129 bytes; at most 128"}),
                        129));
  rows.push_back(AsTenant(MakeRow("ResidentTenantTooLong", std::vector{WithResident(ReduceHead(), kOtherRunId)}, kInvalid,
                                {"metadata gpuscan-tenant has 129 bytes; at most 128"}),
                        129));
  // Another tenant's array, exactly as an unknown id (the runner puts the array: Row::foreign_id).
  ForScanAndReduce(rows, "ResidentOtherTenantsArray", kNotFound, {"header.resident.values ", "no such resident array"},
                   [](auto t) { return std::vector{WithResident(Head<typename decltype(t)::type>(), kThisRunId)}; });
  for (size_t i = rows.size() - 2; i < rows.size(); ++i) {
    rows[i] = AsTenant(rows[i], 7);
    rows[i].foreign_id = true;
  }
}

void PutArrayRows(std::vector<Row>& rows) {
  using P = std::vector<v1::PutArrayRequest>;
  // ---- the stream's shape (the checks every streaming call shares)
  rows.push_back(MakeRow("HeaderMissing", P{PutData(16), PutData(16)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("HeaderRepeated", P{PutHead(), PutData(16), PutHead()}, kInvalid, {"header repeated in request #2"}));
  rows.push_back(MakeRow("EmptyStream", P{}, kInvalid, {"empty stream", "first request (the header)"}));
  // ---- header.dtype: any DType, narrow ones included; nothing else
  rows.push_back(MakeRow("UnspecifiedDType", P{PutHead(v1::DTYPE_UNSPECIFIED), PutData(16)}, kInvalid,
                         {"header.dtype 0 (DTYPE_UNSPECIFIED)", "not an element type"}));
  rows.push_back(MakeRow("UnknownDType", P{PutHead(99), PutData(16)}, kInvalid, {"header.dtype 99 (not a known DType)", "not an element type"}));
  rows.push_back(MakeRow("NegativeDType", P{PutHead(-3)}, kInvalid, {"header.dtype -3 (not a known DType)", "not an element type"}));
  // ---- chunks
  rows.push_back(MakeRow("ChunkNotWholeElements", P{PutHead(v1::DTYPE_INT64), PutData(1023)}, kInvalid,
                         {"data of request 1 has 1023 bytes", "not a multiple of the element size 8 (DTYPE_INT64)"}));
  {
    auto first = PutHead(v1::DTYPE_FLOAT16);
    first.set_data(Bytes(7));
    rows.push_back(MakeRow("FirstChunkNotWholeElements", P{first}, kInvalid,
                           {"data of request 0 has 7 bytes", "not a multiple of the element size 2 (DTYPE_FLOAT16)"}));
  }
  rows.push_back(MakeRow("ChunkAboveLimit", P{PutHead(), PutData(2 * kChunkBytes)}, kExhausted,
                         {"data of request 1 has 8192 bytes", "at most 4096 (Limits.max_chunk_bytes)"}));
  rows.push_back(MakeRow("MessageAboveReceiveLimit", P{PutHead(), PutData(kReceiveLimit + 4096)}, kExhausted,
                         {"larger than max", std::to_string(kReceiveLimit)}));
  // ---- header.element_count against what arrives, and against the budget
  rows.push_back(MakeRow("DeclaredCountSmaller", P{WithCount(PutHead(), 10), PutData(50 * 4)}, kInvalid,
                         {"more elements arrived than header.element_count 10"}));
  rows.push_back(MakeRow("DeclaredCountSmallerLater", P{WithCount(PutHead(), 20), PutData(16 * 4), PutData(16 * 4)},
                         kInvalid, {"more elements arrived than header.element_count 20"}));
  rows.push_back(MakeRow("DeclaredCountLarger", P{WithCount(PutHead(), 100), PutData(50 * 4)}, kInvalid,
                         {"header.element_count 100 but 50 elements arrived"}));
  rows.push_back(MakeRow("DeclaredCountWithNoData", P{WithCount(PutHead(v1::DTYPE_UINT8), 3)}, kInvalid,
                         {"header.element_count 3 but 0 elements arrived"}));
  rows.push_back(MakeRow("DeclaredCountAboveBudget", P{WithCount(PutHead(v1::DTYPE_INT64), kResidentBytes / 8 + 1)},
                         kExhausted,
                         {"header.element_count " + std::to_string(kResidentBytes / 8 + 1) + " (8 bytes each)",
                          "resident budget of " + std::to_string(kResidentBytes) + " bytes (--resident-bytes)"}));
  rows.push_back(MakeRow("DeclaredCountHuge", P{WithCount(PutHead(v1::DTYPE_FLOAT64), ~uint64_t{0})}, kExhausted,
                         {"header.element_count 18446744073709551615", "resident budget"}));
  {
    // Undeclared: the chunks are held until the end, and refused once past the budget.
    P put = {PutHead()};
    for (uint64_t sent = 0; sent <= kResidentBytes; sent += kChunkBytes) put.push_back(PutData(kChunkBytes));
    rows.push_back(MakeRow("UndeclaredAboveBudget", put, kExhausted,
                           {"the array passed the resident budget of " + std::to_string(kResidentBytes) + " bytes"}));
  }
  // Within the budget, past this tenant's quota (--tenant-quota-bytes): refused when the memory
  // is taken (a declared count: once the call is admitted).
  rows.push_back(AsTenant(MakeRow("DeclaredCountAboveTenantQuota",
                                P{WithCount(PutHead(), kTenantQuotaBytes / 4 + 1), PutData(kChunkBytes)}, kExhausted,
                                {std::to_string(kTenantQuotaBytes + 4) + " bytes more would pass this tenant's quota of " +
                                 std::to_string(kTenantQuotaBytes) + " bytes (--tenant-quota-bytes)"}),
                        9));
  // ---- label, tenant
  {
    auto head = PutHead();
    head.mutable_header()->set_label(std::string(129, 'l'));
    rows.push_back(MakeRow("LabelTooLong", P{head, PutData(16)}, kInvalid, {"header.label has 129 bytes; at most 128"}));
  }
  rows.push_back(AsTenant(MakeRow("TenantTooLong", P{PutHead(), PutData(16)}, kInvalid,
                                {"metadata gpuscan-tenant has 129 bytes; at most 128"}),
                        129));
  // ---- PutArray is read raw (service/raw_wire.h), as Scan and Reduce are.
  {
    Row row{"PutArray_MalformedEncoding", Rpc::kPutArray};
    row.raw = {PutHead().SerializeAsString(), std::string("\x12\x05" "abc", 5)};  // data says 5 bytes, 3 follow
    row.expect = {"request #1", "the PutArrayRequest is not a valid message", "field 2 says 5 bytes, 3 remain"};
    rows.push_back(row);
    // A label is a proto3 string: bytes that are not UTF-8 fail to parse.
    row.name = "PutArray_LabelNotUtf8";
    row.raw = {std::string("\x0a\x05\x08\x01\x22\x01\xff", 7)};  // header {dtype 1, label "\xff"}
    row.expect = {"request #0", "the PutArrayRequest is not a valid message", "protobuf could not parse"};
    rows.push_back(row);
    Row scan{"Scan_ResidentLabelNotUtf8", Rpc::kScan};
    scan.raw = {std::string("\x0a\x0a\x08\x01\x10\x01\xba\x01\x03\x22\x01\xff", 12)};  // resident {label "\xff"}
    scan.expect = {"request #0", "the ScanRequest is not a valid message", "protobuf could not parse"};
    rows.push_back(scan);
    row.name = "PutArray_MalformedHeader";
    row.raw = {std::string("\x0a\x04\x08\x01", 4)};  // header says 4 bytes, 2 follow
    row.expect = {"request #0", "the PutArrayRequest is not a valid message"};
    rows.push_back(row);
  }
}

void GetDropListRows(std::vector<Row>& rows) {
  rows.push_back(GetRow("UnknownId", kThisRunId, kNotFound, {"id 6b6b6b6b", "no such resident array"}));
  rows.back().same_epoch = true;
  rows.push_back(GetRow("IdOfAnotherRun", kOtherRunId, kNotFound, {"id " + kOtherRunHex, "the server restarted"}));
  rows.push_back(GetRow("IdShort", "\x01\x02\x03", kNotFound, {"id 010203:", "no such resident array"}));
  rows.push_back(GetRow("IdEmpty", "", kInvalid, {"id is required", "0 bytes"}));
  {
    Row row = GetRow("UnknownIdWithRange", kOtherRunId, kNotFound, {"the server restarted"});
    row.get.set_offset(~uint64_t{0});
    row.get.set_count(~uint64_t{0});
    row.get.set_chunk_bytes(1);
    rows.push_back(row);
  }
  rows.push_back(AsTenant(GetRow("TenantTooLong", kOtherRunId, kInvalid, {"metadata gpuscan-tenant has 129 bytes"}), 129));
  rows.push_back(DropRow("UnknownId", kThisRunId, kNotFound, {"id 6b6b6b6b", "no such resident array"}));
  rows.back().same_epoch = true;
  rows.push_back(DropRow("IdOfAnotherRun", kOtherRunId, kNotFound, {"id " + kOtherRunHex, "the server restarted"}));
  rows.push_back(DropRow("IdShort", "\x01\x02\x03", kNotFound, {"id 010203:", "no such resident array"}));
  rows.push_back(DropRow("IdEmpty", "", kInvalid, {"id is required", "0 bytes"}));
  rows.push_back(AsTenant(DropRow("TenantTooLong", kOtherRunId, kInvalid, {"metadata gpuscan-tenant has 129 bytes"}), 129));
  for (Row row : {GetRow("OtherTenantsArray", kThisRunId, kNotFound, {"id ", "no such resident array"}),
                  DropRow("OtherTenantsArray", kThisRunId, kNotFound, {"id ", "no such resident array"})}) {
    row.foreign_id = true;  // the default tenant's array, asked for by another (and not dropped: the runner checks)
    rows.push_back(AsTenant(row, 7));
  }
  // ListArrays: the tenant, and a page token the server did not issue (page_size is never refused:
  // past its maximum it is the maximum).
  Row list{"ListArrays_TenantTooLong", Rpc::kListArrays};
  list.code = kInvalid;
  list.expect = {"metadata gpuscan-tenant has 129 bytes; at most 128"};
  rows.push_back(AsTenant(list, 129));
  struct TokenRow {
    const char* name;
    const char* token;
    std::vector<std::string> expect;
  };
  for (const TokenRow& t :
       {TokenRow{"PageTokenGarbled", "zz", {"page_token \"zz\" is not a token this server issued"}},
        TokenRow{"PageTokenNoPosition", "0123456789abcdef.", {"page_token", "not a token this server issued"}},
        TokenRow{"PageTokenPositionNotHex", "0123456789abcdef.12g4", {"page_token", "not a token this server issued"}},
        TokenRow{"PageTokenOfAnotherRun", "0000000000000000.5", {"page_token is of another run of the server"}}}) {
    Row r{std::string("ListArrays_") + t.name, Rpc::kListArrays};
    r.code = kInvalid;
    r.list.set_page_token(t.token);
    r.list.set_page_size(7);
    r.expect = t.expect;
    rows.push_back(r);
  }
}

}  // namespace

void ResidentRows(std::vector<Row>& rows) {
  HeaderResidentRows(rows);
  PutArrayRows(rows);
  GetDropListRows(rows);
}

}  // namespace gpuscan::matrix
