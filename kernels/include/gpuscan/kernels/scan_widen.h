// Widening scans (issue 47, "narrow inputs, wide results"): read a narrow array and write its
// scan in a wider dtype in one pass, as numpy's np.cumsum(x, dtype=...) accumulates. Plain CUDA:
// no gRPC, protobuf or logging here.
//
// The agents are the plain scan's (src/detail/): the look-back scan's bulk kernel for integers
// (agent_single_pass_bulk.cuh) and the canonical tree's one pass for float16 -> float32
// (agent_canonical.cuh), each with a converting load; tuning in src/detail/tuning.cuh.
//
// Instantiated for Op = ops::Sum<Out> and
//   In in {int8_t, uint8_t, int16_t, uint16_t} x Out in {int32_t, int64_t, uint32_t, uint64_t}
//   In = Float16, Out = float.
// Any other combination fails to link.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// An IEEE 754 binary16 (float16) element as its raw bits. A distinct type, not uint16_t: a
// uint16_t input is the integer dtype. Host code may pass a buffer of uint16_t bit patterns as
// `reinterpret_cast<const Float16*>(p)` (same size and alignment).
struct Float16 {
  uint16_t bits;
};
static_assert(sizeof(Float16) == 2 && alignof(Float16) == 2, "Float16 is two bytes");

// float16 bits -> float32, exactly, by integer operations (and one exact float subtraction for
// subnormals): bit for bit gpuscan::half::HalfToFloat (half.h), NaN payloads included.
GPUSCAN_HD float HalfBitsToFloat(uint32_t h) {
  const uint32_t magnitude = (h & 0x7fffu) << 13;  // exponent and mantissa, float-aligned
  const uint32_t exp = magnitude & 0x0f800000u;
  uint32_t bits = magnitude + (112u << 23);  // rebias 15 -> 127
  if (exp == 0x0f800000u) {
    bits += (128u - 16u) << 23;  // inf / NaN: exponent all ones (0x8f + 0x70 = 0xff)
  } else if (exp == 0) {
    // zero or subnormal: m * 2^-24 = (2^-14 * (1 + m / 1024)) - 2^-14, exact in float
    bits += 1u << 23;
    float f, two_m14;
    const uint32_t k = 113u << 23;
    std::memcpy(&f, &bits, 4);
    std::memcpy(&two_m14, &k, 4);
    f -= two_m14;
    std::memcpy(&bits, &f, 4);
  }
  bits |= (h & 0x8000u) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// How an In element becomes an Out (host and device, the same bits on both):
//   integers as C casts them: sign extension from a signed In, zero extension from an unsigned
//   one, modulo 2^bits into an unsigned Out (an int8 -1 becomes uint64 2^64 - 1);
//   Float16 -> float exactly, bit for bit as gpuscan::half::HalfToFloat (half.h): subnormals
//   normalised, +-0 and +-inf kept, a NaN's sign and payload kept (shifted into the top of the
//   float mantissa). On the device by the hardware's conversion (cvt.f32.f16, exact but for NaN
//   payloads, which it drops for 0x7fffffff), a NaN's bits then put back as the host has them;
//   on the host by HalfBitsToFloat. (On the device the integer conversion ran 3-6 points of a
//   copy's speed slower: tuning.cuh, CanonicalWidenTuning.)
template <class In, class Out>
struct Widen {
  GPUSCAN_HD static Out Convert(In x) { return static_cast<Out>(x); }
};
template <>
struct Widen<Float16, float> {
  GPUSCAN_HD static float Convert(Float16 x) {
#if defined(__CUDA_ARCH__)
    const uint32_t h = x.bits;
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    if ((h & 0x7fffu) > 0x7c00u) {  // NaN: sign, all-ones exponent, the payload on top
      const uint32_t bits = ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13);
      std::memcpy(&f, &bits, 4);
    }
    return f;
#else
    return HalfBitsToFloat(x.bits);
#endif
  }
};

// Scans n elements of d_in into d_out, each converted by Widen<In, Out> before it is combined:
//   inclusive: out[i] = carry op w(x[0]) op ... op w(x[i])
//   exclusive: out[i] = carry op w(x[0]) op ... op w(x[i-1])   (out[0] = carry)
// carry is *d_carry_in, or Op::identity() when d_carry_in is nullptr: the combined value of
// everything before this chunk, so that one long array can be scanned as many calls with the
// carry staying on the device. d_carry_out (nullable; may alias d_carry_in) receives the carry
// for the next chunk (carry itself when n == 0). d_in and d_out must not overlap (their element
// sizes differ). Any element alignment works; 16-byte aligned arrays take the fast path.
//
// Integers (decoupled look-back): exact; carry_out = carry op w(x[0]) op ... op w(x[n-1]),
// wrapping as Out does.
//
// Float16 -> float32 SUM: reproducible bit for bit, run to run and GPU to GPU. The association
// is the canonical tree of gpuscan/kernels/canonical_tree.h over the call's own element
// positions (tiles of 4096 from d_in), with the carry as the tree's initial carry C_0 (none
// without d_carry_in). Without a carry the result is exactly the deterministic float32 scan
// (CanonicalScan, canonical_tree.h) of the widened array. carry_out is what the tree's exclusive
// scan would give element n were the array longer (for n a multiple of 2^20, one "super", that is
// the tree's carry C after the call), so chunks whose lengths are multiples of 2^20 chain through
// the carry to exactly the bits of one call over the whole array; other chunk lengths give their
// own (still reproducible) association.
//
// Temp storage follows temp_storage.h: ask with d_temp == nullptr (the size serves every call
// of up to n elements), clear once, reuse in stream order with any other gpuscan::kernels call.
// Returns the first CUDA error met (cudaErrorInvalidValue for bad arguments or a temp buffer
// smaller than the size query said). Asynchronous on `stream`.
template <class In, class Out, class Op>
cudaError_t ScanWidening(void* d_temp, std::size_t& temp_bytes, const In* d_in, Out* d_out, uint64_t n,
                         bool exclusive, const Out* d_carry_in, Out* d_carry_out, cudaStream_t stream);

}  // namespace gpuscan::kernels
