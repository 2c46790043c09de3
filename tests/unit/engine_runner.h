// Feeds whole std::vectors to engine sessions chunk by chunk, the way the server streams them.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/cpu_engine.h"
#include "engine/dispatch.h"
#include "reference.h"

namespace gpuscan::unit {

using engine::CompactSpec;
using engine::CpuEngine;
using engine::HistogramSpec;
using engine::DType;
using engine::Engine;
using engine::Op;
using engine::PredicateOp;
using engine::ReduceSpec;
using engine::ScanAlgorithm;
using engine::ScanSpec;
using engine::StageTimes;

inline constexpr unsigned char kPoison = 0xA5;
inline constexpr std::size_t kMiB = std::size_t{1} << 20;

// A buffer of n elements whose bytes are all kPoison, so unwritten elements show.
template <class T>
std::vector<T> Poisoned(std::size_t n) {
  std::vector<T> v(n);
  if (n != 0) std::memset(static_cast<void*>(v.data()), kPoison, n * sizeof(T));
  return v;
}

template <class T>
bool IsPoison(const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char b : bytes) {
    if (b != kPoison) return false;
  }
  return true;
}

inline std::string Describe(const std::vector<std::size_t>& chunks) {
  std::string s = std::to_string(chunks.size()) + " chunks:";
  for (std::size_t i = 0; i < chunks.size() && i < 24; ++i) s += " " + std::to_string(chunks[i]);
  if (chunks.size() > 24) s += " ...";
  return s;
}

template <class T>
std::vector<T> RunScan(Engine& engine, const ScanSpec& spec, const std::vector<T>& in,
                       const std::vector<std::size_t>& chunks, StageTimes* times = nullptr) {
  auto session = engine.NewScan(spec);
  std::vector<T> out = Poisoned<T>(in.size());
  StageTimes local;
  std::size_t offset = 0;
  for (std::size_t len : chunks) {
    session->Process(in.data() + offset, out.data() + offset, len, times ? *times : local);
    offset += len;
  }
  EXPECT_EQ(offset, in.size()) << "chunk lengths do not add up";
  // Bit for bit where the result is exact; float sums and products of the GPU's non-canonical
  // algorithms may round differently from run to run.
  const bool exact = !engine::IsFloat(spec.dtype) || spec.op == engine::Op::kMin || spec.op == engine::Op::kMax ||
                     engine.name() == "cpu";
  {
    // Pipelined as a striped array's driver runs it: begin chunk k + 1, then end chunk k.
    auto piped = engine.NewScan(spec);
    std::vector<T> got = Poisoned<T>(in.size());
    uint64_t pending = 0;
    offset = 0;
    for (std::size_t len : chunks) {
      const uint64_t ticket = piped->Begin(in.data() + offset, got.data() + offset, len, local);
      piped->End(pending, local);
      pending = ticket;
      offset += len;
    }
    piped->End(pending, local);
    if (exact) {
      EXPECT_EQ(std::memcmp(got.data(), out.data(), in.size() * sizeof(T)), 0) << "Begin/End differs from Process";
    }
  }
  if (session->in_place()) {
    // The service hands such sessions one buffer as input and output: same chunks, same bits.
    auto again = engine.NewScan(spec);
    std::vector<T> buf = in;
    offset = 0;
    for (std::size_t len : chunks) {
      again->Process(buf.data() + offset, buf.data() + offset, len, local);
      offset += len;
    }
    if (exact) {
      EXPECT_EQ(std::memcmp(buf.data(), out.data(), in.size() * sizeof(T)), 0) << "in place differs from out of place";
    }
  }
  return out;
}

// Hands `in` to a Reduce or Histogram session chunk by chunk.
template <class Session, class T>
void Feed(Session& session, const std::vector<T>& in, const std::vector<std::size_t>& chunks) {
  StageTimes times;
  std::size_t offset = 0;
  for (std::size_t len : chunks) {
    session.Process(in.data() + offset, len, times);
    offset += len;
  }
  EXPECT_EQ(offset, in.size()) << "chunk lengths do not add up";
}

template <class T>
T RunReduce(Engine& engine, const ReduceSpec& spec, const std::vector<T>& in,
            const std::vector<std::size_t>& chunks) {
  auto session = engine.NewReduce(spec);
  Feed(*session, in, chunks);
  T result;
  session->Result(&result);
  return result;
}

// The engine's dtype of element type T.
template <class T>
DType DTypeOf() {
  DType out = DType::kInt32;
  for (DType d : engine::kAllDTypes) {
    engine::VisitDType(d, [&](auto t) {
      if (std::is_same_v<typename decltype(t)::type, T>) out = d;
    });
  }
  return out;
}

// Runs a histogram chunk by chunk: bins + 3 counts (the bins, then below, above, NaN).
template <class T>
std::vector<uint64_t> RunHistogram(Engine& engine, const HistogramSpec& spec, const std::vector<T>& in,
                                   const std::vector<std::size_t>& chunks) {
  auto session = engine.NewHistogram(spec);
  Feed(*session, in, chunks);
  return session->Result();
}

// Runs a segmented scan chunk by chunk: `keys` holds one key (of the spec's key_dtype) or one
// head byte per element, as raw bytes.
template <class T>
std::vector<T> RunSegmentedScan(Engine& engine, const engine::SegmentedScanSpec& spec, const std::vector<T>& in,
                                const std::vector<unsigned char>& keys, const std::vector<std::size_t>& chunks) {
  auto session = engine.NewSegmentedScan(spec);
  const std::size_t ksize = spec.heads ? 1 : engine::SizeOf(spec.key_dtype);
  std::vector<T> out = Poisoned<T>(in.size());
  StageTimes times;
  std::size_t offset = 0;
  for (std::size_t len : chunks) {
    session->Process(in.data() + offset, keys.data() + offset * ksize, out.data() + offset, len, times);
    offset += len;
  }
  EXPECT_EQ(offset, in.size()) << "chunk lengths do not add up";
  return out;
}

// Runs a reduce by key in chunks of the given lengths; returns (keys bytes, values bytes) of the
// runs, which must number what Process and Finish said.
template <class T>
std::pair<std::string, std::string> RunReduceByKey(Engine& engine, const engine::SegmentedScanSpec& spec,
                                                   const std::vector<T>& in, const std::vector<unsigned char>& keys,
                                                   const std::vector<std::size_t>& chunks) {
  auto session = engine.NewReduceByKey(spec);
  const std::size_t ksize = engine::SizeOf(spec.key_dtype);
  std::pair<std::string, std::string> out;
  StageTimes times;
  std::size_t offset = 0;
  uint64_t runs = 0;
  for (std::size_t len : chunks) {
    runs += session->Process(in.data() + offset, keys.data() + offset * ksize, len, &out.first, &out.second, times);
    offset += len;
  }
  runs += session->Finish(&out.first, &out.second);
  EXPECT_EQ(offset, in.size()) << "chunk lengths do not add up";
  EXPECT_EQ(out.first.size(), runs * ksize) << "keys of " << runs << " runs";
  EXPECT_EQ(out.second.size(), runs * sizeof(T)) << "values of " << runs << " runs";
  return out;
}

// Runs a 2-D scan of a rows x cols matrix, row_chunks[k] whole rows per Process call.
template <class T>
std::vector<T> RunScan2D(Engine& engine, const engine::Scan2DSpec& spec, const std::vector<T>& in,
                         const std::vector<std::size_t>& row_chunks) {
  auto session = engine.NewScan2D(spec);
  std::vector<T> out = Poisoned<T>(in.size());
  StageTimes times;
  std::size_t row = 0;
  for (std::size_t rows : row_chunks) {
    session->Process(in.data() + row * spec.cols, out.data() + row * spec.cols, rows, times);
    row += rows;
  }
  EXPECT_EQ(row * spec.cols, in.size()) << "row chunks do not add up";
  return out;
}

// Runs a compaction chunk by chunk (flags: null when the spec uses a predicate). Each chunk
// gets fresh poisoned output buffers; nothing past the kept count may be written.
template <class T>
testing::CompactResult<T> RunCompact(Engine& engine, const CompactSpec& spec,
                                     const std::vector<T>& values,
                                     const std::vector<uint8_t>* flags,
                                     const std::vector<std::size_t>& chunks) {
  auto session = engine.NewCompact(spec);
  testing::CompactResult<T> result;
  StageTimes times;
  std::size_t offset = 0;
  for (std::size_t len : chunks) {
    std::vector<T> out_values = Poisoned<T>(len);
    std::vector<int64_t> out_indices = Poisoned<int64_t>(len);
    const uint64_t kept = session->Process(
        values.data() + offset, flags ? flags->data() + offset : nullptr, len,
        spec.want_values ? out_values.data() : nullptr,
        spec.want_indices ? out_indices.data() : nullptr, times);
    EXPECT_LE(kept, len);
    if (kept > len) return result;
    if (spec.want_values) {
      result.values.insert(result.values.end(), out_values.begin(), out_values.begin() + kept);
    }
    if (spec.want_indices) {
      result.indices.insert(result.indices.end(), out_indices.begin(),
                            out_indices.begin() + kept);
    }
    for (std::size_t i = kept; i < len; ++i) {
      if (!IsPoison(out_values[i]) || !IsPoison(out_indices[i])) {
        ADD_FAILURE() << "chunk at " << offset << ": output written past the kept count "
                      << kept << " at [" << i << "]";
        break;
      }
    }
    if (!spec.want_values && !spec.want_indices) {
      // Nothing wanted: record how many were kept through the indices' length.
      result.indices.resize(result.indices.size() + kept, -1);
    }
    offset += len;
  }
  EXPECT_EQ(offset, values.size()) << "chunk lengths do not add up";
  return result;
}

// Sizes every engine test sweeps: tiny, warp-ish, the engine's block and parallel thresholds,
// the 1 MiB chunk the server streams (in elements of T), and one large odd size; each ±1.
template <class T>
std::vector<std::size_t> SweepSizes() {
  const std::size_t b = CpuEngine::kBlockElems;
  const std::size_t p = CpuEngine::kParallelMinElems;
  const std::size_t m = kMiB / sizeof(T);
  return {0,     1, 2,     31, 32,    33,    1023,  1024,  1025,  b - 1,
          b,     b + 1, p - 1, p, p + 1, m - 1, m, m + 1, 1000003};
}

// A random "typical" chunk length for RandomChunkLengths.
template <class T>
std::size_t RandomTypicalChunk(std::size_t n, std::mt19937_64& rng) {
  const std::size_t choices[] = {3, n / 7 + 1, CpuEngine::kBlockElems,
                                 CpuEngine::kParallelMinElems + 1, kMiB / sizeof(T)};
  return choices[rng() % (sizeof(choices) / sizeof(choices[0]))];
}

template <class T>
std::vector<std::size_t> OneChunk(const std::vector<T>& v) {
  return {v.size()};
}

}  // namespace gpuscan::unit
