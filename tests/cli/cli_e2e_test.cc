// The gpuscan binary end to end: an in-process server (CPU engine) on a free loopback port,
// multi-chunk .npy files, and the CLI's results compared with gpuscan::Client on the same data.
#include "cli_e2e.h"

namespace gpuscan::cli_test {
namespace {

TEST_F(CliE2E, ScanInt32MatchesClientAndSequentialSum) {
  std::vector<int32_t> x = RandomInt32(kN);
  WriteArray(Path("in.npy"), x);
  CliRun r = Run("scan --server " + addr() + " -i " + Path("in.npy") + " -o " + Path("out.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("server timing"), std::string::npos) << r.err;

  std::vector<int32_t> got = ReadArray<int32_t>(Path("out.npy"));
  ASSERT_EQ(got.size(), kN);
  EXPECT_TRUE(got == client().Scan(x).values);
  uint32_t acc = 0;  // two's-complement wrap, as the service defines it
  for (size_t i = 0; i < kN; ++i) {
    acc += static_cast<uint32_t>(x[i]);
    ASSERT_EQ(got[i], static_cast<int32_t>(acc)) << "at " << i;
  }
}

TEST_F(CliE2E, ExclusiveScanFloat64IsBitIdenticalToClient) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> x(kN);
  for (auto& v : x) v = d(rng);
  WriteArray(Path("in.npy"), x);
  // Global options before the subcommand work too.
  CliRun r = Run("--server " + addr() + " scan --exclusive -i " + Path("in.npy") + " -o " +
                 Path("out.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  ScanOptions o;
  o.exclusive = true;
  std::vector<double> want = client().Scan(x, o).values;
  std::vector<double> got = ReadArray<double>(Path("out.npy"));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0);
  EXPECT_EQ(got[0], 0.0);
}

TEST_F(CliE2E, ReduceJsonReportsValueAndCount) {
  std::vector<int32_t> x = RandomInt32(kN);
  WriteArray(Path("in.npy"), x);
  CliRun r = Run("reduce --json --op max --server " + addr() + " -i " + Path("in.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "value"), std::to_string(client().Reduce(x, v1::OPERATOR_MAX).value))
      << r.out;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(kN)) << r.out;
  EXPECT_EQ(JsonField(r.out, "dtype"), "\"int32\"") << r.out;
  EXPECT_EQ(JsonField(r.out, "bytes_in"), std::to_string(kN * 4)) << r.out;
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);  // one object, one line
}

TEST_F(CliE2E, HistogramEvenAutoRangeAndExplicitEdges) {
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> d(0, 10);
  std::vector<float> x(kN);
  for (float& v : x) v = d(rng);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  WriteArray(Path("in.npy"), x);
  HistogramBins bins;
  bins.bins = 64;
  bins.lo = -20;
  bins.hi = 25.5;
  const HistogramResult want = client().Histogram(x, bins);
  CliRun r = Run("histogram --server " + addr() + " -i " + Path("in.npy") + " --bins 64 --range=-20,25.5 -o " +
                 Path("counts.npy") + " --edges-out " + Path("edges.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadArray<uint64_t>(Path("counts.npy")), want.counts);
  EXPECT_EQ(ReadArray<double>(Path("edges.npy")), want.edges);
  EXPECT_EQ(JsonField(r.out, "nan_count"), "1") << r.out;
  EXPECT_EQ(JsonField(r.out, "below"), std::to_string(want.below)) << r.out;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(kN)) << r.out;

  // Explicit edges from a file; the counts as text on stdout.
  WriteArray(Path("edges_in.npy"), std::vector<double>{-5, 0, 0, 1, 30});
  bins.edges = {-5, 0, 0, 1, 30};
  const HistogramResult want_edges = client().Histogram(x, bins);
  r = Run("histogram --server " + addr() + " -i " + Path("in.npy") + " --edges " + Path("edges_in.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::string text;
  for (uint64_t c : want_edges.counts) text += std::to_string(c) + "\n";
  EXPECT_EQ(r.out, text);

  // No --range: numpy's default, the input's min and max; NaN makes it fail clearly.
  r = Run("histogram --server " + addr() + " -i " + Path("in.npy") + " --bins 8 -o " + Path("c.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("autodetected range of [nan, nan] is not finite"), std::string::npos) << r.err;
  x[7] = 1.5f;
  WriteArray(Path("in.npy"), x);
  r = Run("histogram --server " + addr() + " -i " + Path("in.npy") + " --bins 8 -o " + Path("c.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  bins.edges.clear();
  bins.bins = 8;
  bins.lo = *std::min_element(x.begin(), x.end());
  bins.hi = *std::max_element(x.begin(), x.end());
  EXPECT_EQ(ReadArray<uint64_t>(Path("c.npy")), client().Histogram(x, bins).counts);

  r = Run("histogram --server " + addr() + " -i " + Path("in.npy") + " --bins 0 --range 0,1 -o " + Path("c.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
}

// scan --keys / --segment-heads: the client's segmented scan, written out; refused beside
// --lanes, and with float keys.
TEST_F(CliE2E, SegmentedScanByKeysAndHeads) {
  std::vector<int32_t> x = RandomInt32(kN);
  std::vector<int64_t> keys(kN);
  std::vector<uint8_t> heads(kN);
  for (size_t i = 0; i < kN; ++i) {
    keys[i] = static_cast<int64_t>(i / 997) * 7 - 3;  // runs of 997 that cross the 1 MiB chunks
    heads[i] = i % 2500 == 0 || (x[i] & 1023) == 5;
  }
  WriteArray(Path("in.npy"), x);
  WriteArray(Path("keys.npy"), keys);
  WriteFile(Path("heads.bin"), std::string(heads.begin(), heads.end()));
  CliRun r = Run("scan --server " + addr() + " -i " + Path("in.npy") + " --keys " + Path("keys.npy") + " -o " +
                 Path("out.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(kN)) << r.out;
  std::vector<int32_t> got = ReadArray<int32_t>(Path("out.npy"));
  ASSERT_EQ(got.size(), kN);
  uint32_t acc = 0;
  for (size_t i = 0; i < kN; ++i) {
    acc = (i == 0 || keys[i] != keys[i - 1]) ? static_cast<uint32_t>(x[i]) : acc + static_cast<uint32_t>(x[i]);
    ASSERT_EQ(got[i], static_cast<int32_t>(acc)) << "at " << i;
  }

  r = Run("scan --server " + addr() + " -i " + Path("in.npy") + " --segment-heads " + Path("heads.bin") +
          " --op max --exclusive -o " + Path("out.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  SegmentedScanOptions o;
  o.op = v1::OPERATOR_MAX;
  o.exclusive = true;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out.npy")) == client().SegmentedScanHeads(x.data(), kN, heads.data(), o).values);

  r = Run("scan --server " + addr() + " -i " + Path("in.npy") + " --keys " + Path("keys.npy") + " --lanes 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--lanes"), std::string::npos) << r.err;
  WriteArray(Path("fkeys.npy"), std::vector<float>(kN, 1.5f));
  r = Run("scan --server " + addr() + " -i " + Path("in.npy") + " --keys " + Path("fkeys.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("segment keys must be int32, int64, uint32 or uint64"), std::string::npos) << r.err;
}

// reduce --by-key: the runs' values to -o and their keys to --keys-out, as the client's
// ReduceByKey; -o without --by-key is refused.
TEST_F(CliE2E, ReduceByKeyWritesValuesAndKeys) {
  std::vector<int32_t> x = RandomInt32(kN);
  std::vector<uint32_t> keys(kN);
  for (size_t i = 0; i < kN; ++i) keys[i] = static_cast<uint32_t>(i / 1234) % 7;  // runs across chunks
  WriteArray(Path("in.npy"), x);
  WriteArray(Path("keys.npy"), keys);
  CliRun r = Run("reduce --server " + addr() + " -i " + Path("in.npy") + " --by-key " + Path("keys.npy") +
                 " --op min -o " + Path("v.npy") + " --keys-out " + Path("k.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto want = client().ReduceByKey(x, keys, v1::OPERATOR_MIN);
  EXPECT_EQ(JsonField(r.out, "run_count"), std::to_string(want.keys.size())) << r.out;
  EXPECT_EQ(want.keys.size(), (kN + 1233) / 1234);
  EXPECT_TRUE(ReadArray<int32_t>(Path("v.npy")) == want.values);
  EXPECT_TRUE(ReadArray<uint32_t>(Path("k.npy")) == want.keys);
  r = Run("reduce --server " + addr() + " -i " + Path("in.npy") + " -o " + Path("v.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--by-key"), std::string::npos) << r.err;
}

// sort: keys to -o, --argsort, --values moved to --values-out, --descending; as the client's.
TEST_F(CliE2E, SortKeysArgsortAndValues) {
  std::vector<int32_t> x = RandomInt32(kN);
  for (size_t i = 0; i < kN; i += 3) x[i] = static_cast<int32_t>(i % 17);  // equal keys
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = static_cast<float>(i);
  WriteArray(Path("in.npy"), x);
  WriteArray(Path("v.npy"), v);
  CliRun r = Run("sort --server " + addr() + " -i " + Path("in.npy") + " -o " + Path("s.npy") + " --argsort " +
                 Path("idx.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(kN)) << r.out;
  std::vector<int32_t> want = x;
  std::stable_sort(want.begin(), want.end());
  EXPECT_TRUE(ReadArray<int32_t>(Path("s.npy")) == want);
  EXPECT_TRUE(ReadArray<int64_t>(Path("idx.npy")) == client().Argsort(x.data(), kN).indices);
  r = Run("sort --server " + addr() + " -i " + Path("in.npy") + " --descending --values " + Path("v.npy") +
          " --values-out " + Path("vs.npy") + " -o " + Path("s.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto pairs = client().SortPairs(x.data(), v.data(), kN, true);
  EXPECT_TRUE(ReadArray<int32_t>(Path("s.npy")) == pairs.keys);
  EXPECT_TRUE(ReadArray<float>(Path("vs.npy")) == pairs.values);
  r = Run("sort --server " + addr() + " -i " + Path("in.npy") + " --values " + Path("v.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--values-out"), std::string::npos) << r.err;
}

// Narrow .npy inputs (int8, bool, float16): scan and reduce accumulate them in numpy's default
// dtype or --out-dtype, the output file in that dtype; --shm with them is refused, and so is an
// RPC that does not serve them (the server's message).
TEST_F(CliE2E, NarrowInputsAccumulateInAWiderDType) {
  std::mt19937_64 rng(47);
  const uint64_t n = 100003;
  std::string i8(n, '\0');
  for (auto& c : i8) c = static_cast<char>(rng());
  WriteRawArray(Path("i8.npy"), v1::DTYPE_INT8, i8, n);
  std::vector<int64_t> want(n);
  int64_t acc = 0;
  for (uint64_t i = 0; i < n; ++i) want[i] = acc += static_cast<int8_t>(i8[i]);
  CliRun r = Run("scan --server " + addr() + " -i " + Path("i8.npy") + " -o " + Path("s.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int64_t>(Path("s.npy")) == want);
  r = Run("scan --server " + addr() + " -i " + Path("i8.npy") + " --out-dtype int32 --exclusive -o " + Path("e.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int32_t> ex = ReadArray<int32_t>(Path("e.npy"));
  ASSERT_EQ(ex.size(), n);
  EXPECT_EQ(ex[0], 0);
  EXPECT_EQ(ex[n - 1], static_cast<int32_t>(want[n - 2]));
  r = Run("reduce --server " + addr() + " -i " + Path("i8.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(want.back()) + "\n");

  std::string halves(2 * n, '\0');  // float16 ones: every prefix sum up to 2048 is exact
  for (uint64_t i = 0; i < n; ++i) halves[2 * i + 1] = '\x3c';  // 0x3c00 = 1.0
  WriteRawArray(Path("f16.npy"), v1::DTYPE_FLOAT16, halves, n);
  r = Run("scan --server " + addr() + " -i " + Path("f16.npy") + " --out-dtype float64 -o " + Path("h.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> h = ReadArray<double>(Path("h.npy"));
  ASSERT_EQ(h.size(), n);
  EXPECT_EQ(h[2047], 2048.0);
  EXPECT_EQ(h[n - 1], static_cast<double>(n));
  r = Run("reduce --server " + addr() + " -i " + Path("f16.npy") + " --op max");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");

  r = Run("scan --server " + addr() + " --shm -i " + Path("i8.npy") + " -o " + Path("x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("drop --shm"), std::string::npos) << r.err;
  r = Run("compact --server " + addr() + " --shm -i " + Path("i8.npy") + " --predicate gt --threshold 0 -o " +
          Path("x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("drop --shm"), std::string::npos) << r.err;
}

// sort, compact and histogram take narrow files as they are: sorted and kept values in the same
// dtype, exactly (float16 in totalOrder, NaNs and -0 included), counts as numpy's.
TEST_F(CliE2E, NarrowFilesSortCompactAndCountAsTheyAre) {
  std::mt19937_64 rng(4747);
  const uint64_t n = 70001;
  std::string i8(n, '\0');
  for (auto& c : i8) c = static_cast<char>(rng());
  WriteRawArray(Path("i8.npy"), v1::DTYPE_INT8, i8, n);
  auto raw = [&](const std::string& name) {
    cli::InputSpec spec;
    spec.path = Path(name);
    return ReadAllBytes(*cli::ArrayInput::Open(spec));
  };
  std::vector<int8_t> v(n);
  std::memcpy(v.data(), i8.data(), n);
  std::vector<int8_t> sorted = v;
  std::stable_sort(sorted.begin(), sorted.end());
  CliRun r = Run("sort --server " + addr() + " -i " + Path("i8.npy") + " -o " + Path("s.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(raw("s.npy"), std::string(reinterpret_cast<const char*>(sorted.data()), n));

  std::string kept;
  std::vector<int64_t> where;
  for (uint64_t i = 0; i < n; ++i) {
    if (v[i] > -7) kept.push_back(static_cast<char>(v[i])), where.push_back(static_cast<int64_t>(i));
  }
  r = Run("compact --server " + addr() + " -i " + Path("i8.npy") + " --predicate gt --threshold -7 --output-kind both" +
          " -o " + Path("k.npy") + " --indices-output " + Path("w.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(raw("k.npy"), kept);
  EXPECT_TRUE(ReadArray<int64_t>(Path("w.npy")) == where);

  std::vector<uint64_t> counts(16);
  for (int8_t x : v) ++counts[std::min(15, (x + 128) / 16)];  // 16 even bins over [-128, 128]
  r = Run("histogram --server " + addr() + " -i " + Path("i8.npy") + " --bins 16 --range=-128,128 -o " + Path("c.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadArray<uint64_t>(Path("c.npy")), counts);
  r = Run("histogram --server " + addr() + " -i " + Path("i8.npy") + " --bins 4 --json -o " + Path("c4.npy"));  // the range from the data
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(n)) << r.out;

  // float16: random bit patterns (NaNs of both signs, infinities, -0, subnormals) in totalOrder.
  std::vector<uint16_t> h(n);
  for (auto& x : h) x = static_cast<uint16_t>(rng());
  h[0] = 0x8000, h[1] = 0x0000, h[2] = 0x7c00, h[3] = 0xfc00;
  WriteRawArray(Path("f16.npy"), v1::DTYPE_FLOAT16, std::string(reinterpret_cast<const char*>(h.data()), 2 * n), n);
  auto total_order = [](uint16_t b) { return static_cast<uint16_t>(b & 0x8000 ? ~b : b | 0x8000); };
  std::vector<uint16_t> hs = h;
  std::stable_sort(hs.begin(), hs.end(), [&](uint16_t a, uint16_t b) { return total_order(a) < total_order(b); });
  r = Run("sort --server " + addr() + " -i " + Path("f16.npy") + " -o " + Path("hs.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(raw("hs.npy"), std::string(reinterpret_cast<const char*>(hs.data()), 2 * n));
}

// scan --axis: a 2-D .npy scanned along either axis (the shape kept), exclusive too, or a flat
// input with --cols; as the client's ScanAlong; --axis beside --lanes or --keys is refused.
TEST_F(CliE2E, ScanAlongAnAxisKeepsTheShape) {
  const size_t rows = 37, cols = kN / 37;
  std::vector<int32_t> x = RandomInt32(rows * cols);
  WriteArray(Path("m.npy"), x, cli::Format::kAuto, cols);
  for (int axis : {0, 1}) {
    for (bool exclusive : {false, true}) {
      CliRun r = Run("scan --server " + addr() + " -i " + Path("m.npy") + " --axis " + std::to_string(axis) +
                     (exclusive ? " --exclusive" : "") + " --op max -o " + Path("a.npy"));
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(NpyShape(Path("a.npy")), (std::vector<uint64_t>{rows, cols}));
      EXPECT_TRUE(ReadArray<int32_t>(Path("a.npy")) ==
                  client().ScanAlong(x.data(), rows, cols, axis, v1::OPERATOR_MAX, exclusive).values)
          << "axis " << axis << (exclusive ? " exclusive" : "");
    }
  }
  WriteArray(Path("flat.npy"), x);
  CliRun r = Run("scan --server " + addr() + " -i " + Path("flat.npy") + " --axis 0 --cols " + std::to_string(cols) +
                 " -o " + Path("c.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("c.npy")) == client().ScanAlong(x.data(), rows, cols, 0).values);
  // A narrow matrix accumulates in --out-dtype (numpy's default: int64 for int8).
  std::string m8(rows * cols, '\0');
  for (size_t i = 0; i < m8.size(); ++i) m8[i] = static_cast<char>(x[i]);
  WriteRawArray(Path("m8.npy"), v1::DTYPE_INT8, m8, rows * cols);
  std::vector<int64_t> down(rows * cols), across(rows * cols);  // inclusive along axis 0, exclusive along 1
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      const int64_t v = static_cast<int8_t>(m8[i * cols + j]);
      down[i * cols + j] = (i ? down[(i - 1) * cols + j] : 0) + v;
      across[i * cols + j] = j ? across[i * cols + j - 1] + static_cast<int8_t>(m8[i * cols + j - 1]) : 0;
    }
  }
  r = Run("scan --server " + addr() + " -i " + Path("m8.npy") + " --axis 0 --cols " + std::to_string(cols) + " -o " +
          Path("d8.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int64_t>(Path("d8.npy")) == down);
  r = Run("scan --server " + addr() + " -i " + Path("m8.npy") + " --axis 1 --exclusive --out-dtype int32 --cols " +
          std::to_string(cols) + " -o " + Path("a8.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("a8.npy")) == std::vector<int32_t>(across.begin(), across.end()));
  for (const std::string& bad : std::vector<std::string>{" --axis 2", " --axis 1 --lanes 2", " --cols 5",
                                                        " --axis 0 --keys " + Path("m.npy")}) {
    r = Run("scan --server " + addr() + " -i " + Path("m.npy") + bad + " -o " + Path("x.npy"));
    EXPECT_NE(r.code, 0) << bad;
  }
}

// scan2d: the shape from a 2-D .npy (kept in the output), or --cols for a 1-D input; as the
// client's; a 1-D .npy without --cols, --cols that disagree with the shape or do not divide the
// input: errors naming them.
TEST_F(CliE2E, Scan2DKeepsTheShape) {
  const size_t rows = 37, cols = kN / 37;
  std::vector<int32_t> x = RandomInt32(rows * cols);
  WriteArray(Path("m.npy"), x, cli::Format::kAuto, cols);
  CliRun r = Run("scan2d --server " + addr() + " -i " + Path("m.npy") + " -o " + Path("sat.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "rows"), std::to_string(rows)) << r.out;
  EXPECT_EQ(NpyShape(Path("sat.npy")), (std::vector<uint64_t>{rows, cols}));
  const auto want = client().Scan2D(x.data(), rows, cols).values;
  EXPECT_TRUE(ReadArray<int32_t>(Path("sat.npy")) == want);
  uint32_t total = 0;  // the table's last element sums the whole matrix (wrapping)
  for (int32_t v : x) total += static_cast<uint32_t>(v);
  EXPECT_EQ(static_cast<uint32_t>(want.back()), total);
  WriteArray(Path("flat.npy"), x);
  r = Run("scan2d --server " + addr() + " -i " + Path("flat.npy") + " --cols " + std::to_string(cols) + " --op max -o " +
          Path("max.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("max.npy")) == client().Scan2D(x.data(), rows, cols, v1::OPERATOR_MAX).values);
  r = Run("scan2d --server " + addr() + " -i " + Path("flat.npy") + " -o " + Path("x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--cols"), std::string::npos) << r.err;
  r = Run("scan2d --server " + addr() + " -i " + Path("m.npy") + " --cols 3 -o " + Path("x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("conflicts"), std::string::npos) << r.err;
  r = Run("scan2d --server " + addr() + " -i " + Path("flat.npy") + " --cols " + std::to_string(cols + 1) + " -o " +
          Path("x.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("whole number of rows"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuscan::cli_test
