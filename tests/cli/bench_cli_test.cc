// gpuscan bench against an in-process server (CPU engine): --e2e end to end with its JSON
// report and transport ceiling; --kernels refused with the server's clear message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

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

TEST_F(BenchCli, E2EReduceByRequestCount) {
  const std::string json_path = dir_ / "reduce.json";
  ASSERT_EQ(Run("bench --e2e --op reduce --dtype float64 --bytes 80000 --concurrency 2 --requests 6 --plain-io --json " +
                json_path),
            0)
      << out_ << err_;
  pb::Struct doc;
  ASSERT_TRUE(pb::util::JsonStringToMessage(ReadFile(json_path), &doc).ok());
  EXPECT_EQ(Number(doc, "elements"), 10000);
  EXPECT_FALSE(Object(doc, "ceiling_rpc").fields().at("echo").bool_value());
  // --plain-io's Source is copied into each message, and so is the ceiling's pattern.
  EXPECT_EQ(Object(doc, "ceiling_rpc").fields().at("payload").string_value(), "pattern");
  const pb::Struct& level = doc.fields().at("levels").list_value().values(0).struct_value();
  EXPECT_EQ(Number(level, "requests"), 6);
  EXPECT_EQ(Number(Object(level, "ceiling"), "requests"), 6);
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
