// --lanes for the array commands (scan, reduce, compact): striped lanes, one array over K
// concurrent calls, each on its own connection, all to one server (see Lanes in the proto).
#pragma once

#include <cstdint>
#include <optional>

#include <CLI/CLI.hpp>

#include "gpuscan/client.h"

namespace gpuscan::cli {

// From this much input, a command without --lanes stripes over kAutoLanes lanes: one HTTP/2
// stream tops out near 1.5 GB/s, and small inputs gain nothing from more connections.
constexpr uint64_t kAutoLanesFromBytes = uint64_t{64} << 20;
constexpr uint32_t kAutoLanes = 4;

inline void AddLanesOption(CLI::App* cmd, uint32_t& lanes) {
  cmd->add_option("--lanes", lanes,
                  "send the array over K concurrent calls, each on its own connection, to one server "
                  "(1 = one call; default: 4 for inputs from 64 MiB, else 1)")
      ->check(CLI::Range(1u, 1024u));
}

// The lanes a command uses: --lanes if given (0 = not given), else chosen by the input's size,
// and then only if the server joins lanes (an older one does not: one call instead).
inline uint32_t ChooseLanes(uint32_t asked, std::optional<uint64_t> payload_bytes, Client& client) {
  if (asked > 0) return asked;
  if (!payload_bytes || *payload_bytes < kAutoLanesFromBytes) return 1;
  return client.Info().limits().max_lanes() > 0 ? kAutoLanes : 1;
}

}  // namespace gpuscan::cli
