// Resident arrays behind a front of worker processes (--isolate-devices), on the cpu engine: two
// "devices" (worker slots 0 and 1), each worker keeping its own arrays (GPUSCAN_TEST_ENGINE=cuda on
// a machine of two GPUs: the real ones). Puts spread over both; every
// call on an array (operations, Get, Drop, pipelines, kept results) reaches the worker that has it
// (the device in its id); ListArrays lists both; inputs on two devices are refused by name; tenants
// stay apart, and a caller cannot claim another tenant through the front's own metadata; a worker
// that restarted answers its old ids NOT_FOUND saying so.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gpuscan/client.h"
#include "gpuscan/pipeline.h"
#include "gpuscan/resident_ops.h"
#include "gpuscan/v1/gpuscan.grpc.pb.h"
#include "isolation/front.h"
#include "reference.h"
#include "server_process.h"

namespace gpuscan {
namespace front_resident {

using soak::ServerProcess;

std::string ServerPath() {
  const char* dir = std::getenv("GPUSCAN_BIN_DIR");
  return dir && *dir ? std::string(dir) + "/gpuscan-server" : std::string(GPUSCAN_SERVER_PATH);
}

// The engine: GPUSCAN_TEST_ENGINE's (cuda on a machine of two GPUs: real devices), else cpu.
std::string Engine() {
  const char* e = std::getenv("GPUSCAN_TEST_ENGINE");
  return e && *e ? e : "cpu";
}

std::unique_ptr<ServerProcess> StartFront(const std::string& name) {
  std::vector<std::string> args = {"--devices", "0,1", "--isolate-devices", "on", "--resident-bytes", "100000000"};
  if (Engine() == "cpu") args.insert(args.end(), {"--cpu-threads", "2"});
  return std::make_unique<ServerProcess>(
      ServerPath(), Engine(), args, std::vector<std::string>{},
      ::testing::TempDir() + "/isolation_resident_" + name + "_" + std::to_string(::getpid()) + ".log");
}

Client ClientOf(const ServerProcess& s, const std::string& tenant) {
  ClientOptions co;
  co.target = s.target();
  co.timeout = std::chrono::seconds(30);
  co.chunk_bytes = 64 << 10;  // many messages per call through the proxy
  co.tenant = tenant;
  return Client(co);
}

// The device whose worker issued an array: the leading ordinal of its ArrayInfo.device ("1: ...").
int DeviceOf(const RemoteArray& a) { return std::atoi(a.device().c_str()); }

// Arrays Put until one lies on a device other than `other`'s (Puts alternate between idle workers).
template <class Put>
RemoteArray PutElsewhere(Put put, const RemoteArray& other) {
  for (int i = 0; i < 8; ++i) {
    RemoteArray a = put();
    if (DeviceOf(a) != DeviceOf(other)) return a;
  }
  ADD_FAILURE() << "8 Puts in a row landed on device " << DeviceOf(other);
  return {};
}

class FrontResidentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { front_ = StartFront("suite").release(); }
  static void TearDownTestSuite() { delete front_; }
  static ServerProcess* front_;
};
ServerProcess* FrontResidentTest::front_ = nullptr;

TEST_F(FrontResidentTest, ArraysLieOnBothDevicesAndEveryCallFindsItsOwn) {
  Client c = ClientOf(*front_, "spread");
  GPUSCAN_SEEDED_RNG(rng);
  const v1::ServerInfo info = c.Info();
  EXPECT_EQ(info.limits().resident_bytes(), 100000000u);  // each device's budget
  std::vector<std::vector<int32_t>> xs;
  std::vector<RemoteArray> arrays, kept;
  std::set<int> devices;
  uint64_t bytes = 0;
  // Sizes around the 64 KiB chunk (16384 int32) and one element.
  for (const size_t n : {size_t{1}, size_t{16383}, size_t{16384}, size_t{16385}, size_t{100'003}, size_t{7}}) {
    xs.push_back(testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng));
    arrays.push_back(c.Put(xs.back()));
    const RemoteArray& a = arrays.back();
    devices.insert(DeviceOf(a));
    // The id names its worker's device (ResidentStore::RouteOf: byte 16).
    EXPECT_EQ(static_cast<unsigned char>(a.id()[16]), DeviceOf(a)) << a.device();
    bytes += a.bytes();
  }
  EXPECT_EQ(devices, (std::set<int>{0, 1}));
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(xs[i], false);
    ASSERT_EQ(c.Scan<int32_t>(arrays[i]).values, want) << i;
    EXPECT_EQ(arrays[i].Get<int32_t>(), xs[i]) << i;
    EXPECT_EQ(c.Reduce<int32_t>(arrays[i], v1::OPERATOR_MAX).value, *std::max_element(xs[i].begin(), xs[i].end()));
    kept.push_back(c.Scan(arrays[i], ScanOptions{}, ResidentOptions{}));
    EXPECT_EQ(DeviceOf(kept.back()), DeviceOf(arrays[i])) << "a kept result lies where its input did";
    EXPECT_EQ(kept.back().Get<int32_t>(), want) << i;
    bytes += kept.back().bytes();
  }
  v1::ListArraysResponse list = c.ListArrays();
  EXPECT_EQ(list.arrays_size(), 12);
  EXPECT_EQ(list.tenant_bytes(), bytes);
  EXPECT_EQ(list.budget_bytes(), 2 * 100000000u);  // both devices' budgets
  std::set<std::string> listed;
  for (const v1::ArrayInfo& a : list.arrays()) listed.insert(a.id());
  for (const auto* group : {&arrays, &kept}) {
    for (const RemoteArray& a : *group) EXPECT_TRUE(listed.count(a.id())) << a.id_hex();
  }
  // A page at a time across the devices: every array once, each page's counts the whole front's.
  for (uint32_t size : {1u, 5u, 6u, 7u}) {
    v1::ListArraysRequest req;
    req.set_page_size(size);
    std::vector<std::string> paged;
    int pages = 0;
    do {
      const v1::ListArraysResponse page = c.ListArrays(req);
      EXPECT_LE(page.arrays_size(), static_cast<int>(size));
      EXPECT_EQ(page.tenant_bytes(), bytes);
      for (const v1::ArrayInfo& a : page.arrays()) paged.push_back(a.id());
      req.set_page_token(page.next_page_token());
    } while (!req.page_token().empty() && ++pages < 40);
    EXPECT_EQ(std::set<std::string>(paged.begin(), paged.end()), listed) << "page_size " << size;
    EXPECT_EQ(paged.size(), listed.size()) << "page_size " << size;
  }
  {
    v1::ListArraysRequest req;
    req.set_page_token("d1.zz");  // the worker's part is not one of its tokens
    try {
      c.ListArrays(req);
      ADD_FAILURE() << "a garbled token was taken";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find("page_token"), std::string::npos) << e.what();
    }
    req.set_page_token("x");
    try {
      c.ListArrays(req);
      ADD_FAILURE() << "a garbled token was taken";
    } catch (const RpcError& e) {
      EXPECT_NE(std::string(e.what()).find("page_token \"x\" is not a token this server issued"), std::string::npos)
          << e.what();
    }
  }
  // Drops reach each array's worker.
  const std::string dropped = arrays[0].id();
  EXPECT_EQ(c.DropArray(dropped).id(), dropped);
  try {
    c.GetArray(dropped);
    ADD_FAILURE() << "a dropped array was found";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::NOT_FOUND) << e.what();
  }
  arrays.clear();
  kept.clear();
  EXPECT_EQ(c.ListArrays().arrays_size(), 0);
}

TEST_F(FrontResidentTest, PipelinesRunOnTheirArraysWorkerAndTwoDevicesAreRefusedByName) {
  Client c = ClientOf(*front_, "pipelines");
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(50'001, rng);
  RemoteArray a = c.Put(x);
  std::vector<uint8_t> flags(x.size());
  for (auto& f : flags) f = static_cast<uint8_t>(rng() & 1);
  auto put_flags = [&] { return c.Put(v1::DTYPE_UINT8, flags.data(), flags.size()); };
  RemoteArray f = PutElsewhere(put_flags, a);
  ASSERT_TRUE(f);

  CompactOptions by_flags;
  by_flags.use_flags = true;
  try {
    Compact<int32_t>(a, by_flags, &f);
    ADD_FAILURE() << "a call on arrays of two devices ran";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find("header.resident.flags"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one call reads one device"), std::string::npos) << e.what();
  }
  {
    RemoteArray y = PutElsewhere([&] { return c.Put(x); }, a);
    Pipeline p = c.NewPipeline();
    p.Scan(a);
    p.Histogram(y, HistogramBins{});
    try {
      p.Run();
      ADD_FAILURE() << "a pipeline on arrays of two devices ran";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find("header.stages[1].values.id"), std::string::npos) << e.what();
    }
  }
  // Flags beside the values: compact -> scan, the scan kept where both lie.
  RemoteArray g = PutElsewhere(put_flags, f);  // not f's device: a's
  std::vector<int32_t> compacted;
  for (size_t i = 0; i < x.size(); ++i) {
    if (flags[i]) compacted.push_back(x[i]);
  }
  Pipeline p = c.NewPipeline();
  const Stage kept = p.Compact(a, g, by_flags);
  const Stage sums = p.Scan(kept, ScanOptions{}, Return::kKeep);
  PipelineResult r = p.Run();
  RemoteArray s = r.Array(sums);
  EXPECT_EQ(DeviceOf(s), DeviceOf(a));
  EXPECT_EQ(s.Get<int32_t>(), (testing::ScanRef<int32_t, ops::Sum<int32_t>>(compacted, false)));
}

TEST_F(FrontResidentTest, TenantsStayApartAndCannotClaimTheFrontsTenant) {
  Client a = ClientOf(*front_, "alice");
  Client b = ClientOf(*front_, "bob");
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1000, rng);
  RemoteArray mine = a.Put(x);
  try {
    b.GetArray(mine.id());
    ADD_FAILURE() << "another tenant's array was found";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::NOT_FOUND) << e.what();
  }
  const v1::ListArraysResponse theirs = b.ListArrays();  // (held: a range-for over a temporary's member dangles)
  for (const v1::ArrayInfo& info : theirs.arrays()) EXPECT_NE(info.id(), mine.id());
  // The metadata the front tells its workers the tenant in is dropped when a caller sends it.
  auto stub = v1::GpuScan::NewStub(grpc::CreateChannel(front_->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("gpuscan-tenant", "bob");
  ctx.AddMetadata("gpuscan-front-tenant", "md:alice");
  v1::DropArrayRequest drop;
  drop.set_id(mine.id());
  v1::DropArrayResponse dropped;
  const grpc::Status s = stub->DropArray(&ctx, drop, &dropped);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(mine.Get<int32_t>(), x);
}

TEST(FrontResidentWorkers, ARestartedWorkersIdsAreNotFoundSayingSo) {
  auto front = StartFront("restart");
  Client c = ClientOf(*front, "restart");
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1000, rng);
  RemoteArray a = c.Put(x);
  RemoteArray b = c.Put(x);
  if (DeviceOf(b) == DeviceOf(a)) b = c.Put(x);
  const int device = DeviceOf(a);
  const pid_t victim = soak::WorkerPid(front->pid(), device);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // Down: UNAVAILABLE naming the field; back: NOT_FOUND saying the server restarted.
  std::string last;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    try {
      c.GetArray(a.id());
      last = "found";
    } catch (const RpcError& e) {
      last = std::string(e.what());
      if (e.code() == grpc::StatusCode::NOT_FOUND) break;
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(last.find("restarted"), std::string::npos) << last;
  // The other device's arrays are untouched.
  if (DeviceOf(b) != device) EXPECT_EQ(b.Get<int32_t>(), x);
  a.release();  // (its drop would only be refused)
}

// Under mutual TLS the front terminates TLS, so its workers learn the certificate's tenant from it:
// two certificates are two tenants, and neither metadata can claim the other's.
TEST(FrontResidentTls, TheCertificateNamesTheTenantBehindTheFront) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpuscan-front-tls-" + std::to_string(::getpid()));
  const std::string cmd = std::string("bash '") + GPUSCAN_TEST_CERTS_SCRIPT + "' '" + dir.string() + "' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  server::ServerOptions options;
  options.address = "127.0.0.1:0";
  options.tls_cert_file = (dir / "server.crt").string();
  options.tls_key_file = (dir / "server.key").string();
  options.tls_client_ca_file = (dir / "ca.crt").string();
  server::WorkerPoolOptions pool;
  pool.exe = ServerPath();
  pool.args = {"--engine", Engine(), "--log-level", "warn", "--resident-bytes", "100000000"};
  if (Engine() == "cpu") pool.args.insert(pool.args.end(), {"--cpu-threads", "2"});
  pool.env = server::WorkerEnv(environ);  // (LD_LIBRARY_PATH where a device run carries the libraries)
  pool.devices = {0, 1};
  pool.socket_dir = (dir / "workers").string();
  fs::create_directories(pool.socket_dir);
  fs::permissions(pool.socket_dir, fs::perms::owner_all);
  auto front = server::Front::Start(options, pool, std::chrono::seconds(60));

  auto client_of = [&](const std::string& cert, const std::string& tenant) {
    ClientOptions co;
    co.target = front->address();
    co.timeout = std::chrono::seconds(20);
    co.tenant = tenant;
    co.tls.ca_file = (dir / "ca.crt").string();
    co.tls.cert_file = (dir / (cert + ".crt")).string();
    co.tls.key_file = (dir / (cert + ".key")).string();
    return Client(co);
  };
  Client first = client_of("client", "");
  Client second = client_of("client2", "x509:gpuscan test client");  // claims the first's identity
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(5000, rng);
  std::vector<RemoteArray> mine;
  for (int i = 0; i < 2; ++i) mine.push_back(first.Put(x));  // one on each device
  EXPECT_NE(DeviceOf(mine[0]), DeviceOf(mine[1]));
  for (const RemoteArray& a : mine) {
    try {
      second.GetArray(a.id());
      ADD_FAILURE() << "another certificate's array was found";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::NOT_FOUND) << e.what();
    }
    EXPECT_EQ(a.Get<int64_t>(), x);
    EXPECT_EQ(first.Scan<int64_t>(a).values, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, false)));
  }
  EXPECT_EQ(first.ListArrays().arrays_size(), 2);
  EXPECT_EQ(second.ListArrays().arrays_size(), 0);
  // A metadata tenant does not move the first's arrays under it either.
  Client by_metadata = client_of("client", "someone-else");
  EXPECT_EQ(by_metadata.ListArrays().arrays_size(), 2);
  mine.clear();
  front->Shutdown();
  fs::remove_all(dir);
}

}  // namespace front_resident
}  // namespace gpuscan
