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
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_target.h"

namespace fs = std::filesystem;
using gpuscan::fuzz::SeedRequest;
namespace v1 = gpuscan::v1;

namespace {

constexpr int kScan = 0, kReduce = 1, kCompact = 2, kHistogram = 3, kScan2D = 4;
// Limits byte: chunk limit 8 << (b & 7); max request bytes {0, 64, 512, 4096}[(b >> 3) & 3].
constexpr uint8_t kChunk1K = 7, kChunk256 = 5, kChunk64 = 3;
constexpr uint8_t kMax512 = 2 << 3, kMax4K = 3 << 3;

std::mt19937_64 rng(20261122);  // fixed: the seeds are reproducible

// `bytes` random bytes with no zero element (elements of `size` bytes).
std::string NonZero(size_t bytes, size_t size = 1) {
  std::string s(bytes, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  for (size_t i = 0; i + size <= bytes; i += size) s[i] = static_cast<char>(1 + rng() % 255);
  return s;
}

template <class H>
SeedRequest Head(const H& h, std::string data = {}, std::string flags = {}) {
  SeedRequest r;
  r.has_header = true;
  r.header = h.SerializeAsString();
  r.data = std::move(data);
  r.flags = std::move(flags);
  return r;
}
SeedRequest Chunk(std::string data, std::string flags = {}) {
  SeedRequest r;
  r.data = std::move(data);
  r.flags = std::move(flags);
  return r;
}
v1::ScanHeader ScanH(v1::DType d, v1::Operator op, bool exclusive = false) {
  v1::ScanHeader h;
  h.set_dtype(d);
  h.set_op(op);
  if (exclusive) h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
  return h;
}
v1::ReduceHeader ReduceH(v1::DType d, v1::Operator op) {
  v1::ReduceHeader h;
  h.set_dtype(d);
  h.set_op(op);
  return h;
}
v1::CompactHeader FlagsH(v1::DType d, v1::CompactOutput out = v1::COMPACT_OUTPUT_VALUES) {
  v1::CompactHeader h;
  h.set_dtype(d);
  h.set_use_flags(true);
  h.set_output(out);
  return h;
}
v1::HistogramHeader EvenH(v1::DType d, uint32_t bins, double lo, double hi) {
  v1::HistogramHeader h;
  h.set_dtype(d);
  h.set_bins(bins);
  h.set_lo(lo);
  h.set_hi(hi);
  return h;
}
v1::HistogramHeader EdgesH(v1::DType d, std::vector<double> edges) {
  v1::HistogramHeader h;
  h.set_dtype(d);
  h.mutable_edges()->Add(edges.begin(), edges.end());
  return h;
}
v1::Scan2DHeader Scan2DH(v1::DType d, v1::Operator op, uint64_t cols) {
  v1::Scan2DHeader h;
  h.set_dtype(d);
  h.set_op(op);
  h.set_cols(cols);
  return h;
}
// Flags with about half the elements kept (nonzero bytes of any value).
std::string Flags(size_t n) {
  std::string f(n, '\0');
  for (auto& c : f) c = rng() & 1 ? static_cast<char>(1 + rng() % 255) : '\0';
  return f;
}

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
