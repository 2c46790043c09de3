// gpuscan bench against an in-process server (CPU engine): --e2e end to end with its JSON
// report and transport ceiling; --kernels refused with the server's clear message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "gpuscan/client.h"
#include "in_process_server.h"
#include "temp_dir.h"

namespace gpuscan::cli_test {
namespace {

namespace pb = google::protobuf;

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartCpuServer().release(); }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
    server_ = nullptr;
  }

  int Run(const std::string& args) {
    const std::string cmd = std::string(GPUSCAN_CLI_PATH) + " --no-progress -s " + server_->address() + " " + args +
                            " > " + dir_ / "stdout" + " 2> " + dir_ / "stderr";
    const int status = std::system(cmd.c_str());
    out_ = ReadFile(dir_ / "stdout");
    err_ = ReadFile(dir_ / "stderr");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static server::Server* server_;
  TempDir dir_;
  std::string out_, err_;
};
server::Server* BenchCli::server_ = nullptr;

double Number(const pb::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing key " << key;
  if (it == s.fields().end()) return -1;
  EXPECT_EQ(it->second.kind_case(), pb::Value::kNumberValue) << key;
  return it->second.number_value();
}

const pb::Struct& Object(const pb::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != pb::Value::kStructValue) {
    ADD_FAILURE() << "missing object " << key;
    return pb::Struct::default_instance();
  }
  return it->second.struct_value();
}

TEST_F(BenchCli, E2EScanReportsLevelsAndTheTransportCeiling) {
  const std::string json_path = dir_ / "out.json";
  ASSERT_EQ(Run("bench --e2e --op scan --elements 100000 --concurrency 1,4 --duration 1 --json " + json_path), 0)
      << out_ << err_;
  EXPECT_NE(out_.find("%ceil"), std::string::npos) << out_;

  pb::Struct doc;
  const std::string text = ReadFile(json_path);
  ASSERT_TRUE(pb::util::JsonStringToMessage(text, &doc).ok()) << text;
  EXPECT_EQ(doc.fields().at("op").string_value(), "scan");
  EXPECT_EQ(doc.fields().at("dtype").string_value(), "int32");
  EXPECT_EQ(Number(doc, "elements"), 100000);
  EXPECT_EQ(Number(doc, "bytes_per_request"), 400000);
  EXPECT_EQ(Number(doc, "warmup_calls"), 1);  // the default: one untimed call before each level and ceiling
  EXPECT_EQ(Object(doc, "server").fields().at("engine").string_value(), "cpu");
  EXPECT_TRUE(Object(doc, "ceiling_rpc").fields().at("echo").bool_value());
  // The calls send the input from where it lies, so the ceiling sends the same bytes the same way.
  EXPECT_EQ(Object(doc, "ceiling_rpc").fields().at("payload").string_value(), "input");
  EXPECT_NE(out_.find("ceiling: Transport with echo of the input in place"), std::string::npos) << out_;

  const auto& levels = doc.fields().at("levels").list_value().values();
  ASSERT_EQ(levels.size(), 2);
  const double expected_concurrency[] = {1, 4};
  for (int i = 0; i < 2; ++i) {
    const pb::Struct& level = levels[i].struct_value();
    EXPECT_EQ(Number(level, "concurrency"), expected_concurrency[i]);
    EXPECT_GT(Number(level, "requests"), 0);
    EXPECT_EQ(Number(level, "errors"), 0);
    EXPECT_GT(Number(level, "requests_per_s"), 0);
    EXPECT_GT(Number(level, "gbps"), 0);
    const pb::Struct& lat = Object(level, "latency_ms");
    EXPECT_GT(Number(lat, "p50"), 0);
    EXPECT_LE(Number(lat, "p50"), Number(lat, "p90"));
    EXPECT_LE(Number(lat, "p90"), Number(lat, "p99"));
    const pb::Struct& stages = Object(level, "stages_us");
    for (const char* k : {"receive", "queue", "h2d", "kernel", "d2h", "send", "total"}) EXPECT_GE(Number(stages, k), 0);
    EXPECT_GT(Number(stages, "total"), 0);
    const pb::Struct& ceiling = Object(level, "ceiling");
    EXPECT_GT(Number(ceiling, "gbps"), 0);
    EXPECT_GT(Number(ceiling, "requests"), 0);
    const double pct = Number(level, "pct_of_ceiling");
    EXPECT_GT(pct, 0);
    EXPECT_LT(pct, 1000);  // the service cannot beat its own transport by far
  }
}

// --lanes: each call striped over 3 connections, results checked, the ceiling as 3 plain calls.
TEST_F(BenchCli, E2EScanOverLanesChecked) {
  const std::string json_path = dir_ / "lanes.json";
  ASSERT_EQ(Run("--chunk-bytes 65536 bench --e2e --op scan --elements 100003 --lanes 3 --check --concurrency 1 "
                "--requests 2 --json " + json_path),
            0)
      << out_ << err_;
  EXPECT_NE(out_.find("3 lanes per call"), std::string::npos) << out_;
  EXPECT_NE(out_.find("results checked"), std::string::npos) << out_;
  pb::Struct doc;
  ASSERT_TRUE(pb::util::JsonStringToMessage(ReadFile(json_path), &doc).ok());
  EXPECT_EQ(Number(doc, "lanes"), 3);
  EXPECT_TRUE(doc.fields().at("checked").bool_value());
  const pb::Struct& level = doc.fields().at("levels").list_value().values(0).struct_value();
  EXPECT_EQ(Number(level, "requests"), 2);
  EXPECT_EQ(Number(level, "errors"), 0);
  EXPECT_EQ(Number(Object(level, "ceiling"), "requests"), 2);
  EXPECT_EQ(Number(Object(level, "ceiling"), "errors"), 0);
}

// --shm: arrays in regions under the server's --shm-dir, and the ceiling is the host's own pass
// over the same bytes (a copy for a scan, a read for a reduce), measured in the same run.
TEST_F(BenchCli, E2ESharedMemoryMeasuresTheHostsOwnCopyAsItsCeiling) {
  TempDir regions;
  std::unique_ptr<server::Server> shm_server = StartCpuServer("127.0.0.1:0", regions.str());
  for (const char* op : {"scan", "reduce"}) {
    const std::string json_path = dir_ / (std::string(op) + "_shm.json");
    const std::string cmd = std::string(GPUSCAN_CLI_PATH) + " --no-progress -s " + shm_server->address() +
                            " bench --e2e --op " + op + " --bytes 400000 --shm --check --concurrency 1 --requests 3 --json " +
                            json_path + " > " + dir_ / "stdout" + " 2> " + dir_ / "stderr";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir_ / "stdout") << ReadFile(dir_ / "stderr");
    const bool scan = std::string(op) == "scan";
    EXPECT_NE(ReadFile(dir_ / "stdout").find(scan ? "ceiling: the host copying the same bytes on 8 threads"
                                                  : "ceiling: the host reading the same bytes on 8 threads"),
              std::string::npos)
        << ReadFile(dir_ / "stdout");
    pb::Struct doc;
    ASSERT_TRUE(pb::util::JsonStringToMessage(ReadFile(json_path), &doc).ok());
    EXPECT_TRUE(doc.fields().at("shm").bool_value());
    const pb::Struct& ceiling_rpc = Object(doc, "ceiling_rpc");
    EXPECT_EQ(ceiling_rpc.fields().at("name").string_value(), "host");
    EXPECT_EQ(ceiling_rpc.fields().at("host").string_value(), scan ? "memcpy" : "read");
    EXPECT_EQ(Number(ceiling_rpc, "threads"), 8);
    const pb::Struct& level = doc.fields().at("levels").list_value().values(0).struct_value();
    EXPECT_EQ(Number(level, "requests"), 3);
    EXPECT_EQ(Number(level, "errors"), 0);
    EXPECT_EQ(Number(Object(level, "ceiling"), "requests"), 3);
    EXPECT_GT(Number(Object(level, "ceiling"), "gbps"), 0);
    EXPECT_GT(Number(level, "pct_of_ceiling"), 0);
    // The PCIe ceiling is the cuda engine's to measure (Benchmark's "pcie" rows): a CPU server
    // says why not, and the JSON has no pcie member (the GPU run checks it is there).
    EXPECT_NE(ReadFile(dir_ / "stdout").find("PCIe ceiling: not measured (FAILED_PRECONDITION"), std::string::npos)
        << ReadFile(dir_ / "stdout");
    EXPECT_EQ(doc.fields().count("pcie"), 0u);
  }
  shm_server->Shutdown();
}

TEST_F(BenchCli, E2EReduceByRequestCount) {
  const std::string json_path = dir_ / "reduce.json";
  ASSERT_EQ(Run("bench --e2e --op reduce --dtype float64 --bytes 80000 --concurrency 2 --requests 6 --plain-io --warmup-calls 0 --json " +
                json_path),
            0)
      << out_ << err_;
  pb::Struct doc;
  ASSERT_TRUE(pb::util::JsonStringToMessage(ReadFile(json_path), &doc).ok());
  EXPECT_EQ(Number(doc, "elements"), 10000);
  EXPECT_EQ(Number(doc, "warmup_calls"), 0);
  EXPECT_FALSE(Object(doc, "ceiling_rpc").fields().at("echo").bool_value());
  // --plain-io's Source is copied into each message, and so is the ceiling's pattern.
  EXPECT_EQ(Object(doc, "ceiling_rpc").fields().at("payload").string_value(), "pattern");
  const pb::Struct& level = doc.fields().at("levels").list_value().values(0).struct_value();
  EXPECT_EQ(Number(level, "requests"), 6);
  EXPECT_EQ(Number(Object(level, "ceiling"), "requests"), 6);
}

// --resident: the input put once, each call naming it (scan results checked); the ceiling is one
// unary call, compared by latency; the array is dropped at the end.
TEST_F(BenchCli, E2EResidentCallsAgainstOneUnaryCall) {
  std::unique_ptr<server::Server> keeper = StartCpuServer("127.0.0.1:0", "", 64 << 20);
  for (const char* op : {"scan", "reduce", "compact"}) {
    const std::string json_path = dir_ / (std::string(op) + "_resident.json");
    const std::string cmd = std::string(GPUSCAN_CLI_PATH) + " --no-progress -s " + keeper->address() +
                            " bench --e2e --op " + op + " --elements 1025 --resident --check --concurrency 1,2 " +
                            "--requests 6 --json " + json_path + " > " + dir_ / "stdout" + " 2> " + dir_ / "stderr";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir_ / "stdout") << ReadFile(dir_ / "stderr");
    const std::string out = ReadFile(dir_ / "stdout");
    EXPECT_NE(out.find("the array put once, resident on the server"), std::string::npos) << out;
    EXPECT_NE(out.find("ceiling: one unary call (Health)"), std::string::npos) << out;
    if (std::string(op) == "scan") EXPECT_NE(out.find("results checked"), std::string::npos) << out;
    pb::Struct doc;
    ASSERT_TRUE(pb::util::JsonStringToMessage(ReadFile(json_path), &doc).ok());
    EXPECT_TRUE(doc.fields().at("resident").bool_value());
    EXPECT_EQ(Object(doc, "ceiling_rpc").fields().at("name").string_value(), "Health");
    for (const auto& v : doc.fields().at("levels").list_value().values()) {
      const pb::Struct& level = v.struct_value();
      EXPECT_EQ(Number(level, "requests"), 6);
      EXPECT_EQ(Number(level, "errors"), 0);
      EXPECT_GT(Number(Object(level, "latency_ms"), "p50"), 0);
      EXPECT_GT(Number(Object(Object(level, "ceiling"), "latency_ms"), "p50"), 0);
      EXPECT_GT(Number(level, "pct_of_ceiling"), 0);
    }
  }
  // Every run's array was dropped when it ended.
  gpuscan::ClientOptions o;
  o.target = keeper->address();
  EXPECT_EQ(gpuscan::Client(o).ListArrays().arrays_size(), 0);
  // Refused with the modes that move the input some other way.
  EXPECT_EQ(Run("bench --e2e --op scan --elements 1024 --resident --lanes 2 --requests 1"), 1);
  EXPECT_NE(err_.find("--resident takes none of"), std::string::npos) << err_;
  keeper->Shutdown();
}

TEST_F(BenchCli, KernelsOnTheCpuEngineFailsWithTheServersReason) {
  EXPECT_EQ(Run("bench --kernels --ops scan --sizes 2^16"), 1);
  EXPECT_NE(err_.find("Benchmark needs the cuda engine; this server runs cpu"), std::string::npos) << err_;
}

TEST_F(BenchCli, NeedsExactlyOneMode) {
  EXPECT_EQ(Run("bench --op scan"), 1);
  EXPECT_NE(err_.find("--kernels"), std::string::npos) << err_;
}

}  // namespace
}  // namespace gpuscan::cli_test
