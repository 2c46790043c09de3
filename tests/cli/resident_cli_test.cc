// The resident commands end to end (put, get, arrays, drop, --ref on every array command, --keep): the
// gpuscan binary against an in-process server with --resident-bytes, results compared with the
// same commands on the files and with gpuscan::Client. Random data, never zeros; --chunk-bytes
// 4096 so that arrays cross many chunks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdlib>
#include <random>
#include <regex>
#include <tuple>
#include <type_traits>

#include "array_files.h"
#include "gpuscan/client.h"
#include "in_process_server.h"
#include "reference.h"  // SameBits
#include "temp_dir.h"

// A namespace of its own: the unity build puts this file beside cli_e2e_test.cc's helpers.
namespace gpuscan::cli_test::resident {
namespace {

using gpuscan::testing::SameBits;

struct CliResult {
  int code = -1;
  std::string out, err;
};

class ResidentCli : public ::testing::Test {
 public:  // the helpers, for RoundTripsAndOperations too
  static void SetUpTestSuite() { server_ = StartCpuServer("127.0.0.1:0", "", uint64_t{256} << 20).release(); }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
    server_ = nullptr;
  }

  // `gpuscan --no-progress --server ADDR --chunk-bytes 4096 [--tenant T] args`, stdout and stderr captured.
  CliResult Cli(const std::string& args, const std::string& tenant = "") const {
    std::string cmd = std::string(GPUSCAN_CLI_PATH) + " --no-progress --server " + server_->address() +
                      " --chunk-bytes 4096 " + (tenant.empty() ? "" : "--tenant " + tenant + " ") + args + " > " +
                      dir_ / "stdout" + " 2> " + dir_ / "stderr";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(dir_ / "stdout");
    r.err = ReadFile(dir_ / "stderr");
    return r;
  }
  // put FILE: the id it printed (48 hex digits and a newline, nothing else on stdout).
  std::string Put(const std::string& file, const std::string& extra = "", const std::string& tenant = "") const {
    const CliResult r = Cli("put " + file + " " + extra, tenant);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(std::regex_match(r.out, std::regex("[0-9a-f]{48}\n"))) << r.out;
    return r.out.substr(0, 48);
  }
  Client client(const std::string& tenant = "") const {
    ClientOptions o;
    o.target = server_->address();
    o.timeout = std::chrono::seconds(120);
    o.tenant = tenant;
    return Client(o);
  }
  std::string Path(const std::string& name) const { return dir_ / name; }

  static server::Server* server_;
  TempDir dir_;
};
server::Server* ResidentCli::server_ = nullptr;

template <class T>
std::vector<T> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      do x = std::uniform_real_distribution<T>(T(-1.5), T(1.5))(rng); while (x == 0);
    } else {
      do x = static_cast<T>(rng()); while (x == 0);
    }
  }
  return v;
}

v1::Operator ParseOperatorName(const std::string& op) { return op == "max" ? v1::OPERATOR_MAX : v1::OPERATOR_SUM; }

std::string JsonField(const std::string& json, const std::string& key) {
  std::smatch m;
  return std::regex_search(json, m, std::regex("\"" + key + "\":(\"[^\"]*\"|[^,}]*)")) ? m[1].str() : "";
}

// Every 4- and 8-byte dtype: put, get whole and in part, scan --ref (= Client::Scan of the
// elements, which cli_e2e_test.cc holds equal to scan -i), reduce --ref (= reduce -i), at sizes
// around the 4096-byte chunks.
template <class T>
void RoundTripsAndOperations(const ResidentCli& t, uint64_t seed) {
  Client client = t.client();
  for (size_t n : {size_t{1}, 4096 / sizeof(T) - 1, 4096 / sizeof(T) + 1, 3 * 4096 / sizeof(T), size_t{10007}}) {
    SCOPED_TRACE(std::string(v1::DType_Name(DTypeOf<T>())) + " n=" + std::to_string(n));
    const std::vector<T> x = Random<T>(n, seed++);
    WriteArray(t.Path("in.npy"), x);
    const std::string id = t.Put(t.Path("in.npy"), "--label cli-" + std::to_string(n));
    CliResult r = t.Cli("get " + id + " -o " + t.Path("back.npy"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(SameBits(ReadArray<T>(t.Path("back.npy")), x));
    if (n > 10) {
      r = t.Cli("get " + id + " --offset 3 --count " + std::to_string(n - 10) + " -o " + t.Path("part.npy"));
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_TRUE(SameBits(ReadArray<T>(t.Path("part.npy")), std::vector<T>(x.begin() + 3, x.end() - 7)));
    }
    for (const char* op : {"sum", "max"}) {
      r = t.Cli(std::string("scan --exclusive --op ") + op + " --ref " + id + " -o " + t.Path("ref.npy"));
      ASSERT_EQ(r.code, 0) << r.err;
      ScanOptions o;
      o.op = ParseOperatorName(op);
      o.exclusive = true;
      EXPECT_TRUE(SameBits(ReadArray<T>(t.Path("ref.npy")), client.Scan(x, o).values)) << op;
      r = t.Cli(std::string("scan --carry 7 --op ") + op + " --ref " + id + " -o " + t.Path("carry.npy"));
      ASSERT_EQ(r.code, 0) << r.err;
      o.exclusive = false;
      o.carry = CarryOf(static_cast<T>(7));  // carry_test.cc holds Client::Scan's carry to the host's fold
      EXPECT_TRUE(SameBits(ReadArray<T>(t.Path("carry.npy")), client.Scan(x, o).values)) << op << " carry";
    }
    const CliResult ref = t.Cli("reduce --json --ref " + id);
    const CliResult file = t.Cli("reduce --json -i " + t.Path("in.npy"));
    ASSERT_EQ(ref.code, 0) << ref.err;
    EXPECT_EQ(JsonField(ref.out, "value"), JsonField(file.out, "value"));
    EXPECT_EQ(JsonField(ref.out, "element_count"), std::to_string(n));
    r = t.Cli("drop " + id);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  EXPECT_EQ(client.ListArrays().arrays_size(), 0);
}

TEST_F(ResidentCli, Int32RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<int32_t>(*this, 1); }
TEST_F(ResidentCli, Int64RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<int64_t>(*this, 100); }
TEST_F(ResidentCli, Uint32RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<uint32_t>(*this, 200); }
TEST_F(ResidentCli, Uint64RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<uint64_t>(*this, 300); }
TEST_F(ResidentCli, Float32RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<float>(*this, 400); }
TEST_F(ResidentCli, Float64RoundTripsAndComputesWhereItLies) { RoundTripsAndOperations<double>(*this, 500); }

TEST_F(ResidentCli, KeptScansChainOnTheServer) {
  const std::vector<int64_t> x = Random<int64_t>(5003, 7);
  WriteArray(Path("in.npy"), x);
  const std::string t = "chain";  // a tenant of its own: arrays counts only this test's
  const std::string a = Put(Path("in.npy"), "", t);
  CliResult r = Cli("scan --ref " + a + " --keep --label prefix --ttl-ms 60000", t);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(std::regex_match(r.out, std::regex("[0-9a-f]{48}\n"))) << r.out;
  const std::string b = r.out.substr(0, 48);
  EXPECT_NE(r.err.find("kept " + b + " int64[5003]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("label prefix"), std::string::npos) << r.err;
  r = Cli("--json scan --op max --ref " + b + " --keep", t);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string c = JsonField(r.out, "id");
  ASSERT_EQ(c.size(), 50u) << r.out;  // quoted
  r = Cli("get " + c.substr(1, 48) + " -o " + Path("c.npy"), t);
  ASSERT_EQ(r.code, 0) << r.err;
  Client cl = client();
  ScanOptions max;
  max.op = v1::OPERATOR_MAX;
  EXPECT_TRUE(SameBits(ReadArray<int64_t>(Path("c.npy")), cl.Scan(cl.Scan(x).values, max).values));
  r = Cli("arrays", t);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;
  for (const std::string& id : {a, b, c.substr(1, 48)}) {
    EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
    EXPECT_EQ(Cli("drop " + id, t).code, 0);
  }
}

TEST_F(ResidentCli, TenantsSeeOnlyTheirOwnArrays) {
  WriteArray(Path("in.npy"), Random<float>(3000, 9));
  const std::string id = Put(Path("in.npy"), "--label theirs", "alice");
  CliResult r = Cli("--json arrays", "alice");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
  EXPECT_EQ(JsonField(r.out, "tenant_bytes"), "12000") << r.out;
  r = Cli("--json arrays", "bob");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(id), std::string::npos) << r.out;
  EXPECT_EQ(JsonField(r.out, "tenant_bytes"), "0") << r.out;
  for (const std::string& cmd : {"get " + id + " -o " + Path("x.npy"), "scan --ref " + id + " -o " + Path("y.npy"),
                                 "reduce --ref " + id, "drop " + id}) {
    r = Cli(cmd, "bob");
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("error: NOT_FOUND"), std::string::npos) << cmd << ": " << r.err;
  }
  EXPECT_EQ(Cli("drop " + id, "alice").code, 0);
}

TEST_F(ResidentCli, DroppedAndMalformedIdsFail) {
  WriteArray(Path("in.npy"), Random<uint32_t>(100, 3));
  const std::string id = Put(Path("in.npy"));
  CliResult r = Cli("drop " + id);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("dropped " + id), std::string::npos) << r.err;
  for (const std::string& cmd : {"get " + id + " -o " + Path("x.npy"), "drop " + id, "reduce --ref " + id}) {
    r = Cli(cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("error: NOT_FOUND"), std::string::npos) << cmd << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("x.npy")));  // no half-written file
  r = Cli("get 1234 -o " + Path("x.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("48 hex digits"), std::string::npos) << r.err;
  EXPECT_NE(Cli("scan --keep -i " + Path("in.npy")).code, 0);  // --keep needs --ref
}

// Every other array command on --ref (and --flags-ref, --keys-ref, --values-ref): the files it
// writes are byte for byte those of the same command on the input files, at sizes around the
// 4096-byte chunks.
template <class T>
void OperationsOnRefsEqualTheFiles(const ResidentCli& t, uint64_t seed) {
  const size_t c = 4096 / sizeof(T);
  for (size_t n : {size_t{1}, c - 1, c + 1, 3 * c}) {
    SCOPED_TRACE(std::string(v1::DType_Name(DTypeOf<T>())) + " n=" + std::to_string(n));
    const std::vector<T> x = Random<T>(n, seed++);
    const std::vector<uint32_t> v = Random<uint32_t>(n, seed++);
    std::vector<int64_t> keys(n);
    std::string flags(n, '\0');
    for (size_t i = 0; i < n; ++i) {
      keys[i] = static_cast<int64_t>(i / 5) % 7;
      flags[i] = (v[i] & 3) == 0;
    }
    WriteArray(t.Path("x.npy"), x);
    WriteArray(t.Path("v.npy"), v);
    WriteArray(t.Path("k.npy"), keys);
    WriteRawArray(t.Path("f.npy"), v1::DTYPE_UINT8, flags, n);
    const std::string X = t.Put(t.Path("x.npy")), V = t.Put(t.Path("v.npy")), K = t.Put(t.Path("k.npy")),
                      F = t.Put(t.Path("f.npy"));
    const size_t cols = n % 3 == 0 ? 3 : 1;
    // (the command's options, its file inputs, its resident inputs, the output files it writes)
    const std::vector<std::array<std::string, 3>> runs = {
        {"compact --predicate gt --threshold 0", "-i X", "--ref X"},
        {"compact --output-kind both --indices-output O2", "-i X --flags F", "--ref X --flags-ref F"},
        {"histogram --bins 7 --range -2,2", "-i X", "--ref X"},
        {"histogram --bins 5", "-i X", "--ref X"},  // the range found by two reductions
        {"scan --op max", "-i X --keys K", "--ref X --keys-ref K"},
        {"scan --exclusive", "-i X --segment-heads F", "--ref X --flags-ref F"},
        {"scan --axis 0 --cols " + std::to_string(cols), "-i X", "--ref X"},
        {"scan2d --cols " + std::to_string(cols), "-i X", "--ref X"},
        {"reduce --keys-out O2", "-i X --by-key K", "--ref X --keys-ref K"},
        {"sort --descending", "-i X", "--ref X"},
        {"sort --values-out O2", "-i X --values V", "--ref X --values-ref V"},
        {"sort --argsort O2", "-i X", "--ref X"},
    };
    auto fill = [&](std::string s, const std::string& tag) {
      const std::vector<std::pair<std::string, std::string>> names = {
          {"X", tag == "file" ? t.Path("x.npy") : X}, {"V", tag == "file" ? t.Path("v.npy") : V},
          {"K", tag == "file" ? t.Path("k.npy") : K}, {"F", tag == "file" ? t.Path("f.npy") : F},
          {"O2", t.Path(tag + "2.npy")}};
      for (const auto& [from, to] : names) s = std::regex_replace(s, std::regex("\\b" + from + "\\b"), to);
      return s;
    };
    for (const auto& [cmd, files, refs] : runs) {
      const CliResult file = t.Cli(fill(cmd + " " + files, "file") + " -o " + t.Path("file1.npy"));
      const CliResult ref = t.Cli(fill(cmd + " " + refs, "ref") + " -o " + t.Path("ref1.npy"));
      ASSERT_EQ(file.code, 0) << cmd << ": " << file.err;
      ASSERT_EQ(ref.code, 0) << cmd << ": " << ref.err;
      EXPECT_EQ(ReadFile(t.Path("ref1.npy")), ReadFile(t.Path("file1.npy"))) << cmd;
      if (cmd.find("O2") != std::string::npos) {
        EXPECT_EQ(ReadFile(t.Path("ref2.npy")), ReadFile(t.Path("file2.npy"))) << cmd;
      }
    }
    for (const std::string& id : {X, V, K, F}) EXPECT_EQ(t.Cli("drop " + id).code, 0);
  }
}

TEST_F(ResidentCli, Int32OperationsOnRefsEqualTheFiles) { OperationsOnRefsEqualTheFiles<int32_t>(*this, 600); }
TEST_F(ResidentCli, Float64OperationsOnRefsEqualTheFiles) { OperationsOnRefsEqualTheFiles<double>(*this, 700); }

// A .npy file's elements, as raw bytes (its dtype aside).
std::string Elements(const std::string& path) {
  cli::InputSpec spec;
  spec.path = path;
  return ReadAllBytes(*cli::ArrayInput::Open(spec));
}

// --keep prints the kept arrays' ids, one a line (values before indices, keys before values),
// and get of each gives the file command's output.
TEST_F(ResidentCli, KeepPrintsEveryKeptArray) {
  const size_t n = 3001;
  const std::vector<float> x = Random<float>(n, 11);
  std::vector<int32_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = static_cast<int32_t>(i / 4 % 9);
  WriteArray(Path("x.npy"), x);
  WriteArray(Path("k.npy"), keys);
  const std::string t = "keep";  // a tenant of its own
  const std::string X = Put(Path("x.npy"), "", t), K = Put(Path("k.npy"), "", t);
  // (the resident command, how many ids it prints, the file command whose outputs they equal)
  const std::vector<std::tuple<std::string, int, std::string>> runs = {
      {"compact --predicate gt --threshold 0 --output-kind both --ref " + X,
       2, "compact --predicate gt --threshold 0 --output-kind both -i x.npy -o 0.npy --indices-output 1.npy"},
      {"sort --ref " + K + " --values-ref " + X, 2, "sort -i k.npy --values x.npy -o 0.npy --values-out 1.npy"},
      {"reduce --ref " + X + " --keys-ref " + K, 2, "reduce -i x.npy --by-key k.npy --keys-out 0.npy -o 1.npy"},
      {"scan --ref " + X + " --keys-ref " + K, 1, "scan -i x.npy --keys k.npy -o 0.npy"},
      {"scan --ref " + X + " --axis 1 --cols 3001", 1, "scan -i x.npy --axis 1 --cols 3001 -o 0.npy"},
      {"scan2d --ref " + X + " --cols 1", 1, "scan2d -i x.npy --cols 1 -o 0.npy"},
  };
  for (const auto& [cmd, count, file_cmd] : runs) {
    CliResult r = Cli(cmd + " --keep --label kept", t);
    ASSERT_EQ(r.code, 0) << cmd << ": " << r.err;
    ASSERT_TRUE(std::regex_match(r.out, std::regex("([0-9a-f]{48}\n){" + std::to_string(count) + "}"))) << r.out;
    const CliResult file = Cli(std::regex_replace(file_cmd, std::regex("(\\S+\\.npy)"), Path("$1")), t);
    ASSERT_EQ(file.code, 0) << file_cmd << ": " << file.err;
    for (int i = 0; i < count; ++i) {
      const std::string id = r.out.substr(49 * i, 48);
      EXPECT_NE(r.err.find(id), std::string::npos) << r.err;  // the note with its info
      ASSERT_EQ(Cli("get " + id + " -o " + Path("got.npy"), t).code, 0);
      // (the elements: a kept matrix comes back 1-D, where scan2d -o writes the 2-D .npy)
      EXPECT_EQ(Elements(Path("got.npy")), Elements(Path(std::to_string(i) + ".npy"))) << cmd << " #" << i;
      EXPECT_EQ(Cli("drop " + id, t).code, 0);
    }
    r = Cli("--json " + cmd + " --keep", t);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(JsonField(r.out, "id"), "") << r.out;
  }
}

TEST_F(ResidentCli, RefOptionsRefuseWhatCannotApply) {
  WriteArray(Path("x.npy"), Random<int32_t>(100, 5));
  WriteArray(Path("short.npy"), Random<int64_t>(10, 6));
  const std::string X = Put(Path("x.npy")), S = Put(Path("short.npy"));
  // (the command, its exit code, what stderr says)
  const std::vector<std::tuple<std::string, int, std::string>> refusals = {
      {"histogram --ref " + X + " --keep", 1, "--keep"},                      // counts are no array
      {"compact --ref " + X + " --flags " + Path("x.npy"), 1, "excludes"},   // a file beside --ref
      {"compact --flags-ref " + X + " -i " + Path("x.npy"), 1, "--ref"},    // --flags-ref needs --ref
      {"compact --ref " + X, 1, "--flags-ref ID or --predicate"},
      {"reduce --ref " + X + " --keep", 1, "no array"},
      {"reduce --ref " + X + " --keys-ref " + S, 1, "one per element"},
      {"sort --ref " + X + " --values-ref " + X, 1, "--values-out"},
      {"scan2d --ref " + X, 1, "--cols"},
      {"scan --ref " + X + " --axis 0 --cols 7", 1, "whole number of rows"},
      {"sort --ref " + X + " --keep --argsort " + Path("p.npy"), 1, "excludes"},
  };
  for (const auto& [cmd, code, says] : refusals) {
    const CliResult r = Cli(cmd);
    EXPECT_EQ(r.code, code) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.out, "") << cmd;
  }
  EXPECT_EQ(client().ListArrays().arrays_size(), 2);  // nothing kept by a refused call
}

TEST(ResidentCliNoBudget, AServerWithoutResidentBytesAnswersUnimplemented) {
  auto server = StartCpuServer();
  TempDir dir;
  const std::string cmd = std::string(GPUSCAN_CLI_PATH) + " --server " + server->address() + " arrays 2> " +
                          (dir / "err");
  const int status = std::system(cmd.c_str());
  server->Shutdown();
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
  EXPECT_NE(ReadFile(dir / "err").find("UNIMPLEMENTED"), std::string::npos);
}

}  // namespace
}  // namespace gpuscan::cli_test::resident
