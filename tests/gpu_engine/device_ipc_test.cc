// Arrays already on the device (issue 45 part 3). Two layers:
// - the CUDA sessions' ProcessDevice against their own streamed path on the same input: the same
//   bytes (floats too: the deterministic tree's bits do not depend on where the tiles lie), at
//   sizes around the tile (4096) and sub-chunk (2 MiB) boundaries;
// - the whole path: this process exports cudaMalloc'd arrays (gpuscan/device_export.h), the C++
//   client sends the handles, gpuscan-server --allow-device-ipc (a child process: a process
//   cannot open its own handles) opens them and computes where they lie; as a plain server and
//   as a front routing to the worker of the arrays' device; and the refusals.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_server.h"
#include "engine/histogram.h"
#include "engine_runner.h"
#include "gpuscan/client.h"
#include "gpuscan/device_export.h"
#include "reference.h"
#include "server_process.h"

namespace gpuscan {
namespace {

// A device copy of a host vector, freed with the object.
template <class T>
struct DeviceVector {
  explicit DeviceVector(size_t n) : n(n) {
    if (cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  }
  explicit DeviceVector(const std::vector<T>& host) : DeviceVector(host.size()) {
    cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceVector() {
    if (p) cudaFree(p);
  }
  std::vector<T> Host(size_t count) const {
    std::vector<T> h(count);
    cudaMemcpy(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  std::vector<T> Host() const { return Host(n); }
  T* get() const { return static_cast<T*>(p); }
  DeviceArray Export(size_t first = 0, size_t count = SIZE_MAX) const {
    return ExportDeviceArray(get() + first, std::min(count, n - first) * sizeof(T));
  }
  void* p = nullptr;
  size_t n;
};

template <class T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

const std::vector<size_t> kSizes = {1, 4095, 4096, 4097, (size_t{1} << 19) + 3, (size_t{1} << 22) + 4097};

class DeviceSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    engine_ = testing::CudaEngineOrNull({}, &why);
    if (!engine_) GTEST_SKIP() << why;
  }

  template <class T, class Op>
  void CheckScan(engine::Op op, bool exclusive, std::mt19937_64& rng) {
    for (size_t n : kSizes) {
      const std::vector<T> x = testing::RandomInput<T, Op>(n, rng);
      engine::ScanSpec spec;
      spec.dtype = unit::DTypeOf<T>();
      spec.op = op;
      spec.exclusive = exclusive;
      std::vector<T> streamed(n);
      engine::StageTimes t;
      engine_->NewScan(spec)->Process(x.data(), streamed.data(), n, t);
      DeviceVector<T> in(x), out(n);
      engine_->NewScan(spec)->ProcessDevice(in.get(), out.get(), n, t);
      EXPECT_TRUE(SameBytes(out.Host(), streamed)) << engine::Name(spec.dtype) << " n=" << n;
      engine_->NewScan(spec)->ProcessDevice(in.get(), in.get(), n, t);  // in place
      EXPECT_TRUE(SameBytes(in.Host(), streamed)) << engine::Name(spec.dtype) << " in place, n=" << n;
    }
  }

  template <class T, class Op>
  void CheckReduce(engine::Op op, std::mt19937_64& rng) {
    for (size_t n : kSizes) {
      const std::vector<T> x = testing::RandomInput<T, Op>(n, rng);
      engine::ReduceSpec spec;
      spec.dtype = unit::DTypeOf<T>();
      spec.op = op;
      engine::StageTimes t;
      auto streamed = engine_->NewReduce(spec);
      streamed->Process(x.data(), n, t);
      DeviceVector<T> in(x);
      auto device = engine_->NewReduce(spec);
      device->ProcessDevice(in.get(), n, t);
      T a{}, b{};
      streamed->Result(&a);
      device->Result(&b);
      EXPECT_EQ(std::memcmp(&a, &b, sizeof(T)), 0) << engine::Name(spec.dtype) << " n=" << n;
    }
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_F(DeviceSessionTest, ScansEqualTheStreamedPath) {
  GPUSCAN_SEEDED_RNG(rng);
  CheckScan<int32_t, ops::Sum<int32_t>>(engine::Op::kSum, false, rng);
  CheckScan<int64_t, ops::Max<int64_t>>(engine::Op::kMax, true, rng);
  CheckScan<float, ops::Sum<float>>(engine::Op::kSum, false, rng);   // the deterministic tree
  CheckScan<double, ops::Sum<double>>(engine::Op::kSum, true, rng);  // exclusive tree
  CheckScan<uint32_t, ops::BitXor<uint32_t>>(engine::Op::kBitXor, false, rng);
}

TEST_F(DeviceSessionTest, ReductionsEqualTheStreamedPath) {
  GPUSCAN_SEEDED_RNG(rng);
  CheckReduce<int32_t, ops::Sum<int32_t>>(engine::Op::kSum, rng);
  CheckReduce<float, ops::Sum<float>>(engine::Op::kSum, rng);
  CheckReduce<double, ops::Min<double>>(engine::Op::kMin, rng);
  CheckReduce<uint64_t, ops::Product<uint64_t>>(engine::Op::kProduct, rng);
}

TEST_F(DeviceSessionTest, CompactionEqualsTheStreamedPath) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : kSizes) {
    const std::vector<int32_t> x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    std::vector<uint8_t> flags(n);
    for (auto& f : flags) f = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng() % 255 + 1);
    for (bool use_flags : {false, true}) {
      engine::CompactSpec spec;
      spec.dtype = engine::DType::kInt32;
      spec.use_flags = use_flags;
      spec.predicate.op = engine::PredicateOp::kGt;
      const int32_t threshold = 0;
      std::memcpy(spec.predicate.threshold, &threshold, sizeof(threshold));
      spec.want_values = spec.want_indices = true;
      std::vector<int32_t> values(n);
      std::vector<int64_t> indices(n);
      engine::StageTimes t;
      const uint64_t kept =
          engine_->NewCompact(spec)->Process(x.data(), flags.data(), n, values.data(), indices.data(), t);
      DeviceVector<int32_t> in(x), dv(n);
      DeviceVector<uint8_t> df(flags);
      DeviceVector<int64_t> di(n);
      const uint64_t dkept = engine_->NewCompact(spec)->ProcessDevice(in.get(), df.get(), n, dv.get(), di.get(), t);
      ASSERT_EQ(dkept, kept) << "n=" << n << " flags=" << use_flags;
      values.resize(kept);
      indices.resize(kept);
      EXPECT_EQ(dv.Host(kept), values) << "n=" << n;
      EXPECT_EQ(di.Host(kept), indices) << "n=" << n;
    }
  }
}

TEST_F(DeviceSessionTest, HistogramsAndSortsEqualTheHostPath) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : kSizes) {
    std::vector<float> x = testing::RandomInput<float, ops::Sum<float>>(n, rng);
    engine::HistogramSpec spec;
    spec.dtype = engine::DType::kFloat32;
    spec.edges = engine::EvenHistogramEdges(-0.5, 0.5, 100, spec.dtype);
    spec.even = true;
    engine::StageTimes t;
    auto host = engine_->NewHistogram(spec);
    host->Process(x.data(), n, t);
    DeviceVector<float> dx(x);
    auto device = engine_->NewHistogram(spec);
    device->ProcessDevice(dx.get(), n, t);
    EXPECT_EQ(device->Result(), host->Result()) << "histogram n=" << n;

    // Keys with values and the permutation, from device memory to device memory.
    std::vector<int64_t> values(n);
    for (auto& v : values) v = static_cast<int64_t>(rng());
    engine::SortSpec sort;
    sort.dtype = engine::DType::kFloat32;
    sort.has_values = true;
    sort.values_dtype = engine::DType::kInt64;
    sort.want_indices = true;
    sort.descending = n % 2 == 1;
    std::vector<float> keys_out(n);
    std::vector<int64_t> values_out(n), indices(n);
    engine_->Sort(sort, x.data(), values.data(), n, keys_out.data(), values_out.data(), indices.data(), t);
    DeviceVector<int64_t> dv(values), dvo(n), di(n);
    DeviceVector<float> dko(n);
    engine_->Sort(sort, dx.get(), dv.get(), n, dko.get(), dvo.get(), di.get(), t);
    EXPECT_TRUE(SameBytes(dko.Host(), keys_out)) << "sort n=" << n;
    EXPECT_EQ(dvo.Host(), values_out) << "sort values n=" << n;
    EXPECT_EQ(di.Host(), indices) << "sort indices n=" << n;
  }
}

TEST_F(DeviceSessionTest, SegmentedScansEqualTheStreamedPath) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : kSizes) {
    const std::vector<int32_t> x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    std::vector<int64_t> keys(n);
    std::vector<uint8_t> heads(n);
    int64_t key = 0;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 97 == 0) ++key;  // runs of ~97, some crossing the tile and sub-chunk edges
      keys[i] = key;
      heads[i] = i == 0 || keys[i] != keys[i - 1];
    }
    for (bool use_heads : {false, true}) {
      engine::SegmentedScanSpec spec;
      spec.dtype = engine::DType::kInt32;
      spec.op = engine::Op::kSum;
      spec.exclusive = use_heads;
      spec.heads = use_heads;
      spec.key_dtype = engine::DType::kInt64;
      const void* k = use_heads ? static_cast<const void*>(heads.data()) : keys.data();
      std::vector<int32_t> streamed(n);
      engine::StageTimes t;
      engine_->NewSegmentedScan(spec)->Process(x.data(), k, streamed.data(), n, t);
      DeviceVector<int32_t> dx(x), out(n);
      DeviceVector<int64_t> dk(keys);
      DeviceVector<uint8_t> dh(heads);
      const void* dkeys = use_heads ? static_cast<const void*>(dh.get()) : dk.get();
      engine_->NewSegmentedScan(spec)->ProcessDevice(dx.get(), dkeys, out.get(), n, t);
      EXPECT_EQ(out.Host(), streamed) << "n=" << n << " heads=" << use_heads;
      engine_->NewSegmentedScan(spec)->ProcessDevice(dx.get(), dkeys, dx.get(), n, t);  // in place
      EXPECT_EQ(dx.Host(), streamed) << "in place n=" << n << " heads=" << use_heads;
    }
  }
}

// ---- through a server process

std::string ServerPath() {
  const char* dir = std::getenv("GPUSCAN_BIN_DIR");
  return dir && *dir ? std::string(dir) + "/gpuscan-server" : std::string(GPUSCAN_SERVER_PATH);
}

class DeviceIpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) GTEST_SKIP() << "needs a CUDA device";
    cudaSetDevice(0);
  }
  static std::unique_ptr<soak::ServerProcess> Start(std::vector<std::string> extra, const std::string& log) {
    extra.insert(extra.begin(), {"--devices", "0"});
    return std::make_unique<soak::ServerProcess>(ServerPath(), "cuda", extra, std::vector<std::string>{},
                                                 ::testing::TempDir() + "/" + log, std::chrono::seconds(120));
  }
  static Client ClientOf(const soak::ServerProcess& p) {
    ClientOptions co;
    co.target = p.target();
    co.timeout = std::chrono::seconds(60);
    return Client(co);
  }
  static v1::ScanHeader ScanHeaderOf(v1::DType dtype, v1::Operator op) {
    v1::ScanHeader h;
    h.set_dtype(dtype);
    h.set_op(op);
    return h;
  }

  // Scan, reduce and compaction on exported arrays against the streamed calls of the same server.
  static void CheckCalls(Client& client, std::mt19937_64& rng) {
    for (size_t n : {size_t{4097}, (size_t{1} << 21) + 5}) {
      // An array inside a bigger allocation: the handle's offset is its place there.
      const std::vector<float> xf = testing::RandomInput<float, ops::Sum<float>>(n + 100, rng);
      DeviceVector<float> big(xf), out(n);
      const DeviceArray in = big.Export(100, n);
      ASSERT_EQ(in.offset, 100 * sizeof(float));
      const DeviceArray to = out.Export();
      const std::vector<float> x(xf.begin() + 100, xf.end());
      const Timing timing = client.ScanDevice(ScanHeaderOf(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM), in, &to);
      EXPECT_EQ(timing.h2d_us, 0u);
      EXPECT_TRUE(SameBytes(out.Host(), client.Scan(x).values)) << "float32 sum n=" << n;
      // In place, int32 max, exclusive.
      const std::vector<int32_t> xi = testing::RandomInput<int32_t, ops::Max<int32_t>>(n, rng);
      DeviceVector<int32_t> di(xi);
      v1::ScanHeader h = ScanHeaderOf(v1::DTYPE_INT32, v1::OPERATOR_MAX);
      h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
      client.ScanDevice(h, di.Export());
      ScanOptions so;
      so.op = v1::OPERATOR_MAX;
      so.exclusive = true;
      EXPECT_EQ(di.Host(), client.Scan(xi, so).values) << "int32 max exclusive in place n=" << n;
      // Reduce.
      v1::ReduceHeader rh;
      rh.set_dtype(v1::DTYPE_FLOAT32);
      rh.set_op(v1::OPERATOR_SUM);
      const v1::ReduceResponse r = client.ReduceDevice(rh, in);
      const float want = client.Reduce(x, v1::OPERATOR_SUM).value;
      float got = 0;
      ASSERT_EQ(r.raw_value().size(), sizeof(got));
      std::memcpy(&got, r.raw_value().data(), sizeof(got));
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(got)), 0) << "float32 sum reduce n=" << n;
      // Compaction by flags, values and indices.
      std::vector<uint8_t> flags(n);
      for (auto& f : flags) f = static_cast<uint8_t>(rng() & 1);
      DeviceVector<uint8_t> dflags(flags);
      DeviceVector<int32_t> kept_values(n);
      DeviceVector<int64_t> kept_indices(n);
      v1::CompactHeader ch;
      ch.set_dtype(v1::DTYPE_INT32);
      ch.set_use_flags(true);
      ch.set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
      const DeviceArray f = dflags.Export(), kv = kept_values.Export(), ki = kept_indices.Export();
      const v1::CompactResponse cr = client.CompactDevice(ch, di.Export(), &f, &kv, &ki);
      const std::vector<int32_t> scanned = di.Host();
      std::vector<int32_t> want_values;
      std::vector<int64_t> want_indices;
      for (size_t i = 0; i < n; ++i) {
        if (!flags[i]) continue;
        want_values.push_back(scanned[i]);
        want_indices.push_back(static_cast<int64_t>(i));
      }
      ASSERT_EQ(cr.kept_count(), want_values.size());
      EXPECT_EQ(kept_values.Host(want_values.size()), want_values);
      EXPECT_EQ(kept_indices.Host(want_indices.size()), want_indices);
      // Histogram of the float array, against the streamed call.
      v1::HistogramHeader hh;
      hh.set_dtype(v1::DTYPE_FLOAT32);
      hh.set_bins(64);
      hh.set_lo(-0.5);
      hh.set_hi(0.5);
      *hh.mutable_device_memory() = Client::DeviceMemoryOf(in);
      const v1::HistogramResponse hr = client.HistogramHeaderOnly(hh);
      HistogramBins bins;
      bins.bins = 64;
      bins.lo = -0.5;
      bins.hi = 0.5;
      const HistogramResult want_h = client.Histogram(x, bins);
      ASSERT_EQ(hr.counts().size(), want_h.counts.size() * sizeof(uint64_t));
      EXPECT_EQ(std::memcmp(hr.counts().data(), want_h.counts.data(), hr.counts().size()), 0) << "histogram n=" << n;
      EXPECT_EQ(hr.element_count(), n);
      // Argsort of the int32 keys in place with their permutation.
      DeviceVector<int64_t> perm(n);
      v1::SortHeader sh;
      sh.set_dtype(v1::DTYPE_INT32);
      sh.set_output(v1::SORT_OUTPUT_KEYS_AND_INDICES);
      v1::DeviceMemory* dm = sh.mutable_device_memory();
      *dm = Client::DeviceMemoryOf(di.Export());
      dm->set_output_handle(dm->handle());
      dm->set_output_offset(dm->offset());
      const DeviceArray p = perm.Export();
      dm->set_indices_handle(p.handle);
      dm->set_indices_offset(p.offset);
      const std::vector<int32_t> unsorted = di.Host();
      EXPECT_EQ(client.SortHeaderOnly(sh).element_count(), n);
      std::vector<int64_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return unsorted[a] < unsorted[b]; });
      std::vector<int32_t> sorted(n);
      for (size_t i = 0; i < n; ++i) sorted[i] = unsorted[order[i]];
      EXPECT_EQ(di.Host(), sorted) << "sort in place n=" << n;
      EXPECT_EQ(perm.Host(), order) << "argsort n=" << n;
      // Segmented scan of the sorted keys by themselves as int32 keys (runs of equal keys).
      DeviceVector<int32_t> seg_out(n);
      v1::SegmentedScanHeader gh;
      gh.set_dtype(v1::DTYPE_INT32);
      gh.set_op(v1::OPERATOR_SUM);
      gh.set_key_dtype(v1::DTYPE_INT32);
      v1::DeviceMemory* gm = gh.mutable_device_memory();
      *gm = Client::DeviceMemoryOf(di.Export());
      gm->set_keys_handle(gm->handle());
      gm->set_keys_offset(gm->offset());
      const DeviceArray seg_to = seg_out.Export();
      gm->set_output_handle(seg_to.handle);
      gm->set_output_offset(seg_to.offset);
      EXPECT_EQ(client.SegmentedScanHeaderOnly(gh).element_count(), n);
      SegmentedScanOptions sso;
      EXPECT_EQ(seg_out.Host(), client.SegmentedScan(sorted, sorted, sso).values) << "segmented n=" << n;
    }
  }
};

TEST_F(DeviceIpcTest, CallsOnExportedArraysEqualTheStreamedOnes) {
  auto server = Start({"--allow-device-ipc"}, "device_ipc_server.log");
  Client client = ClientOf(*server);
  const v1::ServerInfo info = client.Info();
  ASSERT_TRUE(info.limits().device_ipc());
  ASSERT_EQ(info.devices_size(), 1);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  EXPECT_EQ(info.devices(0).uuid(), std::string(prop.uuid.bytes, 16));
  GPUSCAN_SEEDED_RNG(rng);
  CheckCalls(client, rng);
}

TEST_F(DeviceIpcTest, AFrontRoutesToTheWorkerOfTheDevice) {
  auto front = Start({"--allow-device-ipc", "--isolate-devices", "on"}, "device_ipc_front.log");
  Client client = ClientOf(*front);
  GPUSCAN_SEEDED_RNG(rng);
  CheckCalls(client, rng);
}

TEST_F(DeviceIpcTest, RefusalsNameTheFieldAndTheServerGoesOn) {
  auto expect_code = [](auto call, grpc::StatusCode code, const std::string& part, const char* what) {
    SCOPED_TRACE(what);
    try {
      call();
      ADD_FAILURE() << "no error; expected " << part;
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto server = Start({"--allow-device-ipc"}, "device_ipc_refusals.log");
  Client client = ClientOf(*server);
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<int32_t> x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1 << 16, rng);
  DeviceVector<int32_t> d(x);
  const v1::ScanHeader sum = ScanHeaderOf(v1::DTYPE_INT32, v1::OPERATOR_SUM);
  // A range past the allocation's end.
  DeviceArray past = d.Export();
  past.bytes += 4096;
  expect_code([&] { client.ScanDevice(sum, past); }, grpc::StatusCode::OUT_OF_RANGE, "header.device_memory.offset",
              "past the end");
  // Another device's UUID.
  DeviceArray elsewhere = d.Export();
  elsewhere.device_uuid = std::string(16, '\x01');
  expect_code([&] { client.ScanDevice(sum, elsewhere); }, grpc::StatusCode::FAILED_PRECONDITION,
              "header.device_memory.device_uuid", "another device");
  // A handle whose memory was freed before the server ever opened it: an allocation of its own
  // (64 MiB; a small one may share a block the driver keeps, whose handle still opens).
  DeviceArray stale;
  {
    DeviceVector<int32_t> gone(size_t{16} << 20);
    stale = gone.Export();
  }
  expect_code([&] { client.ScanDevice(sum, stale); }, grpc::StatusCode::FAILED_PRECONDITION,
              "header.device_memory.handle", "freed");
  // Bytes that are no handle at all.
  DeviceArray garbage = d.Export();
  for (char& c : garbage.handle) c = static_cast<char>(rng());
  expect_code([&] { client.ScanDevice(sum, garbage); }, grpc::StatusCode::FAILED_PRECONDITION,
              "header.device_memory.handle", "garbage");
  // The server still serves, on device memory and streamed.
  client.ScanDevice(sum, d.Export());
  EXPECT_EQ(d.Host(), client.Scan(x).values);
  std::string why;
  EXPECT_TRUE(server->Alive(&why)) << why;

  // Without --allow-device-ipc.
  auto plain = Start({}, "device_ipc_off.log");
  Client off = ClientOf(*plain);
  EXPECT_FALSE(off.Info().limits().device_ipc());
  expect_code([&] { off.ScanDevice(sum, d.Export()); }, grpc::StatusCode::FAILED_PRECONDITION, "--allow-device-ipc",
              "off");
}

}  // namespace
}  // namespace gpuscan
