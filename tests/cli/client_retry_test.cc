// gpuscan::Client's retries (RetryOptions) against a flaky stand-in for the service: it answers
// int32 sum scans, sum reduces and "x > 0" compactions correctly, but fails its first calls with
// UNAVAILABLE after streaming part of their results. A retried call must give the whole correct
// result with every byte delivered to the Sink once; errors other than UNAVAILABLE (or CANCELLED), one-shot
// Sources and exhausted tries are not retried; the deadline covers every try.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gpuscan/client.h"

namespace gpuscan::cli_test {
namespace {

class FlakyService final : public v1::GpuScan::Service {
 public:
  // The next `n` calls fail with `code` after `cut_after` result messages.
  void FailNext(int n, grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE, int cut_after = 2) {
    fails_ = n;
    code_ = code;
    cut_after_ = cut_after;
  }
  int calls() const { return calls_; }

  grpc::Status Scan(grpc::ServerContext*, grpc::ServerReaderWriter<v1::ScanResponse, v1::ScanRequest>* stream) override {
    const bool fail = Begin();
    v1::ScanRequest req;
    int32_t sum = 0;
    uint64_t n = 0;
    int sent = 0;
    while (stream->Read(&req)) {
      if (fail && sent == cut_after_) return Fail();
      v1::ScanResponse resp;
      std::string out(req.data().size(), '\0');
      for (size_t i = 0; i < req.data().size() / 4; ++i) {
        int32_t x;
        std::memcpy(&x, req.data().data() + 4 * i, 4);
        sum = static_cast<int32_t>(static_cast<uint32_t>(sum) + static_cast<uint32_t>(x));
        std::memcpy(out.data() + 4 * i, &sum, 4);
      }
      resp.set_offset(n);
      n += req.data().size() / 4;
      resp.set_data(std::move(out));
      stream->Write(resp);
      ++sent;
    }
    if (fail) return Fail();
    v1::ScanResponse last;
    last.mutable_timing()->set_engine("flaky");
    last.set_element_count(n);
    stream->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status Reduce(grpc::ServerContext*, grpc::ServerReader<v1::ReduceRequest>* reader,
                      v1::ReduceResponse* resp) override {
    const bool fail = Begin();
    v1::ReduceRequest req;
    int32_t sum = 0;
    uint64_t n = 0;
    while (reader->Read(&req)) {
      for (size_t i = 0; i < req.data().size() / 4; ++i, ++n) {
        int32_t x;
        std::memcpy(&x, req.data().data() + 4 * i, 4);
        sum = static_cast<int32_t>(static_cast<uint32_t>(sum) + static_cast<uint32_t>(x));
      }
    }
    if (fail) return Fail();
    resp->set_raw_value(std::string(reinterpret_cast<const char*>(&sum), 4));
    resp->set_element_count(n);
    return grpc::Status::OK;
  }

  grpc::Status Compact(grpc::ServerContext*,
                       grpc::ServerReaderWriter<v1::CompactResponse, v1::CompactRequest>* stream) override {
    const bool fail = Begin();
    v1::CompactRequest req;
    uint64_t n = 0, kept = 0;
    int sent = 0;
    while (stream->Read(&req)) {
      if (fail && sent == cut_after_) return Fail();
      v1::CompactResponse resp;
      resp.set_kept_offset(kept);
      for (size_t i = 0; i < req.values().size() / 4; ++i, ++n) {
        int32_t x;
        std::memcpy(&x, req.values().data() + 4 * i, 4);
        if (x <= 0) continue;
        const int64_t index = static_cast<int64_t>(n);
        resp.mutable_values()->append(reinterpret_cast<const char*>(&x), 4);
        resp.mutable_indices()->append(reinterpret_cast<const char*>(&index), 8);
        ++kept;
      }
      stream->Write(resp);
      ++sent;
    }
    if (fail) return Fail();
    v1::CompactResponse last;
    last.mutable_timing()->set_engine("flaky");
    last.set_kept_count(kept);
    last.set_element_count(n);
    stream->Write(last);
    return grpc::Status::OK;
  }

 private:
  bool Begin() {
    ++calls_;
    if (fails_ <= 0) return false;
    --fails_;
    return true;
  }
  grpc::Status Fail() const { return grpc::Status(code_, "flaky: this call fails"); }

  std::atomic<int> calls_{0}, fails_{0};
  std::atomic<grpc::StatusCode> code_{grpc::StatusCode::UNAVAILABLE};
  std::atomic<int> cut_after_{2};
};

class ClientRetry : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_) << "cannot start the flaky service";
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int32_t> d(-1000, 1000);
    x_.resize(5000 + rng() % 64);  // 1250 chunks of 16 bytes, give or take
    for (auto& v : x_) v = d(rng) | 1;  // never zero
  }
  void TearDown() override { server_->Shutdown(); }

  ClientOptions Options(uint32_t attempts, int timeout_ms = 30000) {
    ClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(port_);
    o.chunk_bytes = 64;  // 16 elements per message: a cut leaves many messages delivered
    o.timeout = std::chrono::milliseconds(timeout_ms);
    o.retry.attempts = attempts;
    o.retry.initial_backoff = std::chrono::milliseconds(5);
    o.retry.max_backoff = std::chrono::milliseconds(20);
    o.retry.on_retry = [this](const RpcError& e, uint32_t next, std::chrono::milliseconds) {
      EXPECT_TRUE(e.code() == grpc::StatusCode::UNAVAILABLE || e.code() == grpc::StatusCode::CANCELLED) << e.what();
      retried_.push_back(next);
    };
    return o;
  }
  std::vector<int32_t> Prefix() const {
    std::vector<int32_t> want(x_.size());
    uint32_t s = 0;
    for (size_t i = 0; i < x_.size(); ++i) want[i] = static_cast<int32_t>(s += static_cast<uint32_t>(x_[i]));
    return want;
  }
  Replay Input() const {
    return [this] {
      return Source([this, pos = size_t{0}](void* buf, size_t max) mutable {
        const size_t n = std::min(max, x_.size() * 4 - pos);
        std::memcpy(buf, reinterpret_cast<const char*>(x_.data()) + pos, n);
        pos += n;
        return n;
      });
    };
  }
  static v1::ScanHeader Header() {
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.set_op(v1::OPERATOR_SUM);
    return h;
  }

  FlakyService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::vector<int32_t> x_;
  std::vector<uint32_t> retried_;
};

TEST_F(ClientRetry, ScanResumesWithEveryByteOnce) {
  for (int cut : {0, 1, 7, 200}) {
    service_.FailNext(2, grpc::StatusCode::UNAVAILABLE, cut);
    retried_.clear();
    const int calls = service_.calls();
    Client client(Options(3));
    std::string got;
    const Timing t = client.ScanStream(Header(), Input(), [&](const void* p, size_t b) {
      got.append(static_cast<const char*>(p), b);
    });
    const std::vector<int32_t> want = Prefix();
    ASSERT_EQ(got.size(), want.size() * 4) << "cut after " << cut;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << "cut after " << cut;
    EXPECT_EQ(t.engine, "flaky");
    EXPECT_EQ(service_.calls() - calls, 3);
    EXPECT_EQ(retried_, (std::vector<uint32_t>{2, 3}));
  }
}

TEST_F(ClientRetry, TypedCallsRetry) {
  Client client(Options(4));
  service_.FailNext(3, grpc::StatusCode::UNAVAILABLE, 5);
  EXPECT_EQ(client.Scan(x_).values, Prefix());
  service_.FailNext(1, grpc::StatusCode::CANCELLED);  // the server cancelled it: retried too
  EXPECT_EQ(client.Reduce(x_, v1::OPERATOR_SUM).value, Prefix().back());
  std::vector<int32_t> kept;
  std::vector<int64_t> at;
  for (size_t i = 0; i < x_.size(); ++i) {
    if (x_[i] > 0) kept.push_back(x_[i]), at.push_back(static_cast<int64_t>(i));
  }
  CompactOptions co;
  co.predicate.set_op(v1::PREDICATE_OP_GT);
  co.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
  service_.FailNext(2, grpc::StatusCode::UNAVAILABLE, 9);
  const CompactResult<int32_t> r = client.Compact(x_, co);
  EXPECT_EQ(r.values, kept);
  EXPECT_EQ(r.indices, at);
  EXPECT_EQ(r.kept_count, kept.size());
  EXPECT_EQ(retried_.size(), 6u);
}

TEST_F(ClientRetry, GivesUpAfterItsTries) {
  Client client(Options(3));
  service_.FailNext(100);
  try {
    client.Scan(x_);
    FAIL() << "no error";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(e.message().find("gave up after 3 tries"), std::string::npos) << e.message();
  }
  EXPECT_EQ(service_.calls(), 3);
}

TEST_F(ClientRetry, OtherErrorsAndOneShotSourcesAreNotRetried) {
  Client client(Options(5));
  service_.FailNext(1, grpc::StatusCode::INVALID_ARGUMENT);
  try {
    client.Reduce(x_, v1::OPERATOR_SUM);
    FAIL() << "no error";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "flaky: this call fails");
  }
  EXPECT_EQ(service_.calls(), 1);
  service_.FailNext(1);  // a one-shot Source: tried once
  EXPECT_THROW(client.ScanStream(Header(), Input()(), [](const void*, size_t) {}), RpcError);
  EXPECT_EQ(service_.calls(), 2);
  EXPECT_TRUE(retried_.empty());
  Client once(Options(1));  // retries off
  service_.FailNext(1);
  EXPECT_THROW(once.Scan(x_), RpcError);
  EXPECT_EQ(service_.calls(), 3);
}

TEST_F(ClientRetry, TheDeadlineCoversEveryTry) {
  ClientOptions o = Options(1000, 800);
  o.retry.initial_backoff = std::chrono::milliseconds(50);
  o.retry.max_backoff = std::chrono::milliseconds(100);
  Client client(o);
  service_.FailNext(1 << 30);
  const auto start = std::chrono::steady_clock::now();
  try {
    client.Scan(x_);
    FAIL() << "no error";
  } catch (const RpcError& e) {
    // The last try ends at the deadline, or the next wait would pass it.
    EXPECT_TRUE(e.code() == grpc::StatusCode::UNAVAILABLE || e.code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        << e.what();
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 0.8 + 1.0);  // slack for a loaded machine; without the shared deadline 1000 tries take minutes
  EXPECT_GT(service_.calls(), 2);
}

TEST(RetryUnreachable, AServerThatComesBackIsReached) {
  // A port nothing listens on yet: the first tries fail UNAVAILABLE, then the server starts.
  int port = 0;
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.BuildAndStart()->Shutdown();
  }
  ClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.timeout = std::chrono::seconds(20);
  o.retry.attempts = 20;
  o.retry.initial_backoff = std::chrono::milliseconds(100);
  o.retry.max_backoff = std::chrono::milliseconds(300);
  std::atomic<int> retries{0};
  o.retry.on_retry = [&](const RpcError&, uint32_t, std::chrono::milliseconds) { ++retries; };
  FlakyService service;
  std::unique_ptr<grpc::Server> server;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
    b.RegisterService(&service);
    server = b.BuildAndStart();
  });
  Client client(o);
  const std::vector<int32_t> x = {3, -1, 4, 1, -5};
  std::vector<int32_t> got;
  try {
    got = client.Scan(x).values;
  } catch (...) {
    late.join();
    throw;
  }
  late.join();
  EXPECT_EQ(got, (std::vector<int32_t>{3, 2, 6, 7, 2}));
  EXPECT_GT(retries.load(), 0);
  ASSERT_TRUE(server);
  server->Shutdown();
}

}  // namespace
}  // namespace gpuscan::cli_test
