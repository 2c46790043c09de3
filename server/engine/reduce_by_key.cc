#include "engine/reduce_by_key.h"

#include <cstring>

namespace gpuscan::engine {

namespace {
SegmentedScanSpec InclusiveByKeys(SegmentedScanSpec spec) {
  spec.heads = false;
  spec.exclusive = false;
  return spec;
}
}  // namespace

RunReducer::RunReducer(Engine& engine, SegmentedScanSpec spec)
    : scan_(engine.NewSegmentedScan(InclusiveByKeys(spec))),
      value_size_(SizeOf(spec.dtype)),
      key_size_(SizeOf(spec.key_dtype)) {
  Place(scan_->device());  // where its segmented scan runs
}

void RunReducer::Emit(const unsigned char* key, const unsigned char* value, std::string* keys_out,
                      std::string* values_out) {
  keys_out->append(reinterpret_cast<const char*>(key), key_size_);
  values_out->append(reinterpret_cast<const char*>(value), value_size_);
}

uint64_t RunReducer::Process(const void* values, const void* keys, uint64_t n, std::string* keys_out,
                             std::string* values_out, StageTimes& times) {
  if (n == 0) return 0;
  scanned_.resize(n * value_size_);
  scan_->Process(values, keys, scanned_.data(), n, times);
  const auto* k = static_cast<const unsigned char*>(keys);
  const unsigned char* v = scanned_.data();
  uint64_t runs = 0;
  // The open run ends here when the chunk's first key differs (the scan restarted there).
  if (open_ && std::memcmp(open_key_, k, key_size_) != 0) {
    Emit(open_key_, open_value_, keys_out, values_out);
    ++runs;
  }
  for (uint64_t i = 0; i + 1 < n; ++i) {
    if (std::memcmp(k + i * key_size_, k + (i + 1) * key_size_, key_size_) != 0) {
      Emit(k + i * key_size_, v + i * value_size_, keys_out, values_out);
      ++runs;
    }
  }
  open_ = true;
  std::memcpy(open_key_, k + (n - 1) * key_size_, key_size_);
  std::memcpy(open_value_, v + (n - 1) * value_size_, value_size_);
  return runs;
}

std::unique_ptr<ReduceByKeySession> Engine::NewReduceByKey(const SegmentedScanSpec& spec) {
  return std::make_unique<RunReducer>(*this, spec);
}

uint64_t RunReducer::Finish(std::string* keys_out, std::string* values_out) {
  if (!open_) return 0;
  Emit(open_key_, open_value_, keys_out, values_out);
  open_ = false;
  return 1;
}

}  // namespace gpuscan::engine
