// The service path with the CUDA engine on an array past 2^31 elements: a uint32 scan of
// 2^31 + 5 ones streamed through gRPC without the client or server ever holding the array.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda_test_server.h"
#include "test_server.h"

namespace gpuscan {
namespace {

TEST(CudaServiceTest, ScanPast2Pow31Elements) {
  std::string why;
  auto eng = testing::CudaEngineOrNull({}, &why);
  if (!eng) GTEST_SKIP() << why;
  auto srv = testing::StartOnLoopback(std::move(eng));
  ClientOptions co;
  co.target = srv->address();
  co.chunk_bytes = 4 << 20;
  Client client(co);

  const uint64_t n = (uint64_t{1} << 31) + 5;
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_UINT32);
  h.set_op(v1::OPERATOR_SUM);
  h.set_element_count(n);
  uint64_t sent = 0, received = 0, wrong = 0;
  auto source = [&](void* buf, size_t max_bytes) -> size_t {
    const uint64_t m = std::min<uint64_t>(max_bytes / 4, n - sent);
    std::fill_n(static_cast<uint32_t*>(buf), m, 1u);
    sent += m;
    return m * 4;
  };
  auto sink = [&](const void* data, size_t bytes) {
    const auto* p = static_cast<const uint32_t*>(data);
    for (size_t i = 0; i < bytes / 4; ++i) {
      if (p[i] != static_cast<uint32_t>(received + i + 1)) ++wrong;
    }
    received += bytes / 4;
  };
  const Timing t = client.ScanStream(h, source, sink);
  EXPECT_EQ(received, n);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(t.engine, "cuda");
  EXPECT_EQ(t.bytes_in, n * 4);
  srv->Shutdown();
}

}  // namespace
}  // namespace gpuscan
