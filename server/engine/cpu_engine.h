// The CPU engine: blocked, multi-threaded (oneTBB) sessions whose float results depend only on
// the input and its chunking, never on the thread count. Its families: engine/cpu/sessions.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace gpuscan::engine {

namespace cpu {
struct Pool;  // the TBB arena the sessions share (engine/cpu/blocks.h)
}

class CpuEngine : public Engine {
 public:
  // Each chunk is cut into blocks of this many elements (whatever the dtype or thread count):
  // the block layout fixes the association of float operations, hence the results.
  static constexpr uint64_t kBlockElems = uint64_t{1} << 14;  // 16 Ki
  // Chunks shorter than this run on the calling thread (same blocks, same results): waking
  // the pool costs more than it saves.
  static constexpr uint64_t kParallelMinElems = 4 * kBlockElems;  // 64 Ki

  // threads: 0 = all hardware threads; more than the hardware has are capped to that.
  explicit CpuEngine(int threads);
  ~CpuEngine() override;

  std::string name() const override { return "cpu"; }
  std::string device_name() const override { return device_name_; }
  std::vector<DeviceInfo> devices() const override { return {}; }
  std::vector<ScanAlgorithm> scan_algorithms() const override;
  std::vector<std::string> reduce_algorithms() const override;
  std::vector<std::string> compact_algorithms() const override;

  // Host memory: the cpu engine's "device" (its sessions' ProcessDevice take host pointers).
  std::unique_ptr<ResidentMemory> AllocateResident(uint64_t bytes) override;
  std::unique_ptr<ResidentMemory> AllocateSpill(uint64_t bytes) override;  // host memory as well

  std::unique_ptr<ScanSession> NewScan(const ScanSpec& spec) override;
  std::unique_ptr<ReduceSession> NewReduce(const ReduceSpec& spec) override;
  std::unique_ptr<CompactSession> NewCompact(const CompactSpec& spec) override;
  std::unique_ptr<HistogramSession> NewHistogram(const HistogramSpec& spec) override;
  std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const SegmentedScanSpec& spec) override;
  std::unique_ptr<Scan2DSession> NewScan2D(const Scan2DSpec& spec) override;
  std::unique_ptr<SortSession> NewSort(const SortSpec& spec) override;

  int threads() const;  // the arena's concurrency (after capping)

 private:
  // Shared with the sessions, so a session may outlive the engine that made it.
  std::shared_ptr<cpu::Pool> pool_;
  std::string device_name_;
};

// A segmented scan on the host's threads (the CPU engine's sessions on a pool shared by the
// process), for a device engine without a device path for some pair type.
std::unique_ptr<SegmentedScanSession> NewHostSegmentedScan(const SegmentedScanSpec& spec);

}  // namespace gpuscan::engine
