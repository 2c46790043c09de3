// Calls that end early (cancelled mid-upload or mid-download, deadline expired) release
// everything they held: after 1000 of them the server's memory is back at its baseline and every
// admission slot is free again.
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using testing::TestServer;

// Resident set size of this process (the in-process server plus the test's clients), in bytes.
uint64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

std::string Bytes(const std::vector<int32_t>& x) {
  return std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(int32_t));
}

enum class Ending { kCancelMidUpload, kCancelMidDownload, kDeadline };

// One call of `rpc` (0 scan, 1 compact, 2 reduce) that ends the given way; returns its status.
grpc::StatusCode EndEarly(v1::GpuScan::Stub& stub, int rpc, Ending ending, const std::string& chunk) {
  grpc::ClientContext ctx;
  if (ending == Ending::kDeadline) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(30));
  }
  auto finish = [&](auto& stream, auto& resp) {
    if (ending == Ending::kCancelMidDownload) stream->Read(&resp);  // a result is on its way
    if (ending != Ending::kDeadline) ctx.TryCancel();
    while (stream->Read(&resp)) {
    }
    return stream->Finish().error_code();
  };
  if (rpc == 0) {
    auto stream = stub.Scan(&ctx);
    v1::ScanRequest h, d;
    h.mutable_header()->set_dtype(v1::DTYPE_INT32);
    h.mutable_header()->set_op(v1::OPERATOR_SUM);
    d.set_data(chunk);
    stream->Write(h);
    stream->Write(d);
    v1::ScanResponse resp;
    return finish(stream, resp);
  }
  if (rpc == 1) {
    auto stream = stub.Compact(&ctx);
    v1::CompactRequest h, d;
    h.mutable_header()->set_dtype(v1::DTYPE_INT32);
    h.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
    h.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(0);
    d.set_values(chunk);
    stream->Write(h);
    stream->Write(d);
    v1::CompactResponse resp;
    return finish(stream, resp);
  }
  v1::ReduceResponse resp;
  auto stream = stub.Reduce(&ctx, &resp);
  v1::ReduceRequest h, d;
  h.mutable_header()->set_dtype(v1::DTYPE_INT32);
  h.mutable_header()->set_op(v1::OPERATOR_SUM);
  d.set_data(chunk);
  stream->Write(h);
  stream->Write(d);
  if (ending != Ending::kDeadline) ctx.TryCancel();  // a reduce has no download: mid-upload
  return stream->Finish().error_code();
}

TEST(CancellationTest, ThousandEarlyEndingsReturnMemoryAndSlotsToBaseline) {
  server::ServerOptions options;
  options.max_concurrent = 4;
  options.max_queued = 0;  // a leaked slot would turn into RESOURCE_EXHAUSTED below
  TestServer server(options);
  auto stub = server.stub();
  GPUSCAN_SEEDED_RNG(rng);
  const std::string chunk = Bytes(testing::RandomInput<int32_t, ops::Sum<int32_t>>(256 * 1024, rng));

  auto run = [&](int calls) {
    int unexpected = 0;
    for (int i = 0; i < calls; ++i) {
      const auto ending = static_cast<Ending>(i % 3);
      const grpc::StatusCode code = EndEarly(*stub, (i / 3) % 3, ending, chunk);
      // A call may also have completed before the cancel arrived; anything else is a defect.
      const bool expected = code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                            code == grpc::StatusCode::OK;
      if (!expected) ++unexpected;
    }
    return unexpected;
  };
  ASSERT_EQ(run(300), 0);  // warm-up: thread pools, arenas and engine buffers reach steady state
  const uint64_t baseline = ResidentBytes();
  ASSERT_EQ(run(1000), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // last OnDone callbacks
  const uint64_t after = ResidentBytes();
  RecordProperty("rss_baseline_bytes", std::to_string(baseline));
  RecordProperty("rss_after_bytes", std::to_string(after));
  EXPECT_LE(after, baseline + baseline / 20) << "RSS grew from " << baseline << " to " << after << " bytes";

  // Every slot is free: max_concurrent slow calls at once are all admitted (no queue).
  std::vector<std::future<grpc::StatusCode>> slow;
  for (uint32_t i = 0; i < options.max_concurrent; ++i) {
    slow.push_back(std::async(std::launch::async, [&] {
      grpc::ClientContext ctx;
      auto s = stub->Scan(&ctx);
      v1::ScanRequest h;
      h.mutable_header()->set_dtype(v1::DTYPE_INT32);
      h.mutable_header()->set_op(v1::OPERATOR_SUM);
      s->Write(h);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      s->WritesDone();
      v1::ScanResponse r;
      while (s->Read(&r)) {
      }
      return s->Finish().error_code();
    }));
  }
  for (auto& f : slow) EXPECT_EQ(f.get(), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace gpuscan
