// Widening scans (scan_widen.h, issue 47): every instantiated (In, Out) pair, inclusive and
// exclusive, with and without a carry, over the sizes around every tile boundary of the policies
// they run (WidenScanTuning: Tiny, Small, Large; the canonical tree's 16 / 4096 / 2^20), against
// a sequential host reference (integers: exact; float16 -> float32: the canonical tree over the
// host-widened array, bit for bit); unaligned pointers; chunks chained through the device carry
// (and calls split over several launches); float16 specials; bit equality with the float32
// deterministic scan (CanonicalScan) of the host-widened array; the device's float16 conversion
// against the host's for all 65536 patterns; one int8 -> int64 scan of more than 2^31 elements.
// Outputs start poisoned; guards after them must stay so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "canonical_reference.h"
#include "detail/tuning.cuh"
#include "gpu_test_util.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/half.h"
#include "gpuscan/kernels/scan_widen.h"
#include "gpuscan/kernels/testing.h"

namespace gpuscan::gputest {
namespace {

using kernels::Float16;
namespace kd = kernels::detail;

template <class T>
const char* Name() {
  if constexpr (std::is_same_v<T, int8_t>) return "int8";
  if constexpr (std::is_same_v<T, uint8_t>) return "uint8";
  if constexpr (std::is_same_v<T, int16_t>) return "int16";
  if constexpr (std::is_same_v<T, uint16_t>) return "uint16";
  if constexpr (std::is_same_v<T, Float16>) return "float16";
  return DtypeName<T>();
}

// f(In{}, Out{}) for every instantiated integer pair.
template <class F>
void ForEachIntPair(F&& f) {
  auto outs = [&](auto in) {
    using In = decltype(in);
    f(In{}, int32_t{});
    f(In{}, int64_t{});
    f(In{}, uint32_t{});
    f(In{}, uint64_t{});
  };
  outs(int8_t{});
  outs(uint8_t{});
  outs(int16_t{});
  outs(uint16_t{});
}

// Full-range random narrow integers (never all zeros for n > 0: a draw of n zeros is 256^-n).
template <class In>
std::vector<In> RandomNarrow(std::size_t n, std::mt19937_64& rng) {
  std::vector<In> x(n);
  std::size_t i = 0;
  while (i < n) {
    uint64_t w = rng();
    for (int b = 0; b < 8 / int(sizeof(In)) && i < n; ++b, ++i, w >>= 8 * sizeof(In)) {
      x[i] = static_cast<In>(w);
    }
  }
  return x;
}

// float16 values uniform in [-100, 100], rounded to half.
std::vector<Float16> RandomHalves(std::size_t n, std::mt19937_64& rng) {
  std::vector<Float16> x(n);
  for (auto& h : x) h.bits = half::FloatToHalf(testing::UniformReal<float>(rng, -100.f, 100.f));
  return x;
}

std::vector<float> WidenOnHost(const std::vector<Float16>& x) {
  std::vector<float> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = half::HalfToFloat(x[i].bits);
  return w;
}

// The integer reference: out and the carry out of x[off, off + n) from `carry`, wrapping in Out.
template <class In, class Out>
std::vector<Out> IntRef(const std::vector<In>& x, std::size_t off, std::size_t n, Out carry, bool exclusive,
                        Out& carry_out) {
  const ops::Sum<Out> op;
  std::vector<Out> out(n);
  Out run = carry;
  for (std::size_t i = 0; i < n; ++i) {
    const Out w = static_cast<Out>(x[off + i]);
    if (exclusive) {
      out[i] = run;
      run = op(run, w);
    } else {
      run = op(run, w);
      out[i] = run;
    }
  }
  carry_out = run;
  return out;
}

// The float16 reference: the canonical tree over the widened x with C_0 = carry; carry_out is the
// exclusive value of element n of the array extended by one element (scan_widen.h).
std::vector<float> HalfRef(const std::vector<float>& w, bool exclusive, std::optional<float> carry, float& carry_out) {
  std::vector<float> ext = w;
  ext.push_back(0.f);
  const std::vector<float> ex = testing::CanonicalScanRef<float, ops::Sum<float>>(ext, true, carry);
  carry_out = ex.back();
  if (exclusive) return std::vector<float>(ex.begin(), ex.end() - 1);
  return testing::CanonicalScanRef<float, ops::Sum<float>>(w, false, carry);
}

// Where two outputs first differ, bit for bit ("" if nowhere); nan_equal: any NaN matches any
// NaN (the host's NaN results carry other payloads than the GPU's).
template <class T>
std::string FirstDifference(const std::vector<T>& got, const std::vector<T>& want, bool nan_equal = false) {
  if (got.size() != want.size()) return "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if constexpr (std::is_floating_point_v<T>) {
      if (nan_equal && std::isnan(got[i]) && std::isnan(want[i])) continue;
    }
    return "first difference at [" + std::to_string(i) + "] of " + std::to_string(got.size()) + ": " +
           std::to_string(got[i]) + " vs " + std::to_string(want[i]);
  }
  return "";
}

template <class T>
bool SameBits(T a, T b, bool nan_equal = false) {
  if (std::memcmp(&a, &b, sizeof(T)) == 0) return true;
  if constexpr (std::is_floating_point_v<T>) return nan_equal && std::isnan(a) && std::isnan(b);
  return false;
}

// One widening scan of x (n elements) on the device, the arrays starting in_shift / out_shift
// elements into their buffers; returns the output, sets carry_out. carry: nullopt for none.
template <class In, class Out>
std::vector<Out> RunWiden(const std::vector<In>& x, bool exclusive, std::optional<Out> carry, Out& carry_out,
                          TempBuffer& temp, std::size_t in_shift = 0, std::size_t out_shift = 0) {
  using Op = ops::Sum<Out>;
  const uint64_t n = x.size();
  DeviceBuffer<In> d_in(n + in_shift);
  DeviceBuffer<Out> d_out(n + out_shift), d_carry(2);
  EXPECT_TRUE(d_in.ok() && d_out.ok() && d_carry.ok());
  d_in.Upload(x, in_shift);
  if (carry) d_carry.Upload({*carry});
  const Out* cin = carry ? d_carry.get() : nullptr;
  Out* cout = d_carry.get() + 1;
  std::size_t bytes = 0;
  EXPECT_EQ((kernels::ScanWidening<In, Out, Op>(nullptr, bytes, d_in.get() + in_shift, d_out.get() + out_shift, n,
                                                exclusive, cin, cout, nullptr)),
            cudaSuccess);
  void* tmp = temp.Reserve(bytes);
  EXPECT_NE(tmp, nullptr);
  std::size_t b = temp.bytes();
  EXPECT_EQ((kernels::ScanWidening<In, Out, Op>(tmp, b, d_in.get() + in_shift, d_out.get() + out_shift, n, exclusive,
                                                cin, cout, nullptr)),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(d_out.GuardIntact()) << "wrote past the end";
  if (out_shift > 0) {
    const std::vector<Out> before = d_out.Download(out_shift);
    for (const Out& v : before) {
      unsigned char bytes_before[sizeof(Out)];
      std::memcpy(bytes_before, &v, sizeof(Out));
      for (unsigned char c : bytes_before) EXPECT_EQ(c, 0xFF) << "wrote before the start";
    }
  }
  carry_out = d_carry.DownloadOne(1);
  return d_out.Download(n, out_shift);
}

template <class In, class Out>
std::string Label(uint64_t n, bool exclusive, bool carry, const std::string& more = "") {
  return std::string(Name<In>()) + "->" + Name<Out>() + (exclusive ? " exclusive" : " inclusive") +
         " n=" + std::to_string(n) + (carry ? " with carry" : " no carry") + more;
}

template <class In, class Out>
void CheckIntScan(const std::vector<In>& x, bool exclusive, bool with_carry, std::mt19937_64& rng, TempBuffer& temp,
                  std::size_t in_shift = 0, std::size_t out_shift = 0) {
  const uint64_t n = x.size();
  SCOPED_TRACE((Label<In, Out>(n, exclusive, with_carry,
                               " shift in " + std::to_string(in_shift) + " out " + std::to_string(out_shift))));
  const Out carry = with_carry ? testing::UniformInt<Out>(rng) : Out(0);
  Out want_carry{}, got_carry{};
  const std::vector<Out> want = IntRef<In, Out>(x, 0, n, carry, exclusive, want_carry);
  const std::vector<Out> got = RunWiden<In, Out>(x, exclusive, with_carry ? std::optional<Out>(carry) : std::nullopt,
                                                 got_carry, temp, in_shift, out_shift);
  EXPECT_EQ(FirstDifference(got, want), "");
  EXPECT_EQ(got_carry, want_carry) << "carry out";
}

template <class In, class Out>
using Tuning = kd::WidenScanTuning<kd::kTunedArch, sizeof(In), sizeof(Out)>;

// Around every tile of the policies a call of up to kLargeFrom elements takes (Tiny up to
// kTinyUpTo, then Small): empty, tiny, a warp, one tile, a few, more than 32 (the look-back
// window moves on), the last launch that takes tiles by block index, and kTinyUpTo's either side.
template <class In, class Out>
std::vector<uint64_t> IntEdgeSizes() {
  using B = Tuning<In, Out>;
  const uint64_t x = kd::kIndexedTilesMax;
  std::vector<uint64_t> sizes = {0, 1, 31, 33};
  for (uint64_t t : {uint64_t(B::Tiny::kTile), uint64_t(B::Small::kTile)}) {
    sizes.insert(sizes.end(), {t - 1, t, t + 1, 3 * t + 1, 33 * t - 1, 33 * t, 33 * t + 7, x * t, x * t + 1});
  }
  if (B::kTinyUpTo > 0) sizes.insert(sizes.end(), {B::kTinyUpTo, B::kTinyUpTo + 1});
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

class ScanWidenTest : public GpuTest {};

TEST_F(ScanWidenTest, IntegerPairsEdgeSizes) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  ForEachIntPair([&](auto in, auto out) {
    using In = decltype(in);
    using Out = decltype(out);
    for (uint64_t n : IntEdgeSizes<In, Out>()) {
      const std::vector<In> x = RandomNarrow<In>(n, rng);
      for (bool exclusive : {false, true}) {
        for (bool carry : {false, true}) CheckIntScan<In, Out>(x, exclusive, carry, rng, temp);
      }
    }
  });
}

// Calls of kLargeFrom elements and more take Large's tiles (Wide's on devices of more than
// kWideAboveGBs): one size past it with a partial last tile, each pair.
TEST_F(ScanWidenTest, IntegerPairsLargeTiles) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  auto run = [&](auto in) {
    using In = decltype(in);
    const uint64_t n = Tuning<In, int32_t>::kLargeFrom + 3 * Tuning<In, int32_t>::Large::kTile / 2 + 17;
    const std::vector<In> x = RandomNarrow<In>(n, rng);
    auto pair = [&](auto out) {
      using Out = decltype(out);
      static_assert(Tuning<In, Out>::kLargeFrom == Tuning<In, int32_t>::kLargeFrom);
      CheckIntScan<In, Out>(x, true, true, rng, temp);
      CheckIntScan<In, Out>(x, false, false, rng, temp);
    };
    pair(int32_t{});
    pair(int64_t{});
    pair(uint32_t{});
    pair(uint64_t{});
  };
  run(int8_t{});
  run(uint8_t{});
  run(int16_t{});
  run(uint16_t{});
}

// Arrays one element off 16-byte alignment (input, output, both): the element-by-element path.
TEST_F(ScanWidenTest, UnalignedPointers) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  ForEachIntPair([&](auto in, auto out) {
    using In = decltype(in);
    using Out = decltype(out);
    const uint64_t t = Tuning<In, Out>::Small::kTile;
    for (uint64_t n : {uint64_t(100), 3 * t + 1, 33 * t + 7}) {
      const std::vector<In> x = RandomNarrow<In>(n, rng);
      for (bool exclusive : {false, true}) {
        CheckIntScan<In, Out>(x, exclusive, true, rng, temp, 1, 0);
        CheckIntScan<In, Out>(x, exclusive, false, rng, temp, 0, 1);
        CheckIntScan<In, Out>(x, exclusive, true, rng, temp, 1, 1);
      }
    }
  });
}

// One array as several calls chained through one device carry (in and out the same slot), also
// with every call split over launches of at most 3 tiles (the carry slots of the temp header).
template <class In, class Out>
void CheckIntChunks(const std::vector<uint64_t>& chunks, bool exclusive, std::mt19937_64& rng, TempBuffer& temp) {
  using Op = ops::Sum<Out>;
  uint64_t n = 0;
  for (uint64_t c : chunks) n += c;
  SCOPED_TRACE((Label<In, Out>(n, exclusive, true, ", chunks")));
  const std::vector<In> x = RandomNarrow<In>(n, rng);
  const Out carry = testing::UniformInt<Out>(rng);
  Out want_carry{};
  const std::vector<Out> want = IntRef<In, Out>(x, 0, n, carry, exclusive, want_carry);
  DeviceBuffer<In> d_in(n);
  DeviceBuffer<Out> d_out(n), d_carry(1);
  d_in.Upload(x);
  d_carry.Upload({carry});
  std::size_t bytes = 0;
  CUDA_OK((kernels::ScanWidening<In, Out, Op>(nullptr, bytes, d_in.get(), d_out.get(), n, exclusive, nullptr, nullptr,
                                              nullptr)));
  void* tmp = temp.Reserve(bytes);
  ASSERT_NE(tmp, nullptr);
  uint64_t off = 0;
  for (uint64_t c : chunks) {
    std::size_t b = temp.bytes();
    CUDA_OK((kernels::ScanWidening<In, Out, Op>(tmp, b, d_in.get() + off, d_out.get() + off, c, exclusive,
                                                d_carry.get(), d_carry.get(), nullptr)));
    off += c;
  }
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(FirstDifference(d_out.Download(n), want), "");
  EXPECT_EQ(d_carry.DownloadOne(), want_carry) << "carry out";
  EXPECT_TRUE(d_out.GuardIntact());
}

TEST_F(ScanWidenTest, IntegerChainedChunks) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint32_t cap : {0u, 3u}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    SCOPED_TRACE("launches of at most " + (cap ? std::to_string(cap) : std::string("any")) + " tiles");
    for (bool exclusive : {false, true}) {
      ForEachIntPair([&](auto in, auto out) {
        using In = decltype(in);
        using Out = decltype(out);
        CheckIntChunks<In, Out>({5000, 1, 0, 140000, 3, 33 * uint64_t(Tuning<In, Out>::Small::kTile) + 5}, exclusive,
                                rng, temp);
      });
    }
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
}

// ---------------------------------------------------------------------------------------------
// float16 -> float32

// The device's conversion (the widening scan of one element, no carry: its inclusive value and
// carry out are the element itself) against half::HalfToFloat, and the header's host conversion
// too, for all 65536 patterns, bit for bit (NaN payloads included).
TEST_F(ScanWidenTest, Float16ConversionAllPatterns) {
  using Op = ops::Sum<float>;
  std::vector<Float16> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    all[h].bits = static_cast<uint16_t>(h);
    const float want = half::HalfToFloat(static_cast<uint16_t>(h));
    EXPECT_TRUE(SameBits(kernels::Widen<Float16, float>::Convert(all[h]), want)) << "host, pattern " << h;
  }
  DeviceBuffer<Float16> d_in(all.size());
  DeviceBuffer<float> d_out(all.size()), d_carry(all.size());
  d_in.Upload(all);
  std::size_t bytes = 0;
  CUDA_OK((kernels::ScanWidening<Float16, float, Op>(nullptr, bytes, d_in.get(), d_out.get(), 1, false, nullptr,
                                                     nullptr, nullptr)));
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  ASSERT_NE(tmp, nullptr);
  for (std::size_t i = 0; i < all.size(); ++i) {
    std::size_t b = temp.bytes();
    CUDA_OK((kernels::ScanWidening<Float16, float, Op>(tmp, b, d_in.get() + i, d_out.get() + i, 1, false, nullptr,
                                                       d_carry.get() + i, nullptr)));
  }
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = d_out.Download(all.size()), carries = d_carry.Download(all.size());
  int bad = 0;
  for (uint32_t h = 0; h < 65536 && bad < 10; ++h) {
    const float want = half::HalfToFloat(static_cast<uint16_t>(h));
    if (!SameBits(got[h], want) || !SameBits(carries[h], want)) {
      ++bad;
      ADD_FAILURE() << "device, pattern 0x" << std::hex << h;
    }
  }
}

// The canonical tree's edges: segments of 16, tiles of 4096, the launches that take tiles by
// block index (64), supers of 256 tiles.
std::vector<uint64_t> HalfEdgeSizes() {
  const uint64_t t = 4096, s = 256 * t;
  return {0, 1, 15, 16, 17, 100, t - 1, t, t + 1, t + 16, 3 * t + 1, 33 * t + 7, 64 * t, 64 * t + 1,
          65 * t + 100, s - 1, s, s + 1, s + 3 * t + 17, 2 * s + 5};
}

void CheckHalfScan(const std::vector<Float16>& x, bool exclusive, std::optional<float> carry, TempBuffer& temp,
                   std::size_t in_shift = 0, std::size_t out_shift = 0, bool nan_equal = false) {
  SCOPED_TRACE((Label<Float16, float>(x.size(), exclusive, carry.has_value(),
                                      " shift in " + std::to_string(in_shift) + " out " + std::to_string(out_shift))));
  float want_carry = 0, got_carry = 0;
  const std::vector<float> want = HalfRef(WidenOnHost(x), exclusive, carry, want_carry);
  const std::vector<float> got = RunWiden<Float16, float>(x, exclusive, carry, got_carry, temp, in_shift, out_shift);
  EXPECT_EQ(FirstDifference(got, want, nan_equal), "");
  EXPECT_TRUE(SameBits(got_carry, want_carry, nan_equal)) << "carry out " << got_carry << " vs " << want_carry;
}

TEST_F(ScanWidenTest, Float16EdgeSizes) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint64_t n : HalfEdgeSizes()) {
    const std::vector<Float16> x = RandomHalves(n, rng);
    for (bool exclusive : {false, true}) {
      CheckHalfScan(x, exclusive, std::nullopt, temp);
      CheckHalfScan(x, exclusive, testing::UniformReal<float>(rng, -1000.f, 1000.f), temp);
    }
  }
}

TEST_F(ScanWidenTest, Float16Unaligned) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint64_t n : {uint64_t(100), uint64_t(3 * 4096 + 1), uint64_t(300 * 4096 + 77)}) {
    const std::vector<Float16> x = RandomHalves(n, rng);
    for (bool exclusive : {false, true}) {
      CheckHalfScan(x, exclusive, 5.5f, temp, 1, 0);
      CheckHalfScan(x, exclusive, std::nullopt, temp, 0, 1);
      CheckHalfScan(x, exclusive, -3.25f, temp, 1, 1);
    }
  }
}

// The deterministic float32 scan (CanonicalScan, whole tiles) of the host-widened array, on the
// same temp buffer: the widening scan's bits must be exactly its bits (NaN payloads included),
// on every run; also with launches of a few tiles, few persistent blocks, carries by the walk.
template <class Make>
void CheckAgainstCanonicalFloat32(Make make, std::mt19937_64& rng) {
  using Op = ops::Sum<float>;
  constexpr uint64_t kTile = 4096;
  struct Config {
    uint32_t cap, blocks;
    bool walk;
  };
  for (const auto& [cap, blocks, walk] :
       {Config{0, 0, false}, Config{7, 0, false}, Config{0, 3, false}, Config{0, 3, true}}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    kernels::testing_hooks::SetMaxPersistentBlocks(blocks);
    kernels::testing_hooks::SetCanonicalCarryWalk(walk);
    for (uint64_t tiles : {uint64_t(1), uint64_t(64), uint64_t(65), uint64_t(300), uint64_t(600)}) {
      const std::vector<Float16> x = make(tiles * kTile, rng);
      const std::vector<float> w = WidenOnHost(x);
      const uint64_t n = x.size();
      DeviceBuffer<Float16> d_half(n);
      DeviceBuffer<float> d_wide(n), d_ref(n), d_out(n);
      d_half.Upload(x);
      d_wide.Upload(w);
      kernels::CanonicalState<float>* state = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&state), sizeof(*state)), cudaSuccess);
      std::size_t b1 = 0, b2 = 0;
      CUDA_OK((kernels::CanonicalScan<float, Op>(nullptr, b1, nullptr, nullptr, tiles, 0, false, nullptr, nullptr)));
      CUDA_OK((kernels::ScanWidening<Float16, float, Op>(nullptr, b2, nullptr, nullptr, n, false, nullptr, nullptr,
                                                         nullptr)));
      TempBuffer temp;
      void* tmp = temp.Reserve(std::max(b1, b2));
      ASSERT_NE(tmp, nullptr);
      for (bool exclusive : {false, true}) {
        SCOPED_TRACE(std::string(exclusive ? "exclusive" : "inclusive") + " tiles=" + std::to_string(tiles) +
                     " launches of " + (cap ? std::to_string(cap) : std::string("any")) + " tiles, blocks " +
                     (blocks ? std::to_string(blocks) : std::string("all")) + (walk ? ", carry walk" : ""));
        std::size_t b = temp.bytes();
        CUDA_OK((kernels::CanonicalScan<float, Op>(tmp, b, d_wide.get(), d_ref.get(), tiles, 0, exclusive, state,
                                                   nullptr)));
        const std::vector<float> want = [&] {
          cudaDeviceSynchronize();
          return d_ref.Download(n);
        }();
        for (int run = 0; run < 2; ++run) {
          d_out.Poison();
          b = temp.bytes();
          CUDA_OK((kernels::ScanWidening<Float16, float, Op>(tmp, b, d_half.get(), d_out.get(), n, exclusive, nullptr,
                                                             nullptr, nullptr)));
          CUDA_OK(cudaDeviceSynchronize());
          EXPECT_EQ(FirstDifference(d_out.Download(n), want), "") << "run " << run;
          EXPECT_TRUE(d_out.GuardIntact());
        }
        // And against the host's statement of the tree (NaN payloads aside: the host's differ).
        float unused = 0;
        EXPECT_EQ(FirstDifference(want, HalfRef(w, exclusive, std::nullopt, unused), true), "");
      }
      cudaFree(state);
    }
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
  kernels::testing_hooks::SetMaxPersistentBlocks(0);
  kernels::testing_hooks::SetCanonicalCarryWalk(false);
}

TEST_F(ScanWidenTest, Float16MatchesCanonicalFloat32) {
  GPUSCAN_SEEDED_RNG(rng);
  CheckAgainstCanonicalFloat32([](uint64_t n, std::mt19937_64& r) { return RandomHalves(n, r); }, rng);
}

// Specials: -0 (every 7th element), subnormals (every 5th), the largest finite values; +inf and
// later -inf (their sum NaN) and a NaN with a payload near the end; an array that starts with a
// NaN (an inclusive scan's first element is the converted NaN itself, payload and all) and one of
// subnormals only (sums of subnormals, no flushing).
std::vector<Float16> Specials(uint64_t n, std::mt19937_64& rng) {
  std::vector<Float16> x = RandomHalves(n, rng);
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 7 == 3) x[i].bits = 0x8000;                                                  // -0
    if (i % 5 == 1) x[i].bits = static_cast<uint16_t>((rng() & 0x83ffu) | 1u);           // +-subnormal
    if (i % 97 == 50) x[i].bits = (rng() & 1) ? 0x7bffu : 0xfbffu;                       // +-65504
  }
  if (n >= 64) {
    x[n - 40].bits = 0x7c00;  // +inf
    x[n - 20].bits = 0xfc00;  // -inf: NaN from here
    x[n - 3].bits = 0x7e5a;   // NaN with a payload
  }
  return x;
}

TEST_F(ScanWidenTest, Float16Specials) {
  GPUSCAN_SEEDED_RNG(rng);
  CheckAgainstCanonicalFloat32(Specials, rng);
  TempBuffer temp;
  for (uint64_t n : {uint64_t(1), uint64_t(17), uint64_t(4097), uint64_t(70000), uint64_t(256 * 4096 + 33)}) {
    std::vector<Float16> x = Specials(n, rng);
    for (bool exclusive : {false, true}) CheckHalfScan(x, exclusive, std::nullopt, temp, 0, 0, true);
    x[0].bits = 0xfd37;  // a negative NaN with a payload first
    for (bool exclusive : {false, true}) CheckHalfScan(x, exclusive, std::nullopt, temp, 0, 0, true);
    std::vector<Float16> sub(n);
    for (auto& h : sub) h.bits = static_cast<uint16_t>(rng() & 0x83ffu);  // subnormals and +-0
    for (bool exclusive : {false, true}) CheckHalfScan(sub, exclusive, -0.f, temp);
  }
  // The converted NaN out of an inclusive scan's first element, on the device.
  std::vector<Float16> nan_first = {{0x7d01}};
  float carry_out = 0;
  const std::vector<float> got = RunWiden<Float16, float>(nan_first, false, std::nullopt, carry_out, temp);
  EXPECT_TRUE(SameBits(got[0], half::HalfToFloat(0x7d01)));
}

// Chunks chained through the device carry. Chunks of whole supers (2^20 elements) give exactly
// the bits of one call; any others, each chunk's own tree from the carry (HalfRef per chunk).
TEST_F(ScanWidenTest, Float16ChainedChunks) {
  using Op = ops::Sum<float>;
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  const uint64_t s = 1u << 20;
  for (const std::vector<uint64_t>& chunks :
       {std::vector<uint64_t>{s, 2 * s, s}, std::vector<uint64_t>{s, 0, s + 4096 * 3 + 5},
        std::vector<uint64_t>{5000, 1, 0, 140000, 3, 300 * 4096 + 17}}) {
    for (uint32_t cap : {0u, 7u}) {
      kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
      for (bool exclusive : {false, true}) {
        uint64_t n = 0;
        bool supers = true;
        for (uint64_t c : chunks) {
          n += c;
          supers = supers && c % s == 0;
        }
        std::string what = std::string(exclusive ? "exclusive" : "inclusive") + ", cap " + std::to_string(cap) +
                           ", chunks";
        for (uint64_t c : chunks) what += " " + std::to_string(c);
        SCOPED_TRACE(what);
        const std::vector<Float16> x = RandomHalves(n, rng);
        const std::vector<float> w = WidenOnHost(x);
        // The expected output, chunk by chunk from the carry before it.
        std::vector<float> want;
        std::optional<float> carry;
        uint64_t off = 0;
        for (uint64_t c : chunks) {
          float next = 0;
          const std::vector<float> part =
              HalfRef(std::vector<float>(w.begin() + off, w.begin() + off + c), exclusive, carry, next);
          want.insert(want.end(), part.begin(), part.end());
          carry = next;
          off += c;
        }
        if (supers) {
          EXPECT_EQ(FirstDifference(want, testing::CanonicalScanRef<float, Op>(w, exclusive)), "")
              << "chunks of whole supers: one call's bits";
        }
        DeviceBuffer<Float16> d_in(n);
        DeviceBuffer<float> d_out(n), d_carry(1);
        d_in.Upload(x);
        std::size_t bytes = 0;
        CUDA_OK((kernels::ScanWidening<Float16, float, Op>(nullptr, bytes, d_in.get(), d_out.get(), n, exclusive,
                                                           nullptr, nullptr, nullptr)));
        void* tmp = temp.Reserve(bytes);
        ASSERT_NE(tmp, nullptr);
        off = 0;
        bool first = true;
        for (uint64_t c : chunks) {
          std::size_t b = temp.bytes();
          CUDA_OK((kernels::ScanWidening<Float16, float, Op>(tmp, b, d_in.get() + off, d_out.get() + off, c,
                                                             exclusive, first ? nullptr : d_carry.get(),
                                                             d_carry.get(), nullptr)));
          first = false;
          off += c;
        }
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(FirstDifference(d_out.Download(n), want), "");
        EXPECT_TRUE(SameBits(d_carry.DownloadOne(), *carry)) << "carry out";
      }
    }
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
}

// Past 2^31 elements (the 64-bit indexing and a call past any 32-bit count): int8 -> int64
// exclusive SUM of 2^31 + 4097 elements (2 GiB in, 16 GiB out), checked at every element
// against a host int64 reference, in pieces copied back.
TEST_F(ScanWidenTest, Int8ToInt64Beyond2To31) {
  using Op = ops::Sum<int64_t>;
  const uint64_t n = (uint64_t(1) << 31) + 4097;
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < (std::size_t(24) << 30)) {
    GTEST_SKIP() << "needs 24 GiB of free device memory (2 GiB in, 16 GiB out), " << (free_bytes >> 20)
                 << " MiB free";
  }
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<int8_t> x = RandomNarrow<int8_t>(n, rng);
  DeviceBuffer<int8_t> d_in(n);
  DeviceBuffer<int64_t> d_out(n), d_carry(2);
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_carry.ok());
  d_in.Upload(x);
  const int64_t carry = -123456789012345;
  d_carry.Upload({carry});
  std::size_t bytes = 0;
  CUDA_OK((kernels::ScanWidening<int8_t, int64_t, Op>(nullptr, bytes, d_in.get(), d_out.get(), n, true, nullptr,
                                                      nullptr, nullptr)));
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  ASSERT_NE(tmp, nullptr);
  std::size_t b = temp.bytes();
  CUDA_OK((kernels::ScanWidening<int8_t, int64_t, Op>(tmp, b, d_in.get(), d_out.get(), n, true, d_carry.get(),
                                                      d_carry.get() + 1, nullptr)));
  CUDA_OK(cudaDeviceSynchronize());
  const uint64_t piece = uint64_t(1) << 26;
  int64_t run = carry;
  uint64_t bad = 0, first_bad = n;
  for (uint64_t off = 0; off < n; off += piece) {
    const uint64_t m = std::min(piece, n - off);
    const std::vector<int64_t> got = d_out.Download(m, off);
    for (uint64_t i = 0; i < m; ++i) {
      if (got[i] != run) {
        if (bad++ == 0) first_bad = off + i;
      }
      run += x[off + i];
    }
  }
  EXPECT_EQ(bad, 0u) << "first wrong element at " << first_bad;
  EXPECT_EQ(d_carry.DownloadOne(1), run) << "carry out";
  EXPECT_TRUE(d_out.GuardIntact());
}

}  // namespace
}  // namespace gpuscan::gputest
