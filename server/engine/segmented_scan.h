// Segmented scans on any engine (issue 13): the chunk becomes (head, value) pairs, the engine's
// own scan session runs over them with seg::SegOp (gpuscan/kernels/segmented.h), and the values
// come back out. So a segmented scan inherits each engine's scan: its speed, and for float
// SUM/PRODUCT the canonical tree's reproducibility. Exclusive results are the inclusive ones
// shifted by one within each segment (the identity at each segment's first element).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gpuscan/kernels/segmented.h"

namespace gpuscan::engine {

// Bytes per element of a segmented scan's keys (1 for head bytes); throws kInvalidArgument for
// float keys.
inline size_t SegmentKeyBytes(const SegmentedScanSpec& spec) {
  if (spec.heads) return 1;
  if (IsFloat(spec.key_dtype)) {
    throw Error(ErrorCode::kInvalidArgument,
                "segment keys must be an integer dtype, not " + std::string(Name(spec.key_dtype)));
  }
  return SizeOf(spec.key_dtype);
}

template <class T, class Op>
class PairSegmentedScan final : public SegmentedScanSession {
 public:
  using Item = seg::SegItem<T>;

  // `pairs`: an inclusive scan session over Item with seg::SegOp<T, Op>.
  PairSegmentedScan(const SegmentedScanSpec& spec, std::unique_ptr<ScanSession> pairs)
      : spec_(spec), key_size_(SegmentKeyBytes(spec)), pairs_(std::move(pairs)) {
    Place(pairs_->device());  // where its pair scan runs
  }

  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    if (values == nullptr || keys == nullptr || out == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "null segmented scan buffer");
    }
    items_.resize(n);
    scanned_.resize(n);
    const auto t0 = Clock::now();
    Pack(static_cast<const unsigned char*>(values), static_cast<const unsigned char*>(keys), n);
    const auto t1 = Clock::now();
    pairs_->Process(items_.data(), scanned_.data(), n, times);
    const auto t2 = Clock::now();
    Unpack(static_cast<unsigned char*>(out), n);
    // Packing and unpacking are compute on the host: kernel time, as the CPU engine counts it.
    times.kernel_us += Micros(t1 - t0) + Micros(Clock::now() - t2);
  }

  std::string algorithm() const override { return "segmented_" + pairs_->algorithm(); }

 private:
  using Clock = std::chrono::steady_clock;
  static uint64_t Micros(Clock::duration d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  }

  // A key as its bits (segments compare keys for equality only, so signedness is moot).
  uint64_t KeyAt(const unsigned char* keys, uint64_t i) const {
    if (key_size_ == 4) {
      uint32_t k;
      std::memcpy(&k, keys + i * 4, 4);
      return k;
    }
    uint64_t k;
    std::memcpy(&k, keys + i * 8, 8);
    return k;
  }

  void Pack(const unsigned char* values, const unsigned char* keys, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t head;
      if (spec_.heads) {
        head = keys[i] != 0;
      } else {
        const uint64_t k = KeyAt(keys, i);
        head = k != prev_key_;
        prev_key_ = k;
      }
      if (first_) {
        head = 1;
        first_ = false;
      }
      T v;
      std::memcpy(&v, values + i * sizeof(T), sizeof(T));
      items_[i] = seg::MakeItem<T>(v, head);
    }
  }

  void Unpack(unsigned char* out, uint64_t n) {
    if (!spec_.exclusive) {
      for (uint64_t i = 0; i < n; ++i) std::memcpy(out + i * sizeof(T), &scanned_[i].value, sizeof(T));
      return;
    }
    T before = last_;  // the inclusive value of the element before i
    for (uint64_t i = 0; i < n; ++i) {
      const T v = items_[i].head ? Op::identity() : before;
      std::memcpy(out + i * sizeof(T), &v, sizeof(T));
      before = scanned_[i].value;
    }
    last_ = before;
  }

  SegmentedScanSpec spec_;
  size_t key_size_;
  std::unique_ptr<ScanSession> pairs_;
  std::vector<Item> items_, scanned_;  // one chunk's pairs, reused
  bool first_ = true;                  // the next element is the array's first
  uint64_t prev_key_ = 0;              // the last key seen
  T last_ = Op::identity();            // exclusive: the last inclusive value
};

}  // namespace gpuscan::engine
