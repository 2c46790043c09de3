// Narrow resident arrays (INT8, UINT8, INT16, UINT16, FLOAT16) on a device path: Compact and
// Sort calls and every pipeline stage. The array is widened into memory of the engine's dtype
// (the carrier, or a Scan's output dtype: what a streamed call widens each chunk into), the path
// runs on that, and the results that leave narrow are narrowed back (exactly; a FLOAT16 output
// rounded once), a chunk at a time through the host. Widening is exact and the paths give the
// streamed call's bits whatever the chunking, so the results are the streamed call's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "service/narrow.h"
#include "service/resident_store.h"

namespace gpuscan::server {

// `count` narrow elements of `src` widened into new memory of `count` `engine` elements beside
// src (ResidentStore::Allocate: counted against the budget and the tenant's quota while it lives;
// RESOURCE_EXHAUSTED when it does not fit), converted chunk_bytes of input at a time.
grpc::Status WidenResident(ResidentStore& store, const std::string& tenant, const engine::ResidentMemory& src,
                           const NarrowInput& narrow, engine::DType engine, uint64_t count, uint64_t chunk_bytes,
                           std::shared_ptr<engine::ResidentMemory>* out);

// `engine` elements [first, first + n) of src into n narrow ones at out: NarrowBack, or
// RoundToHalf for a FLOAT16 output (narrow.half_out).
void ReadNarrowed(const engine::ResidentMemory& src, const NarrowInput& narrow, engine::DType engine, uint64_t first,
                  uint64_t n, void* out);

// The first `count` `engine` elements of src narrowed (as ReadNarrowed) into dst from its start,
// a chunk of chunk_bytes of the wide elements at a time.
void NarrowInto(const engine::ResidentMemory& src, const NarrowInput& narrow, engine::DType engine, uint64_t count,
                engine::ResidentMemory& dst, uint64_t chunk_bytes);

}  // namespace gpuscan::server
