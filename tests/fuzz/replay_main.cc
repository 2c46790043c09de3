// request_fuzz_replay: runs inputs through the request fuzzer's target without libFuzzer, so
// every build (GCC too) exercises the seed corpus and the saved findings (CTest
// fuzz_corpus_replay, label unit). An invariant violation aborts with the reason.
//
//   request_fuzz_replay                     the seed corpus and the regressions folder
//   request_fuzz_replay FILE|DIR...         those inputs
//   request_fuzz_replay --write-seeds DIR   (re)writes the seed corpus into DIR
// Seeds named accept_* must be accepted and reject_* rejected; other inputs (fuzzer finds) only
// have to keep the invariants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_target.h"
#include "seed_builders.h"

namespace fs = std::filesystem;
using gpuscan::fuzz::SeedRequest;
namespace v1 = gpuscan::v1;

namespace gpuscan::fuzz::seeds {
// resident_seeds.cc: the resident calls' seeds, written after the others.
void WriteResidentSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put);
// pipeline_seeds.cc: Pipeline's seeds, written last.
void WritePipelineSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put);
}  // namespace gpuscan::fuzz::seeds

namespace {

using namespace gpuscan::fuzz::seeds;  // NOLINT: the builders

void WriteSeeds(const fs::path& dir) {
  fs::create_directories(dir);
  int written = 0;
  auto put = [&](const std::string& name, int rpc, uint8_t limits, const std::vector<SeedRequest>& reqs) {
    std::ofstream(dir / name, std::ios::binary) << gpuscan::fuzz::EncodeInput(rpc, limits, reqs);
    ++written;
  };
  // Accepted calls, every RPC; chunk sizes around the limit, an empty chunk, several dtypes.
  put("accept_scan_int32_sum", kScan, kChunk256,
      {Head(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), NonZero(256, 4)), Chunk(NonZero(252, 4)), Chunk(""),
       Chunk(NonZero(4, 4))});
  {
    auto h = ScanH(v1::DTYPE_FLOAT64, v1::OPERATOR_MIN, true);
    h.set_element_count(40);
    put("accept_scan_float64_min_exclusive_counted", kScan, kChunk256 | kMax4K,
        {Head(h), Chunk(NonZero(256, 8)), Chunk(NonZero(64, 8))});
  }
  {
    auto h = ScanH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM);
    h.set_algorithm(v1::SCAN_ALGORITHM_CPU_BLOCKED);
    put("accept_scan_float32_sum_cpu_blocked", kScan, kChunk1K, {Head(h, NonZero(1024, 4)), Chunk(NonZero(400, 4))});
  }
  put("accept_scan_uint64_bitand", kScan, kChunk64, {Head(ScanH(v1::DTYPE_UINT64, v1::OPERATOR_BIT_AND), NonZero(64, 8))});
  put("accept_reduce_uint64_xor", kReduce, kChunk1K,
      {Head(ReduceH(v1::DTYPE_UINT64, v1::OPERATOR_BIT_XOR)), Chunk(NonZero(1024, 8)), Chunk(NonZero(8, 8))});
  put("accept_reduce_float32_product", kReduce, kChunk256,
      {Head(ReduceH(v1::DTYPE_FLOAT32, v1::OPERATOR_PRODUCT), NonZero(200, 4)), Chunk(NonZero(256, 4))});
  put("accept_reduce_float64_sum", kReduce, kChunk1K, {Head(ReduceH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM), NonZero(800, 8))});
  put("accept_histogram_float32_even", kHistogram, kChunk256,
      {Head(EvenH(v1::DTYPE_FLOAT32, 7, -1e3, 2e9), NonZero(256, 4)), Chunk(NonZero(100, 4))});
  put("accept_histogram_int64_edges", kHistogram, kChunk1K,
      {Head(EdgesH(v1::DTYPE_INT64, {-1e18, -5, 0, 0, 1e9, 1e19}), NonZero(1024, 8)), Chunk(""), Chunk(NonZero(8, 8))});
  put("reject_histogram_decreasing_edges", kHistogram, kChunk256,
      {Head(EdgesH(v1::DTYPE_FLOAT64, {0, 2, 1}), NonZero(64, 8))});
  put("reject_histogram_lo_not_below_hi", kHistogram, kChunk256, {Head(EvenH(v1::DTYPE_UINT32, 4, 3, 3))});
  put("accept_compact_int32_flags_in_step", kCompact, kChunk256,
      {Head(FlagsH(v1::DTYPE_INT32), NonZero(200, 4), Flags(50)), Chunk(NonZero(256, 4), Flags(64))});
  put("accept_compact_int64_flags_out_of_step", kCompact, kChunk256,
      {Head(FlagsH(v1::DTYPE_INT64, v1::COMPACT_OUTPUT_VALUES_AND_INDICES), NonZero(160, 8)), Chunk("", Flags(7)),
       Chunk(NonZero(8, 8), Flags(14))});
  put("accept_compact_uint64_flags_ahead", kCompact, kChunk256,
      {Head(FlagsH(v1::DTYPE_UINT64, v1::COMPACT_OUTPUT_INDICES), NonZero(40, 8), Flags(10)), Chunk(NonZero(40, 8)),
       Chunk(NonZero(16, 8), Flags(2))});
  {
    v1::CompactHeader h;
    h.set_dtype(v1::DTYPE_FLOAT32);
    h.set_output(v1::COMPACT_OUTPUT_INDICES);
    auto* p = h.mutable_predicate();
    p->set_op(v1::PREDICATE_OP_IN_RANGE);
    p->mutable_threshold()->set_float_value(-1e9);
    p->mutable_upper()->set_float_value(1e9);
    put("accept_compact_float32_in_range", kCompact, kChunk1K, {Head(h, NonZero(512, 4)), Chunk(NonZero(100, 4))});
    p->set_op(v1::PREDICATE_OP_GT);
    h.set_dtype(v1::DTYPE_UINT32);
    p->mutable_threshold()->set_uint_value(1u << 31);
    put("accept_compact_uint32_gt", kCompact, kChunk256, {Head(h, NonZero(256, 4))});
  }
  // Rejected calls, one per kind of fault.
  put("reject_empty_stream", kScan, kChunk256, {});
  put("reject_header_missing", kReduce, kChunk256, {Chunk(NonZero(16, 4)), Head(ReduceH(v1::DTYPE_INT32, v1::OPERATOR_SUM))});
  put("reject_header_repeated", kScan, kChunk256,
      {Head(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), NonZero(16, 4)), Head(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM))});
  put("reject_chunk_not_whole_elements", kScan, kChunk256, {Head(ScanH(v1::DTYPE_INT64, v1::OPERATOR_MAX)), Chunk(NonZero(13))});
  {
    auto h = ReduceH(v1::DTYPE_INT32, v1::OPERATOR_MIN);
    h.set_element_count(5);
    put("reject_declared_count_smaller", kReduce, kChunk256, {Head(h, NonZero(24, 4))});
  }
  put("reject_chunk_above_limit", kScan, kChunk64, {Head(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), NonZero(128, 4))});
  put("reject_above_max_request_bytes", kReduce, kChunk256 | kMax512,
      {Head(ReduceH(v1::DTYPE_INT32, v1::OPERATOR_SUM)), Chunk(NonZero(256, 4)), Chunk(NonZero(256, 4)),
       Chunk(NonZero(256, 4))});
  put("reject_bitwise_on_float", kScan, kChunk256, {Head(ScanH(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_OR), NonZero(16, 4))});
  put("reject_unknown_enums", kScan, kChunk256, {Head(ScanH(static_cast<v1::DType>(42), static_cast<v1::Operator>(99)))});
  {
    v1::CompactHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.mutable_predicate()->set_op(v1::PREDICATE_OP_LT);
    h.mutable_predicate()->mutable_threshold()->set_float_value(1.5);
    put("reject_threshold_wrong_kind", kCompact, kChunk256, {Head(h, NonZero(16, 4))});
  }
  put("reject_flags_length_differs", kCompact, kChunk256, {Head(FlagsH(v1::DTYPE_INT32), NonZero(40, 4), Flags(9))});
  // Scan2D (after the rest, so the earlier seeds' random bytes stay as they were): rows cut
  // anywhere by the chunks, a declared row count, and its refusals.
  put("accept_scan2d_float32_rows_across_chunks", kScan2D, kChunk256,
      {Head(Scan2DH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, 7), NonZero(60, 4)), Chunk(NonZero(256, 4)),
       Chunk(NonZero(20, 4))});
  {
    auto h = Scan2DH(v1::DTYPE_INT64, v1::OPERATOR_MAX, 3);
    h.set_rows(5);
    put("accept_scan2d_int64_rows_declared", kScan2D, kChunk64, {Head(h, NonZero(64, 8)), Chunk(NonZero(56, 8))});
  }
  put("reject_scan2d_ends_inside_a_row", kScan2D, kChunk256,
      {Head(Scan2DH(v1::DTYPE_UINT32, v1::OPERATOR_BIT_XOR, 10), NonZero(100, 4))});
  put("reject_scan2d_zero_cols", kScan2D, kChunk256, {Head(Scan2DH(v1::DTYPE_INT32, v1::OPERATOR_SUM, 0))});
  put("reject_scan2d_row_above_limit", kScan2D, kChunk256, {Head(Scan2DH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM, 4096))});
  // SegmentedScan, ReduceByKey and Sort (after the rest, so the earlier seeds' random bytes stay
  // as they were). The second stream is `keys` (keys or head bytes) for the first two and
  // `values` for Sort.
  {
    // Runs of int64 keys across chunks, the keys behind the values and then caught up.
    const std::string v = NonZero(89 * 4, 4), k = RunKeys(89, 8, 6);
    put("accept_segmented_int32_keys_across_chunks", kSegmentedScan, kChunk256,
        {Head(SegKeysH(v1::DTYPE_INT32, v1::OPERATOR_SUM, v1::DTYPE_INT64), v.substr(0, 256), k.substr(0, 160)),
         Chunk("", k.substr(160, 256)), Chunk(v.substr(256), k.substr(416, 256)), Chunk("", k.substr(672))});
  }
  {
    // The canonical tree (float SUM; long segments, whose sums differ from the sequential ones
    // in their bits), exclusive, heads ahead of the values at one point.
    std::string h = Heads(52);
    for (size_t i = 1; i < h.size(); ++i) {
      if (i % 5) h[i] = '\0';  // segments of 5 to 20 or so
    }
    const std::string v = Reals<double>(52);
    put("accept_segmented_float64_heads_exclusive", kSegmentedScan, kChunk256,
        {Head(SegHeadsH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM, true), v.substr(0, 256), h.substr(0, 32)),
         Chunk(v.substr(256, 128), h.substr(32)), Chunk(v.substr(384))});
  }
  {
    // Float MIN (the sequential fold) over +-0, +-inf and NaNs; a declared count.
    auto hd = SegKeysH(v1::DTYPE_FLOAT32, v1::OPERATOR_MIN, v1::DTYPE_UINT32);
    hd.set_element_count(40);
    const std::string v = Keys<float>(40), k = RunKeys(40, 4, 3);
    put("accept_segmented_float32_min_uint32_keys_counted", kSegmentedScan, kChunk64 | kMax4K,
        {Head(hd, v.substr(0, 64), k.substr(0, 64)), Chunk(v.substr(64, 64), k.substr(64, 64)),
         Chunk(v.substr(128), k.substr(128))});
  }
  {
    // Every key first (40 ahead), then the values; exclusive on an exact operator.
    const std::string v = NonZero(40 * 8, 8), k = RunKeys(40, 4, 2);
    put("accept_segmented_int64_bitxor_exclusive_keys_first", kSegmentedScan, kChunk256,
        {Head(SegKeysH(v1::DTYPE_INT64, v1::OPERATOR_BIT_XOR, v1::DTYPE_INT32, true), "", k),
         Chunk(v.substr(0, 256)), Chunk(v.substr(256))});
  }
  {
    auto hd = ByKeyH(v1::DTYPE_INT64, v1::OPERATOR_SUM, v1::DTYPE_INT32);
    hd.set_element_count(70);
    const std::string v = NonZero(70 * 8, 8), k = RunKeys(70, 4, 5);
    put("accept_reduce_by_key_int64", kReduceByKey, kChunk256 | kMax4K,
        {Head(hd, v.substr(0, 256), k.substr(0, 128)), Chunk(v.substr(256, 256), k.substr(128, 128)),
         Chunk(v.substr(512), k.substr(256))});
  }
  {
    // The canonical tree (float SUM) at each run's last element: runs long enough (up to 80)
    // for its association to differ from the sequential one. The values first, then the keys.
    const std::string v = Reals<float>(200), k = RunKeys(200, 8, 40);
    put("accept_reduce_by_key_float32_sum_uint64_keys", kReduceByKey, kChunk1K,
        {Head(ByKeyH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, v1::DTYPE_UINT64), v, k.substr(0, 800)),
         Chunk("", k.substr(800))});
  }
  {
    // Runs of one or two elements, chunks of 8 at the 64-byte limit: runs end at every edge.
    const std::string v = Keys<double>(30), k = RunKeys(30, 8, 1);
    std::vector<SeedRequest> reqs{Head(ByKeyH(v1::DTYPE_FLOAT64, v1::OPERATOR_MAX, v1::DTYPE_INT64))};
    for (size_t i = 0; i < 30; i += 8) reqs.push_back(Chunk(v.substr(i * 8, 64), k.substr(i * 8, 64)));
    put("accept_reduce_by_key_float64_max_int64_keys", kReduceByKey, kChunk64, reqs);
  }
  {
    const std::string k = Keys<float>(150);
    put("accept_sort_float32_argsort", kSort, kChunk256,
        {Head(SortH(v1::DTYPE_FLOAT32, v1::SORT_OUTPUT_INDICES), k.substr(0, 256)), Chunk(k.substr(256, 256)),
         Chunk(""), Chunk(k.substr(512))});
  }
  {
    // Values of another size than the keys, a request behind; descending.
    const std::string k = Keys<double>(60), v = NonZero(60 * 4, 4);
    put("accept_sort_float64_keys_and_values_descending", kSort, kChunk256,
        {Head(SortH(v1::DTYPE_FLOAT64, v1::SORT_OUTPUT_KEYS_AND_VALUES, true, v1::DTYPE_INT32), k.substr(0, 256),
              v.substr(0, 120)),
         Chunk(k.substr(256), v.substr(120))});
  }
  put("accept_sort_int32_descending_keys_and_indices", kSort, kChunk1K,
      {Head(SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_INDICES, true), Keys<int32_t>(200))});
  {
    auto hd = SortH(v1::DTYPE_UINT64, v1::SORT_OUTPUT_KEYS);
    hd.set_element_count(24);
    const std::string k = Keys<uint64_t>(24);
    put("accept_sort_uint64_keys_counted", kSort, kChunk64 | kMax512,
        {Head(hd, k.substr(0, 64)), Chunk(k.substr(64, 64)), Chunk(k.substr(128))});
  }
  {
    // 2^62 int32 keys: 2^64 bytes, which a multiplication wraps to 0 (found reading the handler).
    auto hd = SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS);
    hd.set_element_count(uint64_t{1} << 62);
    put("reject_sort_declared_count_wraps_a_byte_count", kSort, kChunk256, {Head(hd, Keys<int32_t>(16))});
  }
  put("reject_sort_input_above_max_sort_bytes", kSort, kChunk256 | kSortMax512,
      {Head(SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS), Keys<int32_t>(64)), Chunk(Keys<int32_t>(64)),
       Chunk(Keys<int32_t>(64))});
  put("reject_segmented_keys_length_differs", kSegmentedScan, kChunk256,
      {Head(SegKeysH(v1::DTYPE_INT32, v1::OPERATOR_SUM, v1::DTYPE_INT32), NonZero(40, 4), RunKeys(9, 4, 3))});
  {
    v1::SegmentedScanHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.set_op(v1::OPERATOR_SUM);
    put("reject_segmented_no_segments", kSegmentedScan, kChunk256, {Head(h, NonZero(16, 4), Heads(4))});
    h.set_heads(false);
    put("reject_segmented_heads_false", kSegmentedScan, kChunk256, {Head(h, NonZero(16, 4), Heads(4))});
  }
  put("reject_segmented_float_key_dtype", kSegmentedScan, kChunk256,
      {Head(SegKeysH(v1::DTYPE_INT64, v1::OPERATOR_MAX, v1::DTYPE_FLOAT32), NonZero(16, 8), NonZero(8, 4))});
  put("reject_segmented_keys_not_whole_keys", kSegmentedScan, kChunk256,
      {Head(SegKeysH(v1::DTYPE_INT32, v1::OPERATOR_SUM, v1::DTYPE_INT64), NonZero(16, 4), NonZero(12))});
  {
    // Values 80 elements ahead of the heads, beyond 4 chunks of 64 bytes (64 int32 elements).
    std::vector<SeedRequest> reqs{Head(SegHeadsH(v1::DTYPE_INT32, v1::OPERATOR_SUM), NonZero(64, 4))};
    for (int i = 0; i < 4; ++i) reqs.push_back(Chunk(NonZero(64, 4)));
    put("reject_segmented_keys_out_of_step", kSegmentedScan, kChunk64, reqs);
  }
  {
    v1::ReduceByKeyHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.set_op(v1::OPERATOR_SUM);
    put("reject_reduce_by_key_key_dtype_missing", kReduceByKey, kChunk256, {Head(h, NonZero(16, 4), NonZero(16, 4))});
  }
  put("reject_reduce_by_key_more_keys_than_values", kReduceByKey, kChunk256,
      {Head(ByKeyH(v1::DTYPE_INT64, v1::OPERATOR_SUM, v1::DTYPE_UINT32), NonZero(40, 8), RunKeys(5, 4, 2)),
       Chunk("", RunKeys(1, 4, 1))});
  put("reject_sort_values_without_values_output", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS), Keys<int32_t>(4), NonZero(16, 4))});
  put("reject_sort_values_dtype_missing", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES), Keys<int32_t>(4), NonZero(16, 4))});
  put("reject_sort_values_dtype_without_values", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_FLOAT32, v1::SORT_OUTPUT_INDICES, false, v1::DTYPE_INT64), Keys<float>(4))});
  put("reject_sort_unknown_output", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_FLOAT64, static_cast<v1::SortOutput>(9)), Keys<double>(4))});
  put("reject_sort_fewer_values_than_keys", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_INT64, v1::SORT_OUTPUT_KEYS_AND_VALUES, false, v1::DTYPE_FLOAT32), Keys<int64_t>(10),
            Keys<float>(9))});
  put("reject_sort_keys_not_whole_elements", kSort, kChunk256,
      {Head(SortH(v1::DTYPE_INT64, v1::SORT_OUTPUT_KEYS)), Chunk(NonZero(13))});
  WriteResidentSeeds(put);
  WritePipelineSeeds(put);
  // ScanHeader.carry (after the rest, so the earlier seeds' random bytes stay as they were).
  {
    auto h = ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM);
    h.set_carry(std::string("\x07\x00\x00\x80", 4));
    put("accept_scan_int32_sum_carry", kScan, kChunk256, {Head(h, NonZero(200, 4)), Chunk(NonZero(120, 4))});
    auto f = ScanH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM, true);
    const double carry = -0.0;
    f.set_carry(std::string(reinterpret_cast<const char*>(&carry), sizeof carry));
    put("accept_scan_float64_sum_exclusive_carry", kScan, kChunk256, {Head(f, NonZero(256, 8)), Chunk(NonZero(64, 8))});
    h.set_carry(std::string(8, '\x01'));
    put("reject_scan_carry_two_elements", kScan, kChunk256, {Head(h, NonZero(16, 4))});
  }
  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
}

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-seeds") == 0) {
    WriteSeeds(argv[2]);
    return 0;
  }
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) roots.emplace_back(argv[i]);
  if (roots.empty()) {
    roots.emplace_back(GPUSCAN_FUZZ_CORPUS_DIR);
    if (fs::exists(GPUSCAN_FUZZ_REGRESSIONS_DIR)) roots.emplace_back(GPUSCAN_FUZZ_REGRESSIONS_DIR);
  }
  std::vector<fs::path> files;
  for (const fs::path& root : roots) {
    if (fs::is_directory(root)) {
      for (const auto& e : fs::directory_iterator(root)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::exists(root)) {
      files.push_back(root);
    } else {
      std::fprintf(stderr, "no such input: %s\n", root.c_str());
      return 1;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs to replay\n");
    return 1;
  }
  int wrong = 0;
  for (const fs::path& f : files) {
    const std::string bytes = ReadFile(f);
    std::string outcome;
    const bool accepted = gpuscan::fuzz::RunRequestInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                         &outcome) == 0 &&
                          outcome.find(": accepted") != std::string::npos;
    std::printf("%-44s %5zu bytes  %s\n", f.filename().c_str(), bytes.size(), outcome.c_str());
    // Seeds say what the server must do with them: accept_* are valid calls, reject_* are not.
    const std::string name = f.filename().string();
    if ((name.rfind("accept_", 0) == 0 && !accepted) || (name.rfind("reject_", 0) == 0 && accepted)) {
      std::fprintf(stderr, "%s: expected the call to be %s\n", name.c_str(), accepted ? "rejected" : "accepted");
      ++wrong;
    }
  }
  if (wrong) {
    std::printf("replayed %zu inputs: %d accepted or rejected against their name\n", files.size(), wrong);
    return 1;
  }
  std::printf("replayed %zu inputs: every invariant held\n", files.size());
  return 0;
}
