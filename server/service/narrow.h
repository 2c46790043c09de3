// Narrow inputs (issue 47): arrays of INT8, UINT8, INT16, UINT16 or FLOAT16. Scan, Reduce,
// SegmentedScan and ReduceByKey accumulate them in a wider output dtype (numpy's dtype=);
// Compact, Sort and Histogram take them as they are. Chunks arrive narrow; the call widens each
// one on the host into the engine's dtype (the output's, float32 for a FLOAT16 output; for the
// others the carrier, Carrier()) and the engines run unchanged. A FLOAT16 output is rounded once
// per element on the way out; kept or sorted values go back narrow, exactly. The wire carries
// 1-2 bytes an element, which is what the caller came for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/types.h"
#include "gpuscan/kernels/half.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/payload.h"

namespace gpuscan::server {

struct NarrowInput {
  v1::DType wire = v1::DTYPE_UNSPECIFIED;  // the input's dtype
  size_t size = 0;                          // its element size
  bool half_out = false;                    // results leave as FLOAT16 (the engine runs float32)
};

bool IsNarrow(int wire);          // INT8, UINT8, INT16, UINT16, FLOAT16
size_t NarrowSize(v1::DType wire);  // 1 or 2
const char* NarrowName(v1::DType wire);  // "int8" ... "float16", as engine::Name spells the others

// n elements of `in` (raw little-endian, any alignment) converted into `engine` elements at out:
// integers as C casts them (two's complement wrap into unsigned), FLOAT16 exactly.
void Widen(const NarrowInput& in, engine::DType engine, const void* src, void* out, uint64_t n);

// Bytes an element of a call's input on the wire: the narrow dtype's where set, else the engine's.
inline size_t WireSize(const std::optional<NarrowInput>& narrow, engine::DType engine) {
  return narrow ? narrow->size : engine::SizeOf(engine);
}

// The n elements at src as the engine's dtype: src itself, or for a narrow input the elements
// widened into a payload of `pool` that *held keeps until the caller is done with them. (Inline:
// the request fuzzer links narrow.cc without the payload pool.)
inline const void* EngineElements(const std::optional<NarrowInput>& narrow, engine::DType engine, const void* src,
                                  uint64_t n, PayloadPool& pool, Payload* held) {
  if (!narrow) return src;
  *held = pool.Take(n * engine::SizeOf(engine));
  Widen(*narrow, engine, src, held->data(), n);
  return held->data();
}

// For logs: "int8->int64" for a narrow input accumulated in the engine's dtype ("float16->float16"
// for a FLOAT16 output), else the engine dtype's name.
std::string AccumulatedName(const std::optional<NarrowInput>& narrow, engine::DType engine);

// The engine dtype that holds every value of a narrow dtype exactly, in the same order:
// int32 for INT8/INT16, uint32 for UINT8/UINT16, float32 for FLOAT16.
engine::DType Carrier(v1::DType wire);

// Widen's inverse for values that came from the narrow dtype (a carrier's kept or sorted ones):
// n `engine` elements at src back into `in.wire` elements at out, exactly.
void NarrowBack(const NarrowInput& in, engine::DType engine, const void* src, void* out, uint64_t n);

// n float32 values rounded to FLOAT16 (round to nearest even; NaN stays NaN, overflow gives inf).
void RoundToHalf(const void* src, void* out, uint64_t n);

using half::FloatToHalf;  // gpuscan/kernels/half.h
using half::HalfToFloat;

}  // namespace gpuscan::server
