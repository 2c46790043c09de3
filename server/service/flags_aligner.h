// FlagsAligner: chunk assembly for a call whose values come with a second stream matched to them
// by element position (Compact's flags, one byte each; SegmentedScan's keys or head bytes). A
// client may send the two out of step (PairedChecker bounds by how much); this hands the engine
// only runs of elements whose values and flags have both arrived, in order. Pure (no I/O, no
// engine), so the request fuzzer drives the very code the handler runs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuscan::server {

class FlagsAligner {
 public:
  // element_size: bytes per value; flag_size: bytes per flag (a key's size for keys).
  explicit FlagsAligner(size_t element_size, size_t flag_size = 1)
      : element_size_(element_size), flag_size_(flag_size) {}

  // Takes one request's values and flags (whole elements each) and calls
  // select(const char* values, const uint8_t* flags, uint64_t n) for the next n >= 1 elements
  // that now have both, if any. Without a backlog, a request whose values and flags match
  // passes straight through (no copy).
  // Bytes: anything with data() and size() (a std::string, a Payload).
  template <class Bytes, class Select>
  void Add(const Bytes& values, const Bytes& flags, Select&& select) {
    if (values_.empty() && flags_.empty() && values.size() / element_size_ == flags.size() / flag_size_) {
      if (!flags.empty()) {
        select(values.data(), reinterpret_cast<const uint8_t*>(flags.data()), uint64_t(flags.size() / flag_size_));
      }
      return;
    }
    values_.append(values.data(), values.size());
    flags_.append(flags.data(), flags.size());
    const uint64_t n = std::min<uint64_t>(values_.size() / element_size_, flags_.size() / flag_size_);
    if (n == 0) return;
    select(values_.data(), reinterpret_cast<const uint8_t*>(flags_.data()), n);
    values_.erase(0, n * element_size_);
    flags_.erase(0, n * flag_size_);
  }

  // Elements whose values, or flags, are still waiting for their counterpart.
  uint64_t values_waiting() const { return values_.size() / element_size_; }
  uint64_t flags_waiting() const { return flags_.size() / flag_size_; }

 private:
  size_t element_size_;
  size_t flag_size_;
  std::string values_, flags_;
};

}  // namespace gpuscan::server
