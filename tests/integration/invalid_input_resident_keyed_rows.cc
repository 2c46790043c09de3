// The bad-input matrix: header.resident of SegmentedScan, ReduceByKey and Scan2D, where the
// refusal needs no array on the server: the inputs the header asks for and those it does not
// (each named), what cannot go with header.resident, an id of another run. Narrow dtypes are
// served: such a call gets as far as looking the array up. The refusals that need arrays (a
// dtype or count that differs, a count not a whole number of rows, data sent with it, another
// tenant's id) are in resident_keyed_test.cc.
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {
namespace {

// An id of another run of the server (its last 8 bytes are not this run's epoch, but with
// chance 2^-64), and what NOT_FOUND says of it.
const std::string kKeyedOtherRunId(24, '\x4c');
std::string KeyedOtherRunHex() {
  std::string s;
  for (size_t i = 0; i < kKeyedOtherRunId.size(); ++i) s += "4c";
  return s;
}
const std::vector<std::string> kKeyedRestarted = {"header.resident.values " + KeyedOtherRunHex(),
                                                  "the server restarted since this id was issued"};

struct Ids {
  std::string values = kKeyedOtherRunId, keys, flags, sort_values;
};

template <class C>
C Resident(C r, const Ids& ids) {
  v1::Resident* res = r.mutable_header()->mutable_resident();
  res->set_values(ids.values);
  res->set_keys(ids.keys);
  res->set_flags(ids.flags);
  res->set_sort_values(ids.sort_values);
  return r;
}

v1::SegmentedScanRequest SegHeads(v1::DType dtype = v1::DTYPE_INT32) {
  v1::SegmentedScanRequest r = SegHead(dtype);
  r.mutable_header()->set_heads(true);
  return r;
}

const std::string kSomeId(24, '\x4d');  // a second input's id (never looked up: refused first)

}  // namespace

void ResidentKeyedRows(std::vector<Row>& rows) {
  using G = std::vector<v1::SegmentedScanRequest>;
  using B = std::vector<v1::ReduceByKeyRequest>;
  using M = std::vector<v1::Scan2DRequest>;
  const std::vector<std::string> keys_required = {"header.resident.keys: required", "key_dtype"};
  const std::vector<std::string> no_flags = {"header.resident.flags: this call takes no such input",
                                             "use_flags or heads"};
  const std::vector<std::string> no_keys = {"header.resident.keys: this call takes no such input", "key_dtype"};
  const std::vector<std::string> values_required = {"header.resident.values: required"};
  // ---- SegmentedScan: keys with key_dtype, flags with heads, nothing else
  rows.push_back(MakeRow("ResidentKeysMissing", G{Resident(SegHead(), {})}, kInvalid, keys_required));
  rows.push_back(MakeRow("ResidentFlagsWithoutHeads", G{Resident(SegHead(), {kKeyedOtherRunId, kSomeId, kSomeId})},
                         kInvalid, no_flags));
  rows.push_back(MakeRow("ResidentFlagsMissingWithHeads", G{Resident(SegHeads(), {})}, kInvalid,
                         {"header.resident.flags: required", "use_flags or heads"}));
  rows.push_back(MakeRow("ResidentKeysWithHeads", G{Resident(SegHeads(), {kKeyedOtherRunId, kSomeId, kSomeId})},
                         kInvalid, no_keys));
  rows.push_back(MakeRow("ResidentSortValuesGiven", G{Resident(SegHead(), {kKeyedOtherRunId, kSomeId, "", kSomeId})},
                         kInvalid, {"header.resident.sort_values: this call takes no such input"}));
  rows.push_back(MakeRow("ResidentValuesMissing", G{Resident(SegHead(), {"", kSomeId})}, kInvalid, values_required));
  rows.push_back(MakeRow("ResidentWithDeviceMemory", G{WithDevice(Resident(SegHead(), {kKeyedOtherRunId, kSomeId}))},
                         kInvalid, {"header.resident: cannot be combined with header.device_memory"}));
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", G{Resident(SegHead(), {kKeyedOtherRunId, kSomeId})},
                         grpc::StatusCode::NOT_FOUND, kKeyedRestarted));
  rows.push_back(MakeRow("ResidentNarrowDTypeIsServed",
                         G{Resident(SegHead(v1::DTYPE_INT8), {kKeyedOtherRunId, kSomeId})}, grpc::StatusCode::NOT_FOUND, kKeyedRestarted));
  // ---- ReduceByKey: keys always, nothing else
  rows.push_back(MakeRow("ResidentKeysMissing", B{Resident(ByKeyHead(), {})}, kInvalid, keys_required));
  rows.push_back(MakeRow("ResidentFlagsGiven", B{Resident(ByKeyHead(), {kKeyedOtherRunId, kSomeId, kSomeId})},
                         kInvalid, no_flags));
  rows.push_back(MakeRow("ResidentValuesMissing", B{Resident(ByKeyHead(), {"", kSomeId})}, kInvalid, values_required));
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", B{Resident(ByKeyHead(), {kKeyedOtherRunId, kSomeId})},
                         grpc::StatusCode::NOT_FOUND, kKeyedRestarted));
  rows.push_back(MakeRow("ResidentNarrowDTypeIsServed",
                         B{Resident(ByKeyHead(v1::DTYPE_FLOAT16), {kKeyedOtherRunId, kSomeId})},
                         grpc::StatusCode::NOT_FOUND, kKeyedRestarted));
  // ---- Scan2D: the matrix alone
  rows.push_back(MakeRow("ResidentKeysGiven", M{Resident(Scan2DHead(), {kKeyedOtherRunId, kSomeId})}, kInvalid,
                         no_keys));
  rows.push_back(MakeRow("ResidentFlagsGiven", M{Resident(Scan2DHead(), {kKeyedOtherRunId, "", kSomeId})}, kInvalid,
                         no_flags));
  rows.push_back(MakeRow("ResidentValuesMissing", M{Resident(Scan2DHead(), {""})}, kInvalid, values_required));
  {
    auto keep = Resident(Scan2DHead(), {""});
    keep.mutable_header()->mutable_resident()->set_keep(true);
    rows.push_back(MakeRow("ResidentKeepWithoutValues", M{keep}, kInvalid, values_required));
  }
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", M{Resident(Scan2DHead(), {})}, grpc::StatusCode::NOT_FOUND,
                         kKeyedRestarted));
  rows.push_back(MakeRow("ResidentNarrowDTypeIsServed", M{Resident(Scan2DHead(v1::DTYPE_UINT16), {})},
                         grpc::StatusCode::NOT_FOUND, kKeyedRestarted));
}

}  // namespace gpuscan::matrix
