// Tile states of the single-pass kernels (scan and compaction): one 16-byte word per tile,
// {status, value bits}, written and polled whole with 128-bit relaxed accesses (as CUB does for
// 8-byte values), so a reader never sees a status without its value.
//
// status = epoch << 2 | flag (TileCodec: one more bit for some types). A word counts only
// when its epoch is the current launch's: words
// left by earlier launches read as "not yet", so no launch has to clear the array first. The
// epoch is 42 bits (it comes with the tile ticket, TempHeader::epoch_ticket), so it would take
// 2^42 launches on one buffer before an old word could be mistaken for a new one.
#pragma once

#include "tuning.cuh"
#include "warp.cuh"

namespace gpuscan::kernels::detail {

struct alignas(16) TileWord {
  unsigned long long status;
  unsigned long long bits;
};

enum : unsigned { kFlagInvalid = 0, kFlagPartial = 1, kFlagInclusive = 2 };

__device__ __forceinline__ void StoreTileWord(TileWord* p, unsigned long long status,
                                              unsigned long long bits) {
  asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(status), "l"(bits)
               : "memory");
}

__device__ __forceinline__ void LoadTileWord(const TileWord* p, unsigned long long& status,
                                             unsigned long long& bits) {
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(status), "=l"(bits)
               : "l"(p)
               : "memory");
}

template <class T>
__device__ __forceinline__ unsigned long long ToBits(T v) {
  if constexpr (sizeof(T) == 4) {
    return BitCast<unsigned int>(v);
  } else {
    return BitCast<unsigned long long>(v);
  }
}

template <class T>
__device__ __forceinline__ T FromBits(unsigned long long b) {
  if constexpr (sizeof(T) == 4) {
    return BitCast<T>(static_cast<unsigned int>(b));
  } else {
    return BitCast<T>(b);
  }
}

// How a tile's value travels in its word: a value of up to 8 bytes in `bits`, and the status
// epoch << kShift | flag. A type with one bit more (a segmented pair of 8-byte values: its
// head) specialises this with kShift = 3 and the bit at status bit 2 (segmented_impl.cuh).
template <class T>
struct TileCodec {
  static constexpr int kShift = 2;
  __device__ __forceinline__ static unsigned long long Bits(T v) { return ToBits(v); }
  __device__ __forceinline__ static unsigned long long Extra(T) { return 0; }
  __device__ __forceinline__ static T Decode(unsigned long long bits, unsigned long long /*status*/) {
    return FromBits<T>(bits);
  }
};

template <class T>
__device__ __forceinline__ void PublishTile(TileWord* tiles, uint32_t tile, unsigned long long epoch,
                                            unsigned flag, T value) {
  using Codec = TileCodec<T>;
  StoreTileWord(tiles + tile, (epoch << Codec::kShift) | Codec::Extra(value) | flag, Codec::Bits(value));
}

// Drawn by thread 0: this block's tile index and the launch's epoch. The block that draws the
// last ticket starts the next epoch (nothing else touches the word in this launch after it).
__device__ __forceinline__ void DrawTicket(TempHeader* header, uint32_t num_tiles, uint32_t& tile,
                                           unsigned long long& epoch) {
  const unsigned long long old = atomicAdd(&header->epoch_ticket, 1ull);
  tile = static_cast<uint32_t>(old & kTicketMask);
  epoch = old >> kTicketBits;
  if (tile == num_tiles - 1) {
    atomicExch(&header->epoch_ticket, ((epoch + 1) & kEpochMask) << kTicketBits);
  }
}

// Asks L2 to fetch `bytes` at p ahead of their loads (sm_90 bulk prefetch; a hint, no effect on
// results). bytes must be a multiple of 16; an address that is not 16-byte aligned, and GPUs
// before sm_90, skip it.
__device__ __forceinline__ void PrefetchL2(const void* p, uint32_t bytes) {
#if __CUDA_ARCH__ >= 900
  if (Aligned16(p)) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Run by thread 0 before it draws the ticket: in launches of kPrefetchMinTiles tiles or more
// (tuning.cuh), prefetch(first element) for tile blockIdx.x when it is full. Tickets come about
// in launch order, so that is likely this block's tile, and its DRAM latency overlaps the
// ticket's atomic.
template <int kTile, class Prefetch>
__device__ __forceinline__ void PrefetchLikelyTile(uint32_t num_tiles, uint64_t n, Prefetch prefetch) {
  if (num_tiles < kPrefetchMinTiles) return;
  const uint64_t first = uint64_t(blockIdx.x) * kTile;
  if (n - first >= uint64_t(kTile)) prefetch(first);
}

// Decoupled look-back, run by one whole warp for tile > 0: returns the combination of every
// element before this tile. Lane l watches tile - 1 - l; the warp waits until all 32 have a
// state, then combines from the nearest tile back to the first inclusive one it saw; if none was
// inclusive it moves 32 tiles further back. Tile 0 always publishes an inclusive state, so the
// walk never goes past it.
//
// Polling delays (as CUB's fixed_delay_constructor_t): with many tiles in flight, a warp first
// sleeps kFirstDelayNs (its predecessors are still publishing) and then kPollDelayNs between
// polls, so hundreds of polling warps do not crowd the L2 that the data streams through. With a
// small grid (fewer than the policy's kDelayMinTiles tiles, tuning.cuh) it polls at once: there
// latency is all that matters. The caller passes big_grid. The delays come as template
// constants (LookBack) or, where they are chosen per device at launch, as an argument
// (LookBackWith, LookBackDelays: compaction, tuning.cuh).

template <class T, class Op>
__device__ __forceinline__ T LookBackWith(const TileWord* tiles, uint32_t tile, unsigned long long epoch,
                                          bool big_grid, LookBackDelays delays) {
  const Op op;
  const int lane = LaneId();
  long long pred = static_cast<long long>(tile) - 1 - lane;
  T exclusive{};
  bool have = false;
  if (delays.first_ns > 0 && big_grid) __nanosleep(delays.first_ns);
  while (true) {
    unsigned flag;
    T value;
    int spins = 0;
    while (true) {
      if (pred >= 0) {
        unsigned long long status, bits;
        LoadTileWord(tiles + pred, status, bits);
        flag = (status >> TileCodec<T>::kShift) == epoch ? unsigned(status & 3u) : kFlagInvalid;
        value = TileCodec<T>::Decode(bits, status);
      } else {
        flag = kFlagInclusive;  // never combined: tile 0 is inclusive
        value = Op::identity();
      }
      if (__all_sync(kFullMask, flag != kFlagInvalid)) break;
      if (delays.poll_ns > 0 && big_grid) {
        __nanosleep(delays.poll_ns);
      } else if (++spins > 4) {
        __nanosleep(32);
      }
    }
    const unsigned inclusive = __ballot_sync(kFullMask, flag == kFlagInclusive);
    const int last = inclusive != 0 ? __ffs(inclusive) - 1 : kWarpThreads - 1;
    // Lanes 0..last in reverse lane order = ascending tile order.
    T v = lane <= last ? value : Op::identity();
#pragma unroll
    for (int d = 1; d < kWarpThreads; d <<= 1) {
      const T y = ShflDown(v, d);
      if (lane + d < kWarpThreads) v = op(y, v);
    }
    const T window = ShflIdx(v, 0);
    exclusive = have ? op(window, exclusive) : window;
    have = true;
    if (inclusive != 0) return exclusive;
    pred -= kWarpThreads;
  }
}

template <class T, class Op, int kFirstDelayNs = 0, int kPollDelayNs = 0>
__device__ __forceinline__ T LookBack(const TileWord* tiles, uint32_t tile, unsigned long long epoch,
                                      bool big_grid = false) {
  return LookBackWith<T, Op>(tiles, tile, epoch, big_grid, LookBackDelays{kFirstDelayNs, kPollDelayNs});
}

// Whether a word read in this launch (epoch) holds an inclusive value.
template <class T>
__device__ __forceinline__ bool IsInclusive(unsigned long long status, unsigned long long epoch) {
  return (status >> TileCodec<T>::kShift) == epoch && (status & 3u) == kFlagInclusive;
}

// Chained: one thread waits for its predecessor's inclusive prefix.
template <class T>
__device__ __forceinline__ T WaitInclusive(const TileWord* tiles, uint32_t pred, unsigned long long epoch) {
  using Codec = TileCodec<T>;
  unsigned long long status, bits;
  int spins = 0;
  while (true) {
    LoadTileWord(tiles + pred, status, bits);
    if (IsInclusive<T>(status, epoch)) return Codec::Decode(bits, status);
    if (++spins > 4) __nanosleep(32);
  }
}

// WaitInclusive for two words at once (either may be null: nothing to wait for), each load
// issued before either is checked, so neither waits behind the other. Fills a and b.
template <class T>
__device__ __forceinline__ void WaitInclusivePair(const TileWord* pa, T& a, const TileWord* pb, T& b,
                                                  unsigned long long epoch) {
  using Codec = TileCodec<T>;
  for (int spins = 0; pa != nullptr || pb != nullptr; ++spins) {
    unsigned long long a_st = 0, a_bits = 0, b_st = 0, b_bits = 0;
    if (pa != nullptr) LoadTileWord(pa, a_st, a_bits);
    if (pb != nullptr) LoadTileWord(pb, b_st, b_bits);
    if (pa != nullptr && IsInclusive<T>(a_st, epoch)) {
      a = Codec::Decode(a_bits, a_st);
      pa = nullptr;
    }
    if (pb != nullptr && IsInclusive<T>(b_st, epoch)) {
      b = Codec::Decode(b_bits, b_st);
      pb = nullptr;
    }
    if (spins > 4 && (pa != nullptr || pb != nullptr)) __nanosleep(32);
  }
}

}  // namespace gpuscan::kernels::detail
