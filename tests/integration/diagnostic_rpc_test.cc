// The diagnostic RPCs: Transport (the transport ceiling: bytes in and, with echo, straight back
// out; chunk limit; counts) and Benchmark (refused on the cpu engine; on the cuda engine, a
// small suite run whose rows are verified).
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_server.h"

namespace gpuscan {
namespace {

using testing::TestServer;

class DiagnosticRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  bool cuda() const { return server_->server().engine().name() == "cuda"; }
  Client client_{server_->client_options(64 * 1024)};
  static TestServer* server_;
};
TestServer* DiagnosticRpcTest::server_ = nullptr;

TEST_F(DiagnosticRpcTest, TransportEchoCountsEveryByteBothWays) {
  const uint64_t total = 3 * 64 * 1024 + 17;  // several chunks, the last one short
  TransportResult r = client_.Transport(total, true);
  EXPECT_EQ(r.bytes_in, total);
  EXPECT_EQ(r.bytes_out, total);
  EXPECT_EQ(r.bytes_received, total);
  EXPECT_EQ(r.requests, 4u);
  EXPECT_GT(r.wall_us, 0u);
  EXPECT_GE(r.wall_us, r.server_total_us);
}

TEST_F(DiagnosticRpcTest, TransportEchoReturnsTheSameBytesInOrder) {
  auto stub = server_->stub();
  grpc::ClientContext ctx;
  auto stream = stub->Transport(&ctx);
  std::vector<std::string> sent;
  for (int i = 0; i < 5; ++i) {
    std::string chunk(1000 + 37 * i, '\0');
    for (size_t k = 0; k < chunk.size(); ++k) chunk[k] = static_cast<char>(k * 7 + i);
    v1::TransportRequest req;
    req.set_echo(true);
    req.set_data(chunk);
    ASSERT_TRUE(stream->Write(req));
    sent.push_back(chunk);
    v1::TransportResponse resp;  // read as we go: the echo comes back during the upload
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.data(), chunk) << "chunk " << i;
    EXPECT_FALSE(resp.final());
  }
  stream->WritesDone();
  v1::TransportResponse last;
  ASSERT_TRUE(stream->Read(&last));
  EXPECT_TRUE(last.final());
  EXPECT_TRUE(last.data().empty());
  uint64_t total = 0;
  for (const auto& s : sent) total += s.size();
  EXPECT_EQ(last.bytes_in(), total);
  EXPECT_EQ(last.bytes_out(), total);
  EXPECT_EQ(last.requests(), 5u);
  EXPECT_FALSE(stream->Read(&last));
  EXPECT_TRUE(stream->Finish().ok());
}

// The ceiling of the same bytes sent the same way as a call's array in memory: every byte of the
// caller's array, each chunk borrowed in place, on one call and striped over lanes.
TEST_F(DiagnosticRpcTest, TransportOfACallersArrayCountsEveryByteBothWays) {
  const uint64_t total = 7 * 64 * 1024 + 33;  // several chunks, the last one short
  std::string array(total, '\0');
  for (size_t i = 0; i < array.size(); ++i) array[i] = static_cast<char>(i * 2654435761u >> 13);
  const TransportResult one = client_.Transport(total, true, 0, array.data());
  EXPECT_EQ(one.bytes_in, total);
  EXPECT_EQ(one.bytes_out, total);
  EXPECT_EQ(one.bytes_received, total);
  EXPECT_EQ(one.requests, 8u);
  for (uint32_t lanes : {2u, 3u, 9u}) {  // 9: more lanes than chunks
    const TransportResult striped = client_.TransportLanes(total, true, lanes, 0, array.data());
    EXPECT_EQ(striped.bytes_in, total) << lanes << " lanes";
    EXPECT_EQ(striped.bytes_received, total) << lanes << " lanes";
  }
  const TransportResult counted = client_.Transport(total, false, 0, array.data());
  EXPECT_EQ(counted.bytes_in, total);
  EXPECT_EQ(counted.bytes_received, 0u);
}

TEST_F(DiagnosticRpcTest, TransportWithoutEchoAnswersOnceWithTheCount) {
  const uint64_t total = 5 * 64 * 1024;
  TransportResult r = client_.Transport(total, false);
  EXPECT_EQ(r.bytes_in, total);
  EXPECT_EQ(r.bytes_out, 0u);
  EXPECT_EQ(r.bytes_received, 0u);
}

TEST_F(DiagnosticRpcTest, TransportEmptyCallStillAnswers) {
  TransportResult r = client_.Transport(0, true);
  EXPECT_EQ(r.bytes_in, 0u);
  EXPECT_EQ(r.requests, 1u);
}

TEST_F(DiagnosticRpcTest, TransportChunkAboveTheLimitIsResourceExhausted) {
  const uint64_t limit = server::ServerOptions().chunk_bytes;
  try {
    client_.Transport(limit + 4096, true, limit + 4096);
    FAIL() << "expected RESOURCE_EXHAUSTED";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << e.what();
    EXPECT_NE(e.message().find("chunk limit"), std::string::npos) << e.message();
  }
}

TEST_F(DiagnosticRpcTest, BenchmarkUnknownOperationIsInvalidArgumentNamingIt) {
  v1::BenchmarkRequest req;
  req.add_operations("scan");
  req.add_operations("transpose");
  try {
    client_.Benchmark(req, {});
    FAIL() << "expected INVALID_ARGUMENT";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(e.message().find("'transpose'"), std::string::npos) << e.message();
  }
}

TEST_F(DiagnosticRpcTest, BenchmarkUnknownDTypeIsInvalidArgument) {
  v1::BenchmarkRequest req;
  req.add_dtypes(static_cast<v1::DType>(42));
  try {
    client_.Benchmark(req, {});
    FAIL() << "expected INVALID_ARGUMENT";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(e.message().find("dtypes[0]=42"), std::string::npos) << e.message();
  }
}

TEST_F(DiagnosticRpcTest, BenchmarkDevicesMustBeServedOnce) {
  const v1::ServerInfo info = client_.Info();
  std::string served;
  for (const auto& d : info.devices()) served += (served.empty() ? "" : ", ") + std::to_string(d.ordinal());
  for (const auto& [devices, message] : std::vector<std::pair<std::vector<int>, std::string>>{
           {{99}, "devices[0]=99 is not a device this server serves"},
           {{-1}, "devices[0]=-1 is not a device this server serves"},
           {{info.devices_size() ? info.devices(0).ordinal() : 0, 99}, "is not a device this server serves"}}) {
    v1::BenchmarkRequest req;
    for (int d : devices) req.add_devices(d);
    try {
      client_.Benchmark(req, {});
      FAIL() << "expected INVALID_ARGUMENT";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(e.message().find(message), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(served.empty() ? "it serves none: engine cpu" : "it serves " + served),
                std::string::npos)
          << e.message();
    }
  }
  if (info.devices_size() == 0) return;
  v1::BenchmarkRequest twice;
  twice.add_devices(info.devices(0).ordinal());
  twice.add_devices(info.devices(0).ordinal());
  try {
    client_.Benchmark(twice, {});
    FAIL() << "expected INVALID_ARGUMENT";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(e.message().find("devices[1]=" + std::to_string(info.devices(0).ordinal()) + " is named twice"),
              std::string::npos)
        << e.message();
  }
}

TEST_F(DiagnosticRpcTest, BenchmarkOnTheCpuEngineIsFailedPrecondition) {
  if (cuda()) GTEST_SKIP() << "the server runs the cuda engine";
  v1::BenchmarkRequest req;
  req.add_operations("scan");
  req.add_sizes(1 << 16);
  try {
    client_.Benchmark(req, {});
    FAIL() << "expected FAILED_PRECONDITION";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::FAILED_PRECONDITION) << e.what();
    EXPECT_EQ(e.message(), "Benchmark needs the cuda engine; this server runs cpu");
  }
}

TEST_F(DiagnosticRpcTest, BenchmarkOnTheCudaEngineStreamsVerifiedRows) {
  if (!cuda()) GTEST_SKIP() << "needs the cuda engine (GPUSCAN_TEST_ENGINE=cuda)";
  v1::BenchmarkRequest req;
  req.add_operations("scan");
  req.add_dtypes(v1::DTYPE_INT32);
  req.add_sizes(1 << 16);
  req.set_repetitions(3);
  req.set_warmup(1);
  // The ServerInfo must outlive the loop: a range-for over a member of a temporary reads freed
  // memory (this line crashed the test on the GPU machine as `client_.Info().devices()`).
  const v1::ServerInfo info = client_.Info();
  for (const auto& d : info.devices()) req.add_devices(d.ordinal());  // every device, in turn
  std::vector<v1::BenchmarkRow> rows;
  client_.Benchmark(req, [&](const v1::BenchmarkRow& r) { rows.push_back(r); });
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows) {
    EXPECT_EQ(r.elements(), 1u << 16);
    EXPECT_EQ(r.dtype(), v1::DTYPE_INT32);
    EXPECT_GT(r.median_us(), 0);
    if (r.operation() != "copy") {
      EXPECT_TRUE(r.verified()) << r.operation() << " " << r.algorithm();
    }
  }
}

// "pcie": the link's three rows (the ceiling of shared-memory calls), each with the bytes it
// moved, verified (what went to the device came back), at a rate a PCIe link can have.
TEST_F(DiagnosticRpcTest, BenchmarkPcieRowsMeasureTheLinkBothWays) {
  if (!cuda()) GTEST_SKIP() << "needs the cuda engine (GPUSCAN_TEST_ENGINE=cuda)";
  v1::BenchmarkRequest req;
  req.add_operations("pcie");
  req.add_dtypes(v1::DTYPE_INT64);
  req.add_sizes((1 << 22) + 1);
  std::vector<std::string> algorithms;
  client_.Benchmark(req, [&](const v1::BenchmarkRow& r) {
    algorithms.push_back(r.algorithm());
    EXPECT_EQ(r.operation(), "pcie");
    EXPECT_EQ(r.bytes_moved(), ((1u << 22) + 1) * 8u);
    EXPECT_TRUE(r.verified()) << r.algorithm();
    EXPECT_GT(r.gbps(), 1.0) << r.algorithm();
    EXPECT_LT(r.gbps(), 200.0) << r.algorithm();
  });
  EXPECT_EQ(algorithms, (std::vector<std::string>{"h2d", "d2h", "duplex"}));
}

TEST_F(DiagnosticRpcTest, BenchmarkSizeBeyondDeviceMemoryIsResourceExhausted) {
  if (!cuda()) GTEST_SKIP() << "needs the cuda engine (GPUSCAN_TEST_ENGINE=cuda)";
  v1::BenchmarkRequest req;
  req.add_operations("scan");
  req.add_dtypes(v1::DTYPE_INT64);
  req.add_sizes(uint64_t{1} << 40);
  try {
    client_.Benchmark(req, {});
    FAIL() << "expected RESOURCE_EXHAUSTED";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << e.what();
  }
}

}  // namespace
}  // namespace gpuscan
