// A lane's own view of its striped array: what its header says (LaneSpec, checked alone by
// CheckLanes), the per-request checks that need no other lane (CheckLaneChunk), and the small
// texts the join and the registry share (ArrayIdText, FirstDifference, EndedStatus).
// lane_join.h joins the lanes; lane_registry.h finds an array's join by id.
#pragma once

#include <cstdint>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "service/server.h"
#include "service/wire.h"

namespace gpuscan::server {

// What a lane's header says about its array, once checked alone (CheckLanes).
struct LaneSpec {
  std::string array_id;      // 16 bytes
  uint32_t lane = 0;
  uint32_t lane_count = 1;
  uint64_t chunk_elements = 1;
  size_t element_size = 4;
  bool flags = false;        // Compact with use_flags: each request carries its chunk's flags
};

// The lanes header of one call, alone: id length, lane < lane_count <= --max-lanes, a chunk size
// within the chunk limit. INVALID_ARGUMENT naming the field and value.
grpc::Status CheckLanes(const v1::Lanes& lanes, size_t element_size, const ServerOptions& options, LaneSpec* spec);
// The id as 32 hex digits, for messages and logs.
std::string ArrayIdText(const std::string& id);
// The first field where two headers of one array differ, ignoring lanes.lane:
// "header.dtype (DTYPE_INT64 here, DTYPE_INT32 on lane 0)"; empty when they agree.
std::string FirstDifference(const google::protobuf::Message& here, const google::protobuf::Message& first,
                            uint32_t first_lane);

// The status of a lane whose array already ended (`how`: OK, or the array's failure).
grpc::Status EndedStatus(const std::string& id, const grpc::Status& how);

// Elements of one lane request (values for Compact).
inline uint64_t RequestElements(const ScanChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestElements(const ReduceChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestElements(const CompactChunk& r, size_t esize) { return r.values.size() / esize; }
inline uint64_t RequestBytes(const ScanChunk& r) { return r.data.size(); }
inline uint64_t RequestBytes(const ReduceChunk& r) { return r.data.size(); }
inline uint64_t RequestBytes(const CompactChunk& r) { return r.values.size() + r.flags.size(); }
inline uint64_t RequestFlags(const ScanChunk&) { return 0; }
inline uint64_t RequestFlags(const ReduceChunk&) { return 0; }
inline uint64_t RequestFlags(const CompactChunk& r) { return r.flags.size(); }
// Histogram has no lanes (yet): these only let StreamingCall's lane paths compile for it.
inline uint64_t RequestElements(const HistogramChunk& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestBytes(const HistogramChunk& r) { return r.data.size(); }
inline uint64_t RequestFlags(const HistogramChunk&) { return 0; }
// Nor have SegmentedScan, ReduceByKey, Sort and Scan2D.
inline uint64_t RequestElements(const v1::Scan2DRequest& r, size_t esize) { return r.data().size() / esize; }
inline uint64_t RequestBytes(const v1::Scan2DRequest& r) { return r.data().size(); }
inline uint64_t RequestFlags(const v1::Scan2DRequest&) { return 0; }
template <class Msg>
uint64_t RequestElements(const KeyedChunk<Msg>& r, size_t esize) { return r.data.size() / esize; }
template <class Msg>
uint64_t RequestBytes(const KeyedChunk<Msg>& r) { return r.data.size() + r.keys.size(); }
template <class Msg>
uint64_t RequestFlags(const KeyedChunk<Msg>&) { return 0; }
inline uint64_t RequestElements(const v1::SortRequest& r, size_t esize) { return r.keys().size() / esize; }
inline uint64_t RequestBytes(const v1::SortRequest& r) { return r.keys().size() + r.values().size(); }
inline uint64_t RequestFlags(const v1::SortRequest&) { return 0; }
// PutArray has no lanes either.
inline uint64_t RequestElements(const RawChunk<v1::PutArrayRequest>& r, size_t esize) { return r.data.size() / esize; }
inline uint64_t RequestBytes(const RawChunk<v1::PutArrayRequest>& r) { return r.data.size(); }
inline uint64_t RequestFlags(const RawChunk<v1::PutArrayRequest>&) { return 0; }
// Nor has Pipeline.
inline uint64_t RequestElements(const v1::PipelineRequest& r, size_t esize) { return r.data().size() / esize; }
inline uint64_t RequestBytes(const v1::PipelineRequest& r) { return r.data().size(); }
inline uint64_t RequestFlags(const v1::PipelineRequest&) { return 0; }

// The checks of one lane request that need no other lane (gRPC thread, after the RPC's own
// CheckRequest): one chunk per request, full except the lane's last; with flags, the chunk's
// flags in the same request. *short_seen remembers a short chunk on this lane.
template <class Req>
grpc::Status CheckLaneChunk(const Req& req, uint64_t index, const LaneSpec& spec, bool* short_seen) {
  const uint64_t n = RequestElements(req, spec.element_size);
  const std::string where = "request #" + std::to_string(index) + " of lanes.lane=" + std::to_string(spec.lane);
  if (spec.flags && RequestFlags(req) != n) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            where + ": flags length " + std::to_string(RequestFlags(req)) + " differs from its " + std::to_string(n) +
                " values: with lanes each request carries one chunk's values and its flags"};
  }
  if (n == 0) return grpc::Status::OK;  // no chunk (a header sent alone)
  if (*short_seen) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            where + ": a chunk after this lane's short chunk; only the array's last chunk may be shorter than "
                    "lanes.chunk_elements=" + std::to_string(spec.chunk_elements)};
  }
  if (n > spec.chunk_elements) {
    return {grpc::StatusCode::INVALID_ARGUMENT, where + ": " + std::to_string(n) +
                                                    " elements is more than lanes.chunk_elements=" +
                                                    std::to_string(spec.chunk_elements) + " (one chunk per request)"};
  }
  if (n < spec.chunk_elements) *short_seen = true;
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
