// The gpuscan binary end to end, its transports and failures: compaction from files, shared memory,
// lanes, text through stdin, bad input, health, an unreachable server and retries (the operations:
// cli_e2e_test.cc).
#include "cli_e2e.h"

namespace gpuscan::cli_test {
namespace {

class CliIo : public CliE2E {};

TEST_F(CliIo, CompactPredicateGtWritesValuesAndIndices) {
  std::vector<int32_t> x = RandomInt32(kN);
  WriteArray(Path("in.npy"), x);
  CliRun r = Run("compact --server " + addr() + " -i " + Path("in.npy") + " -o " +
                 Path("kept.npy") + " --predicate gt --threshold 1000000 --output-kind both " +
                 "--indices-output " + Path("idx.npy") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;

  CompactOptions o;
  o.predicate.set_op(v1::PREDICATE_OP_GT);
  o.predicate.mutable_threshold()->set_int_value(1000000);
  o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
  CompactResult<int32_t> want = client().Compact(x, o);
  EXPECT_EQ(JsonField(r.out, "kept_count"), std::to_string(want.kept_count)) << r.out;
  EXPECT_TRUE(ReadArray<int32_t>(Path("kept.npy")) == want.values);
  EXPECT_TRUE(ReadArray<int64_t>(Path("idx.npy")) == want.indices);
  EXPECT_GT(want.kept_count, kN / 3);  // about half are above the threshold
  EXPECT_LT(want.kept_count, kN * 2 / 3);
}

TEST_F(CliIo, CompactByRawFlagsFile) {
  std::vector<int32_t> x = RandomInt32(100'003);
  std::vector<uint8_t> flags(x.size());
  for (size_t i = 0; i < x.size(); ++i) flags[i] = (x[i] & 3) == 0;
  WriteArray(Path("in.npy"), x);
  WriteFile(Path("flags.bin"), std::string(flags.begin(), flags.end()));
  CliRun r = Run("compact --server " + addr() + " -i " + Path("in.npy") + " --flags " +
                 Path("flags.bin") + " -o " + Path("kept.bin"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int32_t> want;
  for (size_t i = 0; i < x.size(); ++i) {
    if (flags[i]) want.push_back(x[i]);
  }
  EXPECT_TRUE(ReadArray<int32_t>(Path("kept.bin")) == want);
  EXPECT_NE(r.err.find("kept " + std::to_string(want.size()) + " of 100003"), std::string::npos)
      << r.err;
}

// --shm: through one-shot regions, and with files that already lie under the server's
// --shm-dir read and written where they are (no region of the CLI's own left behind).
// scan --carry: every result is op(carry, scan[i]) in the results' dtype (an exclusive scan's
// first is the carry), streamed and through --shm, a narrow input's carry in its wider results;
// text that is not one of the dtype's values, and --lanes beside it, are refused before any call.
TEST_F(CliIo, ScanCarryFoldsTheValueIntoEveryResult) {
  const std::vector<int32_t> x = RandomInt32(kN / 3 + 7);
  const int32_t c = -123456789;
  std::vector<int32_t> want(x.size());
  uint32_t acc = static_cast<uint32_t>(c);  // wrapping, as int32 sums do
  for (size_t i = 0; i < x.size(); ++i) want[i] = static_cast<int32_t>(acc += static_cast<uint32_t>(x[i]));
  WriteArray(Path("in.npy"), x);
  const std::string s = " --server " + addr() + " -i " + Path("in.npy") + " --carry " + std::to_string(c);
  CliRun r = Run("scan" + s + " -o " + Path("s.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("s.npy")) == want);
  EXPECT_NE(r.err.find("carry " + std::to_string(c)), std::string::npos) << r.err;
  r = Run("scan" + s + " --exclusive -o " + Path("e.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int32_t> ex = ReadArray<int32_t>(Path("e.npy"));
  ASSERT_EQ(ex.size(), x.size());
  EXPECT_EQ(ex[0], c);
  EXPECT_TRUE(std::equal(ex.begin() + 1, ex.end(), want.begin()));
  r = Run("scan" + s + " --op max -o " + Path("m.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int32_t> m = ReadArray<int32_t>(Path("m.npy"));
  int32_t best = c;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(m[i], best = std::max(best, x[i])) << i;

  const std::string shm = Path("shm");
  std::filesystem::create_directory(shm);
  std::unique_ptr<server::Server> shm_server = StartCpuServer("127.0.0.1:0", shm);
  r = Run("scan --shm --server " + shm_server->address() + " -i " + Path("in.npy") + " --carry " + std::to_string(c) +
          " -o " + Path("shm.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("shm.npy")) == want);

  std::string i8(100003, '\0');  // int8 into int64 results: the carry is an int64
  std::mt19937_64 rng(53);
  for (auto& b : i8) b = static_cast<char>(rng());
  WriteRawArray(Path("i8.npy"), v1::DTYPE_INT8, i8, i8.size());
  r = Run("scan --server " + addr() + " -i " + Path("i8.npy") + " --carry 3000000000 -o " + Path("w.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<int64_t> w = ReadArray<int64_t>(Path("w.npy"));
  ASSERT_EQ(w.size(), i8.size());
  int64_t wide = 3000000000;
  for (size_t i = 0; i < i8.size(); ++i) ASSERT_EQ(w[i], wide += static_cast<int8_t>(i8[i])) << i;

  for (const std::string carry : {"1.5", "3000000000", "x"}) {
    r = Run("scan" + std::string(" --server ") + addr() + " -i " + Path("in.npy") + " --carry " + carry + " -o " +
            Path("bad.npy"));
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("--carry '" + carry + "': not a int32 value"), std::string::npos) << r.err;
  }
  r = Run("scan" + s + " --lanes 2 -o " + Path("bad.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--lanes"), std::string::npos) << r.err;
}

TEST_F(CliIo, ShmScansFilesWhereTheyLieOrThroughRegions) {
  const std::string shm = Path("shm");
  std::filesystem::create_directory(shm);
  std::unique_ptr<server::Server> shm_server = StartCpuServer("127.0.0.1:0", shm);
  const std::string s = " --server " + shm_server->address() + " ";
  std::vector<int32_t> x = RandomInt32(kN);
  const std::vector<int32_t> want = client().Scan(x).values;
  WriteArray(Path("in.npy"), x);
  WriteArray(shm + "/in.npy", x);
  WriteFile(shm + "/in.bin", std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(int32_t)));
  // In and out under --shm-dir: .npy (payload after its header) and raw.
  CliRun r = Run("scan --shm" + s + "-i " + shm + "/in.npy -o " + shm + "/out.npy");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(shm + "/out.npy") == want);
  EXPECT_NE(r.err.find("where the files lie"), std::string::npos) << r.err;
  r = Run("scan --shm" + s + "--format raw --dtype int32 -i " + shm + "/in.bin -o " + shm + "/out.bin");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(shm + "/out.bin") == want);
  // Only through regions of its own: elsewhere, or one side elsewhere.
  r = Run("scan --shm" + s + "-i " + Path("in.npy") + " -o " + Path("out.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out.npy")) == want);
  EXPECT_EQ(r.err.find("where the files lie"), std::string::npos) << r.err;
  r = Run("scan --shm" + s + "-i " + shm + "/in.npy -o " + Path("out2.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out2.npy")) == want);
  // Reduce reads the file where it lies.
  r = Run("reduce --shm" + s + "-i " + shm + "/in.npy --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "value"), std::to_string(want.back())) << r.out;
  // Nothing but the files named here under --shm-dir.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(shm)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"in.bin", "in.npy", "out.bin", "out.npy"}));
  shm_server->Shutdown();
}

// --lanes K: scan, reduce and compact striped over K connections give the one-call results.
TEST_F(CliIo, LanesGiveTheOneCallResults) {
  std::vector<int32_t> x = RandomInt32(300'007);
  std::vector<uint8_t> flags(x.size());
  for (size_t i = 0; i < x.size(); ++i) flags[i] = (x[i] & 3) == 0;
  WriteArray(Path("in.npy"), x);
  WriteFile(Path("flags.bin"), std::string(flags.begin(), flags.end()));
  const std::string common = "--server " + addr() + " --chunk-bytes 65536 ";
  CliRun r = Run(common + "scan --lanes 3 -i " + Path("in.npy") + " -o " + Path("out.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out.npy")) == client().Scan(x).values);
  r = Run(common + "reduce --json --op max --lanes 4 -i " + Path("in.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "value"), std::to_string(client().Reduce(x, v1::OPERATOR_MAX).value)) << r.out;
  EXPECT_EQ(JsonField(r.out, "element_count"), std::to_string(x.size())) << r.out;
  r = Run(common + "compact --lanes 2 -i " + Path("in.npy") + " --flags " + Path("flags.bin") + " -o " +
          Path("kept.bin"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<int32_t> want;
  for (size_t i = 0; i < x.size(); ++i) {
    if (flags[i]) want.push_back(x[i]);
  }
  EXPECT_TRUE(ReadArray<int32_t>(Path("kept.bin")) == want);
  // Files are read and written by position (pread/pwrite from each lane); text, pipes and
  // .npy outputs whose count is unknown up front take the ordered way. Every pairing agrees.
  const auto scanned = client().Scan(x).values;
  WriteFile(Path("in.raw"), std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(int32_t)));
  r = Run(common + "scan --lanes 4 --format raw --dtype int32 -i " + Path("in.raw") + " -o " + Path("out.raw"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out.raw"), cli::Format::kRaw) == scanned);
  r = Run(common + "scan --lanes 4 --dtype int32 --format raw -o " + Path("piped.npy"), "cat " + Path("in.raw"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("piped.npy")) == scanned);
  r = Run(common + "scan --lanes 5 -i " + Path("in.npy") + " -o " + Path("out.txt"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("out.txt"), cli::Format::kText) == scanned);
  r = Run(common + "compact --lanes 3 -i " + Path("in.npy") + " --flags " + Path("flags.bin") +
          " --output-kind both -o " + Path("kept.npy") + " --indices-output " + Path("idx.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(ReadArray<int32_t>(Path("kept.npy")) == want);  // the header's count patched to the kept
  std::vector<int64_t> want_idx;
  for (size_t i = 0; i < x.size(); ++i) {
    if (flags[i]) want_idx.push_back(static_cast<int64_t>(i));
  }
  EXPECT_TRUE(ReadArray<int64_t>(Path("idx.npy")) == want_idx);
  r = Run(common + "scan --lanes 0 -i " + Path("in.npy") + " -o " + Path("out2.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--lanes"), std::string::npos) << r.err;
}

TEST_F(CliIo, TextFromStdinToStdout) {
  CliRun r = Run("scan --server " + addr() + " --dtype int32", "printf '1 2 3\\n4,5'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n3\n6\n10\n15\n");
}

TEST_F(CliIo, BitwiseOperatorOnFloatIsInvalidArgument) {
  WriteArray(Path("f.npy"), std::vector<float>{1.f, 2.f, 3.f});
  CliRun r = Run("scan --op bit_xor --server " + addr() + " -i " + Path("f.npy") + " -o " +
                 Path("out.npy"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("error: INVALID_ARGUMENT"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(Path("out.npy")));  // no half-written result
}

TEST_F(CliIo, BadInputStopsTheCallWithTheInputsMessage) {
  CliRun r = Run("scan --server " + addr() + " --format raw --dtype int32 -o " + Path("o.bin"),
                 "printf 'abcde'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: raw input stdin is 5 bytes, not a multiple"), std::string::npos)
      << r.err;

  WriteFile(Path("bad.txt"), "1 2\nthree\n");
  r = Run("reduce --server " + addr() + " -i " + Path("bad.txt"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad token 'three'"), std::string::npos) << r.err;
}

TEST_F(CliIo, HealthAndInfo) {
  CliRun r = Run("health --server " + addr());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");

  r = Run("info --server " + addr());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("engine             cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu_blocked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float scan default deterministic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sort, scan2d"), std::string::npos) << r.out;  // the operations served
  EXPECT_NE(r.out.find("scan2d row         at most 64.0 MiB"), std::string::npos) << r.out;

  r = Run("--json info --server " + addr());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"engine\":\"cpu\""), std::string::npos) << r.out;
}

// The exit codes --help promises: health of a server that does not answer is 2 (not SERVING),
// with the error; a command line that does not parse is 1 with "error:" (CLI11 exited 105-109).
TEST_F(CliIo, UnreachableServerIsUnavailable) {
  CliRun r = Run("health --timeout 5 --server 127.0.0.1:1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: UNAVAILABLE"), std::string::npos) << r.err;
  r = Run("scan --dtype complex64 --server 127.0.0.1:1");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: --dtype", 0), 0u) << r.err;
}

// --retries: a server that comes up while the CLI retries is reached, and the result is whole.
TEST_F(CliIo, RetriesReachAServerThatComesUp) {
  int port = 0;
  {
    auto probe = StartCpuServer();  // a port free a moment ago, nothing on it now
    port = probe->port();
    probe->Shutdown();
  }
  std::vector<int32_t> x = RandomInt32(300'007);
  WriteArray(Path("in.npy"), x);
  std::unique_ptr<server::Server> late;
  std::thread start_late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    late = StartCpuServer("127.0.0.1:" + std::to_string(port));
  });
  CliRun r = Run("scan --retries 20 --timeout 60 --chunk-bytes 65536 --server 127.0.0.1:" + std::to_string(port) +
                 " -i " + Path("in.npy") + " -o " + Path("out.npy"));
  start_late.join();
  ASSERT_TRUE(late);
  late->Shutdown();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("gpuscan: UNAVAILABLE: "), std::string::npos) << r.err;  // a retry was announced
  EXPECT_NE(r.err.find("; try 2 in "), std::string::npos) << r.err;
  std::vector<int32_t> got = ReadArray<int32_t>(Path("out.npy"));
  ASSERT_EQ(got.size(), x.size());
  uint32_t acc = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    acc += static_cast<uint32_t>(x[i]);
    ASSERT_EQ(got[i], static_cast<int32_t>(acc)) << "at " << i;
  }
}

TEST_F(CliIo, RetriesRunOutWithTheirCountAndSkipStdin) {
  WriteArray(Path("in.npy"), RandomInt32(1000));
  CliRun r = Run("reduce --retries 2 --timeout 30 --server 127.0.0.1:1 -i " + Path("in.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("; try 3 in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(gave up after 3 tries)"), std::string::npos) << r.err;
  r = Run("reduce --retries 0 --server 127.0.0.1:1 -i " + Path("in.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.find("try 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("gave up"), std::string::npos) << r.err;
  r = Run("scan --retries 2 --server 127.0.0.1:1 --dtype int32", "printf '1 2 3'");  // stdin: read once
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: UNAVAILABLE"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("try 2"), std::string::npos) << r.err;
}


}  // namespace
}  // namespace gpuscan::cli_test
