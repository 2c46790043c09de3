// The resident arrays' metrics by tenant and device, and their expiries, scraped from an in-process
// server's endpoint after Puts by two tenants, a drop and an expiry.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "http_get.h"
#include "resident_fixture.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names.
namespace gpuscan::testing::resident_metrics_tests {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

bool Has(const std::string& body, const std::string& line) { return body.find(line + "\n") != std::string::npos; }

TEST(ResidentMetrics, BytesByTenantAndDeviceAndExpiries) {
  server::ServerOptions o = ResidentOptions();
  o.metrics_address = "127.0.0.1:0";
  TestServer server(o);
  auto stub = server.stub();
  v1::ArrayInfo a, b, c, brief;
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 1000, 1), &a, "alpha").ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT64, RandomArray(v1::DTYPE_INT64, 300, 2), &b, "alpha").ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_FLOAT32, RandomArray(v1::DTYPE_FLOAT32, 500, 3), &c, "beta").ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 10, 4), &brief, "gamma", true, 1).ok());
  // Tenants are named by where they come from: "md:" the metadata (mTLS: the certificate's identity).
  // The sweeper drops gamma's array within 200 ms of its 1 ms ttl.
  std::string body;
  for (int i = 0; i < 100; ++i) {
    body = HttpGet(server.metrics_port(), "/metrics").body;
    if (Has(body, "gpuscan_resident_expired_total 1")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Has(body, "gpuscan_resident_expired_total 1")) << body;
  EXPECT_TRUE(Has(body, "gpuscan_resident_tenant_bytes{tenant=\"md:alpha\"} 6400")) << body;
  EXPECT_TRUE(Has(body, "gpuscan_resident_tenant_bytes{tenant=\"md:beta\"} 2000")) << body;
  EXPECT_EQ(body.find("tenant=\"md:gamma\""), std::string::npos) << "a tenant with nothing left is left out";
  const std::string device = "device=\"" + a.device() + "\"";
  EXPECT_TRUE(Has(body, "gpuscan_resident_device_bytes{" + device + "} 8400")) << body;
  EXPECT_TRUE(Has(body, "gpuscan_resident_device_arrays{" + device + "} 3")) << body;

  grpc::ClientContext ctx;
  Tenant(&ctx, "alpha");
  v1::DropArrayRequest drop;
  drop.set_id(b.id());
  v1::DropArrayResponse dropped;
  ASSERT_TRUE(stub->DropArray(&ctx, drop, &dropped).ok());
  body = HttpGet(server.metrics_port(), "/metrics").body;
  EXPECT_TRUE(Has(body, "gpuscan_resident_tenant_bytes{tenant=\"md:alpha\"} 4000")) << body;
  EXPECT_TRUE(Has(body, "gpuscan_resident_device_arrays{" + device + "} 2")) << body;
}

}  // namespace
}  // namespace gpuscan::testing::resident_metrics_tests
