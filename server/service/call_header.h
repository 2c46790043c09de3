// What the call machinery reads from an RPC's header, whatever the RPC: which optional fields
// it has, the element count it declares, what the call may buffer (its admission reservation)
// and, for a lane of a striped array, the lane's spec.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include <grpcpp/support/status.h>

#include "engine/types.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/lane_spec.h"
#include "service/server.h"
#include "service/validate.h"

namespace gpuscan::server {

// Whether a call's header has the lanes / shared_memory fields (Histogram's has neither yet).
template <class H, class = void>
struct HasLanes : std::false_type {};
template <class H>
struct HasLanes<H, std::void_t<decltype(std::declval<const H&>().has_lanes())>> : std::true_type {};
template <class H, class = void>
struct HasSharedMemory : std::false_type {};
template <class H>
struct HasSharedMemory<H, std::void_t<decltype(std::declval<const H&>().has_shared_memory())>> : std::true_type {};

template <class H, class = void>
struct HasElementCount : std::false_type {};
template <class H>
struct HasElementCount<H, std::void_t<decltype(std::declval<const H&>().has_element_count())>> : std::true_type {};

// The element count a header declares, if it does (checked against what arrives).
template <class H>
std::optional<uint64_t> DeclaredCount(const H& header) {
  if (!header.has_element_count()) return std::nullopt;
  return header.element_count();
}

// What a call may buffer at once, reserved from admission's byte budget: `cap` (at most
// kMaxBuffered messages waiting plus the one being read and the one being processed), or, when
// the header declares the element count, the whole array three times over (a compaction may
// answer values and int64 indices), whichever is less.
template <class Header>
uint64_t ReservationBytes(const Header& header, uint64_t cap) {
  if constexpr (HasSharedMemory<Header>::value) {
    if (header.has_shared_memory()) return 4096;  // the array stays in the client's region
  }
  if constexpr (!HasElementCount<Header>::value) {
    return cap;
  } else {
    engine::DType dtype;
    if (!header.has_element_count() || !ToEngineDType(header.dtype(), &dtype).ok()) return cap;
    if (header.element_count() > cap) return cap;  // also keeps the product below from overflowing
    return std::min(cap, 3 * header.element_count() * engine::SizeOf(dtype) + 4096);
  }
}

// The lanes field of one lane's header, and what cannot go with it: its LaneSpec.
template <class Header>
grpc::Status CheckLaneHeader(const Header& header, const ServerOptions& options, LaneSpec* spec) {
  if (header.has_shared_memory()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "header.shared_memory: cannot be combined with header.lanes (one call reads the whole region)"};
  }
  if (header.has_device_memory()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "header.device_memory: cannot be combined with header.lanes (one call reads the whole array)"};
  }
  engine::DType dtype;
  if (auto s = ToEngineDType(header.dtype(), &dtype); !s.ok()) return s;
  if (auto s = CheckLanes(header.lanes(), engine::SizeOf(dtype), options, spec); !s.ok()) return s;
  if constexpr (std::is_same_v<Header, v1::CompactHeader>) {
    spec->flags = header.selector_case() == v1::CompactHeader::kUseFlags && header.use_flags();
  }
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
