// RowCutter: re-cuts a byte stream cut anywhere into runs of whole rows (Scan2D), keeping at
// most one partial row between pieces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpuscan::server {

class RowCutter {
 public:
  explicit RowCutter(uint64_t row_bytes) : row_bytes_(row_bytes) {}

  // Calls emit(rows_data, rows) for each run of whole rows `data` completes, in order.
  // Bytes: anything with data() and size() (a std::string, a Payload).
  template <class Bytes, class Emit>
  void Add(const Bytes& data, const Emit& emit) {
    const char* p = reinterpret_cast<const char*>(data.data());
    uint64_t left = data.size();
    if (!partial_.empty()) {  // complete the row begun by earlier pieces
      const uint64_t take = std::min<uint64_t>(left, row_bytes_ - partial_.size());
      partial_.append(p, take);
      p += take;
      left -= take;
      if (partial_.size() < row_bytes_) return;
      emit(partial_.data(), uint64_t{1});
      partial_.clear();
    }
    if (const uint64_t rows = left / row_bytes_; rows > 0) {
      emit(p, rows);
      p += rows * row_bytes_;
      left -= rows * row_bytes_;
    }
    partial_.append(p, left);
  }
  uint64_t partial_bytes() const { return partial_.size(); }

 private:
  uint64_t row_bytes_;
  std::string partial_;  // the start of a row whose end has not arrived
};

}  // namespace gpuscan::server
