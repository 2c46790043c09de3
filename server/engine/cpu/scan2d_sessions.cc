// 2-D scans on the pool: the table scan (rows, then columns) and the scans along one axis.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/dispatch.h"

namespace gpuscan::engine::cpu {
namespace {

// What both families share: a chunk of whole rows, checked and timed, and the columns cut into
// strips of kBlock that run in parallel.
class TableScan : public Scan2DSession {
 public:
  void Process(const void* in, void* out, uint64_t rows, StageTimes& times) final {
    if (rows == 0) return;
    const uint64_t n = rows * cols_;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    Run(static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), rows, RunParallel(*pool_, n));
  }

 protected:
  TableScan(std::shared_ptr<Pool> pool, uint64_t cols) : pool_(std::move(pool)), cols_(cols) {}

  // Scans the chunk's `rows` rows from src into dst.
  virtual void Run(const unsigned char* src, unsigned char* dst, uint64_t rows, bool parallel) = 0;

  // Runs f(j0, j1) for every strip [j0, j1) of columns.
  template <class F>
  void ForStrips(bool parallel, const F& f) {
    const uint64_t strips = (cols_ + kBlock - 1) / kBlock;
    ForBlocks(*pool_, strips, parallel, [&](uint64_t s) {
      const uint64_t j0 = s * kBlock;
      f(j0, std::min(cols_, j0 + kBlock));
    });
  }

  std::shared_ptr<Pool> pool_;
  uint64_t cols_;
};

// 2-D scan: the rows in parallel (each folded left to right), then strips of columns in
// parallel (each column folded top to bottom from the carry row). Every element's association is
// the spec's, whatever the threads or the number of rows per call.
template <class T, class Op>
class CpuScan2D final : public TableScan {
 public:
  CpuScan2D(std::shared_ptr<Pool> pool, uint64_t cols) : TableScan(std::move(pool), cols), carry_(cols) {}
  std::string algorithm() const override { return "cpu_rows_columns"; }

 private:
  void Run(const unsigned char* src, unsigned char* dst, uint64_t rows, bool parallel) override {
    const Op op;
    ForBlocks(*pool_, rows, parallel, [&](uint64_t i) {
      const uint64_t base = i * cols_;
      T acc = Load<T>(src, base);
      Store(dst, base, acc);
      for (uint64_t j = 1; j < cols_; ++j) Store(dst, base + j, acc = op(acc, Load<T>(src, base + j)));
    });
    ForStrips(parallel, [&](uint64_t j0, uint64_t j1) {
      uint64_t i = 0;
      if (!has_carry_) i = 1;  // the table's first row is its row fold
      for (; i < rows; ++i) {
        for (uint64_t j = j0; j < j1; ++j) {
          const T above = i == 0 ? carry_[j] : Load<T>(dst, (i - 1) * cols_ + j);
          Store(dst, i * cols_ + j, op(above, Load<T>(dst, i * cols_ + j)));
        }
      }
    });
    std::memcpy(carry_.data(), dst + (rows - 1) * cols_ * sizeof(T), cols_ * sizeof(T));
    has_carry_ = true;
  }

  std::vector<T> carry_;  // the last row of the table so far
  bool has_carry_ = false;
};

// Axis scans: each row (axis=1) or each column (axis=0) folded in order, numpy's association:
// rows in parallel, each whole in a call; strips of columns in parallel, each column continuing
// its carry (its inclusive value in the last row so far) from the call before.
template <class T, class Op>
class CpuScanAxis final : public TableScan {
 public:
  CpuScanAxis(std::shared_ptr<Pool> pool, const Scan2DSpec& spec)
      : TableScan(std::move(pool), spec.cols), rows_axis_(spec.axis == ScanAxis::kRows),
        exclusive_(spec.exclusive), carry_(rows_axis_ ? 0 : spec.cols) {}
  std::string algorithm() const override { return rows_axis_ ? "cpu_rows" : "cpu_columns"; }

 private:
  void Run(const unsigned char* src, unsigned char* dst, uint64_t rows, bool parallel) override {
    if (rows_axis_) {
      ForBlocks(*pool_, rows, parallel, [&](uint64_t i) {
        T acc{};
        for (uint64_t j = 0, at = i * cols_; j < cols_; ++j, ++at) Step(j > 0, acc, Load<T>(src, at), dst, at);
      });
      return;
    }
    ForStrips(parallel, [&](uint64_t j0, uint64_t j1) {
      for (uint64_t i = 0; i < rows; ++i) {
        const bool started = has_carry_ || i > 0;
        for (uint64_t j = j0; j < j1; ++j) Step(started, carry_[j], Load<T>(src, i * cols_ + j), dst, i * cols_ + j);
      }
    });
    has_carry_ = true;
  }

  // One element of a fold: acc becomes acc op v (v alone where the fold starts), and the output
  // is acc after (inclusive) or before (exclusive: the identity where the fold starts).
  void Step(bool started, T& acc, T v, unsigned char* dst, uint64_t at) const {
    const Op op;
    if (!started) {
      Store(dst, at, exclusive_ ? Op::identity() : v);
      acc = v;
      return;
    }
    if (exclusive_) Store(dst, at, acc);
    acc = op(acc, v);
    if (!exclusive_) Store(dst, at, acc);
  }

  bool rows_axis_, exclusive_;
  std::vector<T> carry_;  // columns: each one's inclusive value in the last row so far
  bool has_carry_ = false;
};

}  // namespace

std::unique_ptr<Scan2DSession> NewScan2D(const std::shared_ptr<Pool>& pool, const Scan2DSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<Scan2DSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if (spec.axis != ScanAxis::kBoth) return std::make_unique<CpuScanAxis<T, O>>(pool, spec);
    return std::make_unique<CpuScan2D<T, O>>(pool, spec.cols);
  });
}

}  // namespace gpuscan::engine::cpu
