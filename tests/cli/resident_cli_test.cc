// The resident commands end to end (put, get, arrays, drop, scan/reduce --ref, scan --keep): the
// gpuscan binary against an in-process server with --resident-bytes, results compared with the
// same commands on the files and with gpuscan::Client. Random data, never zeros; --chunk-bytes
// 4096 so that arrays cross many chunks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <random>
#include <regex>
#include <type_traits>

#include "array_files.h"
#include "gpuscan/client.h"
#include "in_process_server.h"
#include "temp_dir.h"

// A namespace of its own: the unity build puts this file beside cli_e2e_test.cc's helpers.
namespace gpuscan::cli_test::resident {
namespace {

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

template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
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
