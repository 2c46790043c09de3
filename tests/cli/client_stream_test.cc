// gpuscan::Client's streaming machinery under failure: a Source or Sink that throws, a
// deadline, a server-side rejection mid-stream, flags chunked with their values. Every path
// must end the call, join the writer thread and report the right error.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "gpuscan/client.h"
#include "gpuscan/json.h"
#include "in_process_server.h"

namespace gpuscan::cli_test {
namespace {

class ClientStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartCpuServer().release(); }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
  }
  static Client MakeClient(size_t chunk_bytes = 1 << 16, int timeout_ms = 60000) {
    ClientOptions o;
    o.target = server_->address();
    o.chunk_bytes = chunk_bytes;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    return Client(o);
  }
  static v1::ScanHeader Int32SumHeader() {
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.set_op(v1::OPERATOR_SUM);
    return h;
  }
  // Endless ones: `limit` chunks of int32 1s, then end (or throw, when `then_throw`).
  static Source Ones(int limit, bool then_throw = false) {
    return [limit, then_throw, calls = 0](void* buf, size_t max) mutable -> size_t {
      if (calls++ == limit) {
        if (then_throw) throw std::runtime_error("disk on fire");
        return 0;
      }
      for (size_t i = 0; i < max / 4; ++i) static_cast<int32_t*>(buf)[i] = 1;
      return max / 4 * 4;
    };
  }
  static server::Server* server_;
};
server::Server* ClientStream::server_ = nullptr;

TEST_F(ClientStream, SourceExceptionEndsTheCallAndPropagates) {
  Client c = MakeClient();
  try {
    c.ScanStream(Int32SumHeader(), Ones(20, /*then_throw=*/true), [](const void*, size_t) {});
    ADD_FAILURE() << "no exception";
  } catch (const RpcError& e) {
    ADD_FAILURE() << "got RpcError " << e.what() << " instead of the Source's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "disk on fire");
  }
  EXPECT_EQ(c.Scan(std::vector<int32_t>{1, 2}).values, (std::vector<int32_t>{1, 3}));
}

TEST_F(ClientStream, SinkExceptionCancelsWithoutHanging) {
  Client c = MakeClient();
  int responses = 0;
  auto sink = [&](const void*, size_t) {
    if (++responses == 3) throw std::logic_error("consumer gave up");
  };
  EXPECT_THROW(c.ScanStream(Int32SumHeader(), Ones(1000), sink), std::logic_error);
  EXPECT_EQ(responses, 3);
}

TEST_F(ClientStream, DeadlineExceededIsAnRpcError) {
  Client c = MakeClient(1 << 16, /*timeout_ms=*/200);
  auto slow = [inner = Ones(1000)](void* buf, size_t max) mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return inner(buf, max);
  };
  v1::ReduceHeader rh;
  rh.set_dtype(v1::DTYPE_INT32);
  rh.set_op(v1::OPERATOR_SUM);
  try {
    c.ReduceStream(rh, slow);
    ADD_FAILURE() << "no exception";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::DEADLINE_EXCEEDED) << e.what();
  }
  v1::ScanHeader h = Int32SumHeader();
  try {
    c.ScanStream(h, slow, [](const void*, size_t) {});
    ADD_FAILURE() << "no exception";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::DEADLINE_EXCEEDED) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("DEADLINE_EXCEEDED: ", 0), 0u) << e.what();
  }
}

// CancelCalls (the C API's gpuscan_cancel_calls, a Python caller's Ctrl-C): every call in flight,
// one stream or striped, fails CANCELLED at once and is not retried; the client carries on.
TEST_F(ClientStream, CancelCallsStopsEveryCallInFlightWithoutRetrying) {
  ClientOptions o;
  o.target = server_->address();
  o.chunk_bytes = 1 << 12;
  o.timeout = std::chrono::seconds(60);
  o.retry.attempts = 3;
  o.retry.initial_backoff = std::chrono::milliseconds(1);
  Client c(o);
  std::atomic<int> replays{0};
  const Replay slow = [&replays] {
    ++replays;
    return Source([inner = Ones(100000)](void* buf, size_t max) mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return inner(buf, max);
    });
  };
  v1::ReduceHeader rh;
  rh.set_dtype(v1::DTYPE_INT32);
  rh.set_op(v1::OPERATOR_SUM);
  for (uint32_t lanes : {1u, 4u}) {
    replays = 0;
    std::atomic<int> cancelled{0};
    std::vector<std::thread> calls;
    calls.emplace_back([&] {
      try {
        c.ScanStream(Int32SumHeader(), slow, [](const void*, size_t) {}, {}, lanes);
      } catch (const RpcError& e) {
        if (e.code() == grpc::StatusCode::CANCELLED) ++cancelled;
      }
    });
    calls.emplace_back([&] {
      try {
        c.ReduceStream(rh, slow, {}, lanes);
      } catch (const RpcError& e) {
        if (e.code() == grpc::StatusCode::CANCELLED) ++cancelled;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both are streaming
    const auto asked = std::chrono::steady_clock::now();
    c.CancelCalls();
    for (auto& t : calls) t.join();
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(5)) << lanes;
    EXPECT_EQ(cancelled, 2) << lanes;
    EXPECT_EQ(replays, 2) << "a cancelled call is not retried; lanes " << lanes;
    EXPECT_EQ(c.Scan(std::vector<int32_t>{1, 2}).values, (std::vector<int32_t>{1, 3})) << lanes;
  }
}

// CancelCalls at a random moment of short scans, one stream or striped: each call ends at once.
// A cancellation landing between the initial metadata and the first message used to leave the
// first Read waiting forever, deadline included (gRPC 1.51; see ReceiveInitialMetadata).
TEST_F(ClientStream, CancelCallsAtAnyMomentEndsTheCall) {
  ClientOptions o;
  o.target = server_->address();
  o.chunk_bytes = 1 << 18;
  o.timeout = std::chrono::seconds(60);
  Client c(o);
  std::vector<int32_t> x(1 << 18);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 2654435761u >> 7);
  std::mt19937 rng(20261125);
  std::uniform_int_distribution<int> delay_us(0, 2000);
  int cancelled = 0;
  for (int i = 0; i < 300; ++i) {
    const uint32_t lanes = i % 3 == 2 ? 4 : 1;
    auto call = std::async(std::launch::async, [&c, &x, lanes] {
      std::vector<int32_t> out(x.size());
      ScanOptions so;
      so.lanes = lanes;
      try {
        c.ScanInto(x.data(), x.size(), out.data(), so);
        return std::make_pair(grpc::StatusCode::OK, std::string());
      } catch (const RpcError& e) {
        return std::make_pair(e.code(), std::string(e.what()));
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    c.CancelCalls();
    if (call.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "call " << i << " (lanes " << lanes << ") still running 10 s after CancelCalls";
      std::fflush(nullptr);
      std::_Exit(1);  // the call owns stack state: leaving would not be safe
    }
    const auto [code, what] = call.get();
    ASSERT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::CANCELLED) << i << ": " << what;
    cancelled += code == grpc::StatusCode::CANCELLED;
  }
  EXPECT_GT(cancelled, 30) << "the cancellations should land mid-call";
  EXPECT_EQ(c.Scan(std::vector<int32_t>{1, 2}).values, (std::vector<int32_t>{1, 3}));
}

TEST_F(ClientStream, ServerRejectionCarriesCodeAndMessage) {
  Client c = MakeClient();
  v1::ScanHeader h = Int32SumHeader();
  h.set_element_count(10);  // but 5 are sent
  std::vector<int32_t> x = {1, 2, 3, 4, 5};
  size_t pos = 0;
  auto src = [&](void* buf, size_t max) {
    size_t n = std::min(max, x.size() * 4 - pos);
    std::memcpy(buf, reinterpret_cast<char*>(x.data()) + pos, n);
    pos += n;
    return n;
  };
  try {
    c.ScanStream(h, src, {});
    ADD_FAILURE() << "no exception";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_FALSE(e.message().empty());
    EXPECT_EQ(std::string(e.what()), "INVALID_ARGUMENT: " + e.message());
  }
}

TEST_F(ClientStream, ProgressCountsEveryByte) {
  Client c = MakeClient(1 << 12);
  std::vector<int64_t> x(100'000, 3);
  uint64_t last_sent = 0, last_received = 0;
  int calls = 0;
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT64);
  h.set_op(v1::OPERATOR_SUM);
  size_t pos = 0;
  auto src = [&](void* buf, size_t max) {
    size_t n = std::min(max, x.size() * 8 - pos);
    std::memcpy(buf, reinterpret_cast<char*>(x.data()) + pos, n);
    pos += n;
    return n;
  };
  Timing t = c.ScanStream(h, src, [](const void*, size_t) {}, [&](uint64_t s, uint64_t r) {
    EXPECT_GE(s, last_sent);
    EXPECT_GE(r, last_received);
    last_sent = s;
    last_received = r;
    ++calls;
  });
  EXPECT_EQ(last_sent, x.size() * 8);
  EXPECT_EQ(last_received, x.size() * 8);
  EXPECT_EQ(t.bytes_in, x.size() * 8);
  EXPECT_GT(calls, 100);
}

TEST_F(ClientStream, EmptyArrays) {
  Client c = MakeClient();
  EXPECT_TRUE(c.Scan(std::vector<float>{}).values.empty());
  ReduceResult<int64_t> r = c.Reduce(std::vector<int64_t>{}, v1::OPERATOR_PRODUCT);
  EXPECT_EQ(r.value, 1);  // the identity
  EXPECT_EQ(r.element_count, 0u);
}

TEST_F(ClientStream, FlagsTravelWithTheirValuesAcrossSmallChunks) {
  Client c = MakeClient(/*chunk_bytes=*/40);  // 5 doubles per request
  std::vector<double> x(1003);
  CompactOptions o;
  o.flags.resize(x.size());
  o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
  std::vector<double> want;
  std::vector<int64_t> want_idx;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i * 0.5;
    o.flags[i] = (i % 7 == 0 || i % 11 == 3) ? 1 + i % 3 : 0;
    if (o.flags[i]) {
      want.push_back(x[i]);
      want_idx.push_back(static_cast<int64_t>(i));
    }
  }
  CompactResult<double> r = c.Compact(x, o);
  EXPECT_EQ(r.values, want);
  EXPECT_EQ(r.indices, want_idx);
  EXPECT_EQ(r.kept_count, want.size());

  o.flags.push_back(1);  // one flag more than values: the server must refuse it
  EXPECT_THROW(c.Compact(x, o), RpcError);
}

TEST(Timing, JsonAndText) {
  Timing t;
  t.kernel_us = 250;
  t.total_us = 1000;
  t.bytes_in = 4'000'000;
  t.bytes_out = 4'000'000;
  t.chunks = 4;
  t.engine = "cpu";
  t.device = "a \"quoted\" cpu";
  t.algorithm = "cpu_blocked";
  EXPECT_EQ(ToJson(t),
            "{\"receive_us\":0,\"queue_us\":0,\"h2d_us\":0,\"kernel_us\":250,\"d2h_us\":0,"
            "\"send_us\":0,\"total_us\":1000,\"bytes_in\":4000000,\"bytes_out\":4000000,"
            "\"chunks\":4,\"engine\":\"cpu\",\"device\":\"a \\\"quoted\\\" cpu\","
            "\"algorithm\":\"cpu_blocked\"}");
  std::string text = ToText(t);
  EXPECT_NE(text.find("16000.0 MB/s in"), std::string::npos) << text;  // kernel: 4 MB / 250 us
  EXPECT_NE(text.find("8000.0 MB/s in+out"), std::string::npos) << text;
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(std::nan("")), "\"NaN\"");
}

}  // namespace
}  // namespace gpuscan::cli_test
