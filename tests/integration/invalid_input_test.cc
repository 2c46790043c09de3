// Bad input gets the right status code and a message naming the field and value, and the
// server keeps serving. Requests are built by hand on the raw stub to produce each fault.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

constexpr uint64_t kChunkBytes = 4096;
constexpr uint64_t kMaxRequestBytes = 64 * 1024;

class InvalidInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o;
    o.chunk_bytes = kChunkBytes;
    o.max_request_bytes = kMaxRequestBytes;
    server_ = new TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Sends `requests` on one call, half-closes, drains the responses, returns the status.
  template <class Req, class Resp, class Start>
  static grpc::Status Run(Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = start(&ctx);
    for (const Req& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
    Resp resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }
  grpc::Status Scan(const std::vector<v1::ScanRequest>& requests) {
    return Run<v1::ScanRequest, v1::ScanResponse>([&](grpc::ClientContext* c) { return stub_->Scan(c); },
                                                  requests);
  }
  grpc::Status Compact(const std::vector<v1::CompactRequest>& requests) {
    return Run<v1::CompactRequest, v1::CompactResponse>(
        [&](grpc::ClientContext* c) { return stub_->Compact(c); }, requests);
  }
  grpc::Status Reduce(const std::vector<v1::ReduceRequest>& requests) {
    grpc::ClientContext ctx;
    v1::ReduceResponse resp;
    auto writer = stub_->Reduce(&ctx, &resp);
    for (const auto& r : requests) {
      if (!writer->Write(r)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::ScanRequest ScanHeader(v1::DType dtype = v1::DTYPE_INT32, v1::Operator op = v1::OPERATOR_SUM) {
    v1::ScanRequest r;
    r.mutable_header()->set_dtype(dtype);
    r.mutable_header()->set_op(op);
    return r;
  }
  static v1::ScanRequest ScanData(size_t bytes) {
    v1::ScanRequest r;
    r.set_data(std::string(bytes, '\x01'));
    return r;
  }
  static v1::CompactRequest CompactHeader(bool use_flags) {
    v1::CompactRequest r;
    r.mutable_header()->set_dtype(v1::DTYPE_INT32);
    if (use_flags) {
      r.mutable_header()->set_use_flags(true);
    } else {
      r.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_NONZERO);
    }
    return r;
  }
  static v1::CompactRequest CompactData(size_t elements, size_t flags) {
    v1::CompactRequest r;
    r.set_values(std::string(elements * 4, '\x02'));
    r.set_flags(std::string(flags, '\x01'));
    return r;
  }

  static void ExpectStatus(const grpc::Status& s, grpc::StatusCode code, const std::string& text) {
    EXPECT_EQ(s.error_code(), code) << "message: " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
  }

  void TearDown() override {
    // Whatever a test sent, the server keeps serving everyone else.
    Client client(server_->client_options(kChunkBytes));
    EXPECT_EQ(client.Health(), "SERVING");
    const std::vector<int64_t> x = {5, -3, 7};
    EXPECT_EQ(client.Scan(x).values, (std::vector<int64_t>{5, 2, 9}));
  }

  static TestServer* server_;
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_->stub();
};
TestServer* InvalidInputTest::server_ = nullptr;

constexpr auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
constexpr auto kExhausted = grpc::StatusCode::RESOURCE_EXHAUSTED;

TEST_F(InvalidInputTest, HeaderMissing) {
  ExpectStatus(Scan({ScanData(16)}), kInvalid, "header missing");
  v1::ReduceRequest data_only;
  data_only.set_data(std::string(16, '\0'));
  ExpectStatus(Reduce({data_only}), kInvalid, "header missing");
}

TEST_F(InvalidInputTest, HeaderRepeated) {
  ExpectStatus(Scan({ScanHeader(), ScanData(16), ScanHeader()}), kInvalid, "header repeated in request #2");
}

TEST_F(InvalidInputTest, EmptyStream) { ExpectStatus(Scan({}), kInvalid, "empty stream"); }

TEST_F(InvalidInputTest, ChunkNotWholeElements) {
  auto first = ScanHeader(v1::DTYPE_INT64);
  ExpectStatus(Scan({first, ScanData(1023)}), kInvalid, "data length 1023 bytes is not a multiple of the int64 element size 8");
}

TEST_F(InvalidInputTest, BitwiseOperatorOnFloat) {
  ExpectStatus(Scan({ScanHeader(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)}), kInvalid,
               "header.op=OPERATOR_BIT_AND is not defined for dtype float32");
  v1::ReduceRequest r;
  r.mutable_header()->set_dtype(v1::DTYPE_FLOAT64);
  r.mutable_header()->set_op(v1::OPERATOR_BIT_XOR);
  ExpectStatus(Reduce({r}), kInvalid, "float64");
}

TEST_F(InvalidInputTest, UnknownEnumValues) {
  ExpectStatus(Scan({ScanHeader(static_cast<v1::DType>(42))}), kInvalid, "header.dtype=42");
  ExpectStatus(Scan({ScanHeader(v1::DTYPE_INT32, static_cast<v1::Operator>(99))}), kInvalid, "header.op=99");
  auto bad_kind = ScanHeader();
  bad_kind.mutable_header()->set_kind(static_cast<v1::ScanKind>(7));
  ExpectStatus(Scan({bad_kind}), kInvalid, "header.kind=7");
  auto bad_algo = ScanHeader();
  bad_algo.mutable_header()->set_algorithm(static_cast<v1::ScanAlgorithm>(77));
  ExpectStatus(Scan({bad_algo}), kInvalid, "header.algorithm=77");
  ExpectStatus(Scan({ScanHeader(v1::DTYPE_UNSPECIFIED)}), kInvalid, "DTYPE_UNSPECIFIED");
  ExpectStatus(Scan({ScanHeader(v1::DTYPE_INT32, v1::OPERATOR_UNSPECIFIED)}), kInvalid, "OPERATOR_UNSPECIFIED");
}

TEST_F(InvalidInputTest, DeclaredCountDiffers) {
  auto larger = ScanHeader();
  larger.mutable_header()->set_element_count(100);
  ExpectStatus(Scan({larger, ScanData(50 * 4)}), kInvalid, "header.element_count=100 but the stream carried 50");
  auto smaller = ScanHeader();
  smaller.mutable_header()->set_element_count(10);
  ExpectStatus(Scan({smaller, ScanData(50 * 4)}), kInvalid, "more elements than header.element_count=10");
}

TEST_F(InvalidInputTest, UnavailableAlgorithm) {
  if (server_->server().engine().name() != "cpu") GTEST_SKIP() << "the cpu engine lacks kogge_stone";
  auto h = ScanHeader();
  h.mutable_header()->set_algorithm(v1::SCAN_ALGORITHM_KOGGE_STONE);
  ExpectStatus(Scan({h, ScanData(64)}), grpc::StatusCode::UNIMPLEMENTED, "kogge_stone");
}

TEST_F(InvalidInputTest, ChunkAboveLimit) {
  ExpectStatus(Scan({ScanHeader(), ScanData(2 * kChunkBytes)}), kExhausted, "exceeds the chunk limit of 4096 bytes");
}

TEST_F(InvalidInputTest, RequestAboveMaxRequestBytes) {
  std::vector<v1::ScanRequest> requests = {ScanHeader()};
  for (uint64_t sent = 0; sent <= kMaxRequestBytes; sent += kChunkBytes) requests.push_back(ScanData(kChunkBytes));
  ExpectStatus(Scan(requests), kExhausted, "--max-request-bytes=65536");
}

TEST_F(InvalidInputTest, MessageAboveReceiveLimit) {
  server::ServerOptions o;
  o.chunk_bytes = kChunkBytes;
  const grpc::Status s = Scan({ScanHeader(), ScanData(server::MaxReceiveMessageBytes(o) + 4096)});
  EXPECT_EQ(s.error_code(), kExhausted) << s.error_message();
}

TEST_F(InvalidInputTest, FlagsLengthDiffersFromValues) {
  ExpectStatus(Compact({CompactHeader(true), CompactData(100, 99)}), kInvalid,
               "flags length 99 differs from values length 100");
}

TEST_F(InvalidInputTest, FlagsWithPredicate) {
  ExpectStatus(Compact({CompactHeader(false), CompactData(10, 10)}), kInvalid, "flags sent");
}

TEST_F(InvalidInputTest, FlagsFarOutOfStep) {
  std::vector<v1::CompactRequest> requests = {CompactHeader(true)};
  for (int i = 0; i < 8; ++i) requests.push_back(CompactData(kChunkBytes / 4, 0));
  ExpectStatus(Compact(requests), kInvalid, "out of step");
}

TEST_F(InvalidInputTest, PredicateThresholds) {
  auto float_for_int = CompactHeader(false);
  auto* p = float_for_int.mutable_header()->mutable_predicate();
  p->set_op(v1::PREDICATE_OP_LT);
  p->mutable_threshold()->set_float_value(1.5);
  ExpectStatus(Compact({float_for_int}), kInvalid, "header.predicate.threshold must be an int_value or uint_value for dtype int32");

  auto int_for_float = CompactHeader(false);
  int_for_float.mutable_header()->set_dtype(v1::DTYPE_FLOAT64);
  p = int_for_float.mutable_header()->mutable_predicate();
  p->set_op(v1::PREDICATE_OP_GE);
  p->mutable_threshold()->set_int_value(3);
  ExpectStatus(Compact({int_for_float}), kInvalid, "must be a float_value for dtype float64");

  auto missing = CompactHeader(false);
  missing.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_EQ);
  ExpectStatus(Compact({missing}), kInvalid, "header.predicate.threshold is required");

  auto too_big = CompactHeader(false);
  p = too_big.mutable_header()->mutable_predicate();
  p->set_op(v1::PREDICATE_OP_IN_RANGE);
  p->mutable_threshold()->set_int_value(0);
  p->mutable_upper()->set_int_value(int64_t{1} << 40);
  ExpectStatus(Compact({too_big}), kInvalid, "header.predicate.upper=1099511627776 does not fit dtype int32");

  auto no_selector = CompactHeader(false);
  no_selector.mutable_header()->clear_predicate();
  ExpectStatus(Compact({no_selector}), kInvalid, "no selector");

  auto unknown_pred = CompactHeader(false);
  unknown_pred.mutable_header()->mutable_predicate()->set_op(static_cast<v1::PredicateOp>(55));
  ExpectStatus(Compact({unknown_pred}), kInvalid, "header.predicate.op=55");
}

}  // namespace
}  // namespace gpuscan
