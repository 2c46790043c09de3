// Reduce by key on any engine (issue 13): a run's reduction is the inclusive segmented scan of
// its values at the run's last element, so each chunk goes through the engine's segmented scan
// and the runs that end inside it are picked out. The run a chunk ends in stays open until a
// different key (or the end of the array) comes. Memory: one chunk's scan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace gpuscan::engine {

class RunReducer final : public ReduceByKeySession {
 public:
  // spec: the values' dtype and operator and the keys' key_dtype (heads and exclusive are
  // ignored). Throws Error as Engine::NewSegmentedScan does.
  RunReducer(Engine& engine, SegmentedScanSpec spec);

  // The next n values and their n keys (raw). Appends each run completed so far, its key to
  // keys_out and its reduction to values_out (raw little-endian); returns how many.
  uint64_t Process(const void* values, const void* keys, uint64_t n, std::string* keys_out, std::string* values_out,
                   StageTimes& times) override;
  // At the end of the array: appends the last run, if any element came; returns 0 or 1.
  uint64_t Finish(std::string* keys_out, std::string* values_out) override;

  std::string algorithm() const override { return scan_->algorithm(); }

 private:
  void Emit(const unsigned char* key, const unsigned char* value, std::string* keys_out, std::string* values_out);

  std::unique_ptr<SegmentedScanSession> scan_;
  size_t value_size_, key_size_;
  std::vector<unsigned char> scanned_;  // one chunk's inclusive segmented scan, reused
  bool open_ = false;                   // a run is open: the last chunk ended in it
  unsigned char open_key_[8] = {};
  unsigned char open_value_[8] = {};
};

}  // namespace gpuscan::engine
