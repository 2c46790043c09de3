// DeviceSet: one engine per device (--devices), seen by the service as one Engine. Each call's
// session comes from the healthy device with the fewest calls open (ties: the one after the
// last chosen), so concurrent calls spread over the devices and a striped array, being one
// session, stays on one. A device that turns unhealthy (a sticky CUDA error) keeps failing its
// own calls and gets no new ones; the set is healthy while any device is.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace gpuscan::engine {

class DeviceSet final : public Engine {
 public:
  // labels[i]: how Timing.device and the metrics name devices[i] ("1: NVIDIA H200").
  DeviceSet(std::vector<std::unique_ptr<Engine>> devices, std::vector<std::string> labels);

  std::string name() const override { return devices_[0]->name(); }
  std::string device_name() const override;  // "2 devices: 0: NVIDIA H200, 1: NVIDIA H200"
  std::vector<DeviceInfo> devices() const override;
  std::vector<ScanAlgorithm> scan_algorithms() const override { return devices_[0]->scan_algorithms(); }
  ScanAlgorithm float_scan_default() const override { return devices_[0]->float_scan_default(); }
  std::vector<std::string> reduce_algorithms() const override { return devices_[0]->reduce_algorithms(); }
  std::vector<std::string> compact_algorithms() const override { return devices_[0]->compact_algorithms(); }
  bool healthy() const override;
  std::string unhealthy_reason() const override;  // every unhealthy device's, named
  void CheckHealth() override;
  std::optional<DeviceMemory> device_memory() const override;  // summed over the devices
  std::vector<DeviceStatus> device_status() const override;
  // The first device registers (registrations are portable) and the others adopt the range, so
  // every device's copies skip staging.
  std::shared_ptr<void> RegisterHost(void* data, uint64_t bytes, bool read_only) override;
  std::shared_ptr<void> AdoptRegistered(void* data, uint64_t bytes) override;
  bool registered(const void* p, uint64_t bytes) const override;
  // Opened by the member whose device the UUID names; sessions on it run there.
  std::shared_ptr<IpcMemory> OpenIpc(const std::string& device_uuid, const std::string& handle) override;
  // On the device with the most free memory now (ties: the lowest index).
  std::unique_ptr<ResidentMemory> AllocateResident(uint64_t bytes) override;
  std::unique_ptr<ResidentMemory> AllocateSpill(uint64_t bytes) override;  // the first device's

  std::unique_ptr<ScanSession> NewScan(const ScanSpec& spec) override;
  std::unique_ptr<ReduceSession> NewReduce(const ReduceSpec& spec) override;
  std::unique_ptr<CompactSession> NewCompact(const CompactSpec& spec) override;
  std::unique_ptr<HistogramSession> NewHistogram(const HistogramSpec& spec) override;
  std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const SegmentedScanSpec& spec) override;
  std::unique_ptr<ReduceByKeySession> NewReduceByKey(const SegmentedScanSpec& spec) override;
  std::unique_ptr<Scan2DSession> NewScan2D(const Scan2DSpec& spec) override;
  std::unique_ptr<SortSession> NewSort(const SortSpec& spec) override;

  size_t size() const { return devices_.size(); }
  Engine& device(size_t i) { return *devices_[i]; }

 private:
  // The device for the next session; its open count is raised (the session lowers it).
  size_t Pick();
  // make(the picked device's engine) -> its session, placed on that device.
  template <class Make>
  auto Open(Make&& make);

  std::vector<std::unique_ptr<Engine>> devices_;
  std::vector<std::string> labels_;
  std::unique_ptr<std::atomic<uint64_t>[]> open_;  // sessions open per device
  std::atomic<size_t> next_{0};
};

}  // namespace gpuscan::engine
