// The bad-input matrix: header.resident of Compact, Histogram and Sort, where the refusal needs no
// array on the server (those that need one, a flags or sort_values array of the wrong dtype or
// count, another tenant's ids, are in resident_select_test.cc).
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {
namespace {

// An id of another run of the server (its last 8 bytes are not this run's epoch).
const std::string kSelectOtherRunId(24, '\x5a');

template <class C>
C SelectResident(C r, const std::string& values = kSelectOtherRunId) {
  r.mutable_header()->mutable_resident()->set_values(values);
  return r;
}

}  // namespace

void ResidentSelectRows(std::vector<Row>& rows) {
  constexpr auto kNotFound = grpc::StatusCode::NOT_FOUND;
  // ---- the other inputs: each one the header asks for, and none it does not (checked before any id is looked up)
  rows.push_back(MakeRow("ResidentFlagsMissing", std::vector{SelectResident(CompactHead(v1::DTYPE_INT32, true))}, kInvalid,
                         {"header.resident.flags: required", "use_flags"}));
  {
    auto r = SelectResident(CompactHead(v1::DTYPE_INT32, false));
    r.mutable_header()->mutable_resident()->set_flags(kSelectOtherRunId);
    rows.push_back(MakeRow("ResidentFlagsWithoutUseFlags", std::vector{r}, kInvalid,
                           {"header.resident.flags: this call takes no such input"}));
  }
  rows.push_back(MakeRow("ResidentSortValuesMissing",
                         std::vector{SelectResident(SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64))},
                         kInvalid, {"header.resident.sort_values: required", "SORT_OUTPUT_KEYS_AND_VALUES"}));
  {
    auto r = SelectResident(SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES));
    r.mutable_header()->mutable_resident()->set_sort_values(kSelectOtherRunId);
    rows.push_back(MakeRow("ResidentSortValuesWithoutValues", std::vector{r}, kInvalid,
                           {"header.resident.sort_values: this call takes no such input"}));
  }
  rows.push_back(MakeRow("ResidentValuesMissing", std::vector{SelectResident(SortHead(), "")}, kInvalid,
                         {"header.resident.values: required"}));
  // ---- keep: Histogram answers counts, not an array
  {
    auto r = SelectResident(HistogramHead());
    r.mutable_header()->mutable_resident()->set_keep(true);
    rows.push_back(MakeRow("ResidentKeep", std::vector{r}, kInvalid,
                           {"header.resident.keep", "answers a value, not an array to keep"}));
  }
  // ---- what cannot go with it
  rows.push_back(MakeRow("ResidentWithShm", std::vector{SelectResident(WithShm(CompactHead(v1::DTYPE_INT32, false), "in64"))},
                         kInvalid, {"header.resident: cannot be combined with header.shared_memory"}));
  rows.push_back(MakeRow("ResidentWithLanes",
                         std::vector{SelectResident(WithLanes(CompactHead(v1::DTYPE_INT32, false), 0, 2, 16))}, kInvalid,
                         {"header.resident: cannot be combined with header.lanes"}));
  rows.push_back(MakeRow("ResidentWithDeviceMemory", std::vector{SelectResident(WithDeviceInput(HistogramHead()))},
                         kInvalid, {"header.resident: cannot be combined with header.device_memory"}));
  rows.push_back(MakeRow("ResidentWithDeviceMemory", std::vector{SelectResident(WithDeviceInput(SortHead()))}, kInvalid,
                         {"header.resident: cannot be combined with header.device_memory"}));
  // ---- narrow dtypes are computed: their calls are checked as any other's (the refusals that
  // need an array are in resident_narrow_test.cc)
  rows.push_back(MakeRow("ResidentNarrowFlagsMissing", std::vector{SelectResident(CompactHead(v1::DTYPE_UINT8, true))},
                         kInvalid, {"header.resident.flags: required", "use_flags"}));
  rows.push_back(MakeRow("ResidentNarrowSortValuesMissing",
                         std::vector{SelectResident(SortHead(v1::DTYPE_FLOAT16, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT16))},
                         kInvalid, {"header.resident.sort_values: required", "SORT_OUTPUT_KEYS_AND_VALUES"}));
  rows.push_back(MakeRow("ResidentNarrowWithDeviceMemory", std::vector{SelectResident(WithDeviceInput(SortHead(v1::DTYPE_INT8)))},
                         kInvalid, {"header.device_memory: a narrow header.dtype=DTYPE_INT8", "in the stream only"}));
  rows.push_back(MakeRow("ResidentNarrowIdOfAnotherRun", std::vector{SelectResident(CompactHead(v1::DTYPE_UINT8, false))},
                         kNotFound, {"header.resident.values 5a5a", "the server restarted"}));
  {
    auto r = SelectResident(SortHead(v1::DTYPE_FLOAT16, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT16));
    r.mutable_header()->mutable_resident()->set_sort_values(kSelectOtherRunId);
    rows.push_back(MakeRow("ResidentNarrowIdOfAnotherRun", std::vector{r}, kNotFound,
                           {"header.resident.values 5a5a", "the server restarted"}));
  }
  // ---- ids of another run of the server
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", std::vector{SelectResident(CompactHead(v1::DTYPE_INT32, false))},
                         kNotFound, {"header.resident.values 5a5a", "the server restarted"}));
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", std::vector{SelectResident(HistogramHead())}, kNotFound,
                         {"header.resident.values 5a5a", "the server restarted"}));
  rows.push_back(MakeRow("ResidentIdOfAnotherRun", std::vector{SelectResident(SortHead())}, kNotFound,
                         {"header.resident.values 5a5a", "the server restarted"}));
}

}  // namespace gpuscan::matrix
