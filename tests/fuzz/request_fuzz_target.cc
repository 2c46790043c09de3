// The request fuzzer's target: decodes one input (request_fuzz_target.h's format) into a call
// for request_fuzz_calls.cc, and checks the raw RPCs' wire decoder against protobuf on its bytes.
#include "request_fuzz_target.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"
#include "gpuscan/wire/fields.h"
#include "request_fuzz_calls.h"

namespace gpuscan::fuzz {
namespace {

constexpr size_t kMaxRequests = 64;
constexpr uint64_t kMaxRequestBytesChoices[] = {0, 64, 512, 4096};
// Sort's --max-sort-bytes (limits bits 5-6): the server's default, or small enough to reach.
constexpr uint64_t kMaxSortBytesChoices[] = {uint64_t{4} << 30, 64, 512, 4096};
// Resident calls (byte 0 from kResidentFirst): --resident-bytes (0: not served) and
// --tenant-quota-bytes (0: none), from the limits byte's bits 3-4 and 5-6.
constexpr uint8_t kResidentFirst = 0xE0;
constexpr int kResidentKinds = 14;
constexpr uint64_t kResidentBytesChoices[] = {4096, 0, 512, 65536};
constexpr uint64_t kTenantQuotaChoices[] = {0, 64, 512, 4096};

// Reads the input front to back; past the end every read gives zeros / nothing.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() {
    const uint16_t lo = U8();
    return static_cast<uint16_t>(lo | (uint16_t(U8()) << 8));
  }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

bool HasSecondStream(int rpc) {
  if (rpc == 20) return true;                             // Pipeline: the contents of the arrays short ids name
  const int op = rpc >= 14 && rpc <= 19 ? rpc - 12 : rpc;  // 14..19: the operations 2..7 on resident arrays
  return op == 2 || op == 5 || op == 6 || op == 7;
}

// The raw RPCs' decoder (gpuscan/wire) on the input's bytes taken as one request of each raw RPC
// (Compact, SegmentedScan and ReduceByKey with two fields), cut into slices where the
// input's own bytes say: whatever it accepts, protobuf parses to the same message and the same
// data. (It may refuse what protobuf would take: groups.)
template <class Msg, int kField, int kSecond = 0>
void CheckWireDecode(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<grpc::Slice> slices;
  for (size_t at = 0, i = 0; at < size; ++i) {
    const size_t take = std::min<size_t>(size - at, 1 + data[i % size] % 23);
    slices.emplace_back(bytes.data() + at, take);
    at += take;
  }
  const grpc::ByteBuffer buffer(slices.data(), slices.size());
  Msg msg;
  wire::SplitMessage split;
  if (!wire::Parse(buffer, kField, "the request", &msg, &split, kSecond).ok()) return;
  Msg expected;
  if (!expected.ParseFromString(bytes)) Fail("the wire decoder accepted bytes protobuf refuses");
  const google::protobuf::Reflection* reflection = expected.GetReflection();
  for (const auto& [number, pieces, n] : {std::tuple{kField, &split.field, split.field_bytes},
                                          std::tuple{kSecond, &split.second, split.second_bytes}}) {
    if (number == 0) continue;
    const google::protobuf::FieldDescriptor* fd = Msg::descriptor()->FindFieldByNumber(number);
    std::string got(n, '\0');
    wire::Gather(*pieces, got.data());
    if (got != reflection->GetString(expected, fd)) Fail("the wire decoder's data differs from protobuf's");
    reflection->ClearField(&expected, fd);
  }
  if (msg.SerializeAsString() != expected.SerializeAsString()) {
    Fail("the wire decoder's other fields differ from protobuf's");
  }
}

int RunRequestInput(const uint8_t* data, size_t size, std::string* outcome) {
  CheckWireDecode<v1::ScanRequest, v1::ScanRequest::kDataFieldNumber>(data, size);
  CheckWireDecode<v1::ReduceRequest, v1::ReduceRequest::kDataFieldNumber>(data, size);
  CheckWireDecode<v1::PutArrayRequest, v1::PutArrayRequest::kDataFieldNumber>(data, size);
  CheckWireDecode<v1::CompactRequest, v1::CompactRequest::kValuesFieldNumber, v1::CompactRequest::kFlagsFieldNumber>(
      data, size);
  CheckWireDecode<v1::HistogramRequest, v1::HistogramRequest::kDataFieldNumber>(data, size);
  CheckWireDecode<v1::SegmentedScanRequest, v1::SegmentedScanRequest::kDataFieldNumber,
                  v1::SegmentedScanRequest::kKeysFieldNumber>(data, size);
  CheckWireDecode<v1::ReduceByKeyRequest, v1::ReduceByKeyRequest::kDataFieldNumber,
                  v1::ReduceByKeyRequest::kKeysFieldNumber>(data, size);
  Reader in(data, size);
  const uint8_t first = in.U8();
  const bool resident = first >= kResidentFirst;
  const int rpc = resident ? 8 + (first - kResidentFirst) % kResidentKinds : first % 8;
  const uint8_t limits = in.U8();
  const uint64_t chunk_bytes = uint64_t{8} << (limits & 7);
  const uint64_t max_request_bytes = kMaxRequestBytesChoices[(limits >> 3) & 3];
  const uint64_t max_sort_bytes = kMaxSortBytesChoices[(limits >> 5) & 3];
  std::vector<Request> requests;
  while (!in.done() && requests.size() < kMaxRequests) {
    Request r;
    r.has_header = in.U8() & 1;
    if (r.has_header) r.header = in.Bytes(in.U8());
    r.data = in.Bytes(in.U16());
    if (HasSecondStream(rpc)) r.flags = in.Bytes(in.U16());
    requests.push_back(std::move(r));
  }
  const Result r = resident ? FuzzResidentCall(rpc - 8, requests, chunk_bytes, kResidentBytesChoices[(limits >> 3) & 3],
                                                kTenantQuotaChoices[(limits >> 5) & 3])
                            : FuzzCall(rpc, requests, chunk_bytes, max_request_bytes, max_sort_bytes);
  if (outcome) {
    static const char* const kRpc[] = {"scan",      "reduce",         "compact",       "histogram",
                                       "scan2d",    "segmented_scan", "reduce_by_key", "sort",
                                       "put_array", "get_array",      "drop_array",    "list_arrays",
                                       "scan_resident", "reduce_resident", "compact_resident",
                                       "histogram_resident", "scan2d_resident", "segmented_scan_resident",
                                       "reduce_by_key_resident", "sort_resident", "pipeline", "pipeline_plan"};
    *outcome = std::string(kRpc[rpc]) + ", " + std::to_string(requests.size()) + " requests: " +
               (r.status.ok() ? "accepted, " + std::to_string(r.elements) + " elements"
                              : "rejected, code " + std::to_string(int(r.status.error_code())) + ": " +
                                    r.status.error_message());
  }
  return 0;
}

std::string EncodeInput(int rpc, uint8_t limits, const std::vector<SeedRequest>& requests) {
  std::string out;
  out.push_back(static_cast<char>(rpc < 8 ? rpc : kResidentFirst + (rpc - 8)));
  out.push_back(static_cast<char>(limits));
  auto u16 = [&](size_t n) {
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>((n >> 8) & 0xff));
  };
  for (const SeedRequest& r : requests) {
    out.push_back(r.has_header ? 1 : 0);
    if (r.has_header) {
      out.push_back(static_cast<char>(std::min<size_t>(r.header.size(), 255)));
      out += r.header.substr(0, 255);
    }
    u16(std::min<size_t>(r.data.size(), 0xffff));
    out += r.data.substr(0, 0xffff);
    if (HasSecondStream(rpc)) {
      u16(std::min<size_t>(r.flags.size(), 0xffff));
      out += r.flags.substr(0, 0xffff);
    }
  }
  return out;
}

}  // namespace gpuscan::fuzz
