// What the request fuzzer's resident calls share (request_fuzz_resident.cc defines them;
// request_fuzz_resident_ops.cc, the operations of several inputs, uses them too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_calls.h"
#include "service/resident_store.h"

namespace gpuscan::fuzz {

// The caller: a server context of no call (no metadata, no TLS peer): the default tenant.
const grpc::ServerContextBase& NoCall();
// TTLs below a minute raised by a minute: the sweeper's clock is no part of the input.
uint64_t PinTtl(uint64_t ttl_ms);
// A rejected resident call: the codes the resident checks give, and a message naming a field.
void CheckResidentRejected(const grpc::Status& s);
// An array put straight into the store (no call): `bytes` cut to whole elements of dtype and to
// the budget; nullopt where the store refuses it.
std::optional<v1::ArrayInfo> PutDirect(server::ResidentStore& store, int dtype, std::string* bytes);
// A dtype every array may have (narrow ones too), from one byte.
int AnyDType(uint8_t b);

// Compact, Histogram, Scan2D, SegmentedScan, ReduceByKey and Sort (rpc 2..7, request_fuzz_target.h's
// order) with header.resident: request_fuzz_resident_ops.cc.
Result FuzzResidentInputs(int rpc, server::ResidentStore& store, const std::vector<Request>& requests,
                          uint64_t chunk_bytes);

// Pipeline (request_fuzz_pipeline.cc): the call as its handler runs it, stages and all (kind 12 of
// FuzzResidentCall, request_fuzz_target.h's 20), and its header's plan alone (13; 21).
Result FuzzPipeline(server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes);
Result FuzzPipelinePlan(const std::vector<Request>& requests);

}  // namespace gpuscan::fuzz
