// The CPU engine's front: answers Engine's questions and picks each call's session family
// (engine/cpu/sessions.h), all sharing one pool of threads (engine/cpu/blocks.h, where the block
// layout that makes the results independent of the thread count is explained).
#include "engine/cpu_engine.h"

#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/carry_fold.h"
#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/host_scan.h"

namespace gpuscan::engine {
namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? std::string() : line.substr(first);
  }
  return {};
}

// A resident array in host memory: what the cpu engine's sessions compute on anyway. Mapped
// with its pages populated up front (MAP_POPULATE): a scan writing into fresh heap memory paid
// its page faults inside the kernel, 50 ms for 24 MB against 3-9 ms streamed into pooled chunks.
class HostResident final : public ResidentMemory {
 public:
  HostResident(uint64_t bytes, Engine* owner) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw Error(ErrorCode::kResourceExhausted, "no host memory for " + std::to_string(bytes) + " bytes");
    data_ = static_cast<std::byte*>(p);
    engine = owner;
  }
  ~HostResident() override { munmap(data_, bytes_); }
  std::byte* data() const override { return data_; }
  uint64_t bytes() const override { return bytes_; }
  void Write(uint64_t offset, const void* host, uint64_t n) override { std::memcpy(data_ + offset, host, n); }
  void Read(uint64_t offset, void* host, uint64_t n) const override { std::memcpy(host, data_ + offset, n); }
  void CopyTo(uint64_t offset, ResidentMemory& dst, uint64_t dst_offset, uint64_t n) const override {
    std::memcpy(dst.data() + dst_offset, data_ + offset, n);
  }

 private:
  std::byte* data_ = nullptr;
  uint64_t bytes_;
};

}  // namespace

std::unique_ptr<ResidentMemory> CpuEngine::AllocateResident(uint64_t bytes) {
  return std::make_unique<HostResident>(bytes, this);
}

std::unique_ptr<ResidentMemory> CpuEngine::AllocateSpill(uint64_t bytes) {
  return std::make_unique<HostResident>(bytes, this);
}

CpuEngine::CpuEngine(int threads) {
  if (threads < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "cpu threads must be >= 0 (0 = all hardware threads), got " +
                    std::to_string(threads));
  }
  pool_ = std::make_shared<cpu::Pool>(threads);
  const int n = this->threads();
  device_name_ = "cpu (" + std::to_string(n) + (n == 1 ? " thread" : " threads");
  const std::string model = CpuModelName();
  if (!model.empty()) device_name_ += ", " + model;
  device_name_ += ")";
}

CpuEngine::~CpuEngine() = default;

int CpuEngine::threads() const { return pool_->arena.max_concurrency(); }

std::vector<ScanAlgorithm> CpuEngine::scan_algorithms() const {
  return {ScanAlgorithm::kDefault, ScanAlgorithm::kCpuBlocked, ScanAlgorithm::kDeterministic};
}
std::vector<std::string> CpuEngine::reduce_algorithms() const { return {"cpu_blocked", "deterministic"}; }
std::vector<std::string> CpuEngine::compact_algorithms() const { return {"cpu_blocked"}; }

std::unique_ptr<ScanSession> CpuEngine::NewScan(const ScanSpec& spec) {
  if (spec.algorithm != ScanAlgorithm::kDefault && spec.algorithm != ScanAlgorithm::kCpuBlocked &&
      spec.algorithm != ScanAlgorithm::kDeterministic) {
    if (static_cast<unsigned>(spec.algorithm) > static_cast<unsigned>(ScanAlgorithm::kDeterministic)) {
      throw Error(ErrorCode::kInvalidArgument, "unknown scan algorithm");
    }
    throw Error(ErrorCode::kUnimplemented,
                "scan algorithm '" + std::string(Name(spec.algorithm)) +
                    "' is not available on the cpu engine (available: cpu_blocked, deterministic)");
  }
  // The CPU engine's "device" memory is host memory: a whole array is folded on the host too.
  return WithCarry(cpu::NewScan(pool_, spec), spec, [spec](void* out, uint64_t n, StageTimes& times) {
    host::KernelTimer timer(times);
    FoldCarry(spec, out, n, 0);
  });
}

std::unique_ptr<ReduceSession> CpuEngine::NewReduce(const ReduceSpec& spec) { return cpu::NewReduce(pool_, spec); }

std::unique_ptr<HistogramSession> CpuEngine::NewHistogram(const HistogramSpec& spec) {
  CheckHistogramSpec(spec);
  return cpu::NewHistogram(pool_, spec);
}

std::unique_ptr<SegmentedScanSession> CpuEngine::NewSegmentedScan(const SegmentedScanSpec& spec) {
  return cpu::NewSegmentedScan(pool_, spec);
}

std::unique_ptr<Scan2DSession> CpuEngine::NewScan2D(const Scan2DSpec& spec) {
  if (spec.cols == 0) throw Error(ErrorCode::kInvalidArgument, "a 2-D scan needs at least one column");
  return cpu::NewScan2D(pool_, spec);
}

std::unique_ptr<SortSession> CpuEngine::NewSort(const SortSpec& spec) {
  return std::make_unique<SortSession>([pool = pool_, spec](const void* keys, const void* values, uint64_t n,
                                                           void* keys_out, void* values_out, int64_t* indices_out,
                                                           StageTimes& times) {
    return cpu::Sort(*pool, spec, keys, values, n, keys_out, values_out, indices_out, times);
  });
}

std::unique_ptr<CompactSession> CpuEngine::NewCompact(const CompactSpec& spec) { return cpu::NewCompact(pool_, spec); }

std::unique_ptr<SegmentedScanSession> NewHostSegmentedScan(const SegmentedScanSpec& spec) {
  static CpuEngine host(0);  // sessions share its pool, and keep it alive
  return host.NewSegmentedScan(spec);
}

}  // namespace gpuscan::engine
