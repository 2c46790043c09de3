// --shards for the array commands (scan, reduce, compact): one array split over the servers of
// the target (ClientOptions::shards). Shards need random access to the array, so with --shards
// above 1 a command reads its whole input (and flags) into memory first, runs the typed call,
// then writes the results; without it, commands stream as before.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "array_input.h"
#include "gpuscan/client.h"

namespace gpuscan::cli {

inline void AddShardsOption(CLI::App* cmd, uint32_t& shards) {
  cmd->add_option("--shards", shards,
                  "split the array into N contiguous shards run at once on the servers of the target "
                  "(-s ipv4:a:p,b:q or a dns: name), combined here; holds the input in memory "
                  "(1 = stream one call)")
      ->check(CLI::Range(1u, 1024u));
}

struct ShardedReduceResult {
  std::string raw_value;  // one element of the input's dtype
  uint64_t element_count = 0;
  Timing timing;
};

struct ShardedCompactResult {
  uint64_t kept_count = 0, element_count = 0;
  Timing timing;
};

// The sharded calls over a whole input; results go to the Sinks in order.
Timing ShardedScan(Client& client, const v1::ScanHeader& header, ArrayInput& in, const Sink& out, uint32_t lanes,
                   uint32_t shards);
ShardedReduceResult ShardedReduce(Client& client, const v1::ReduceHeader& header, ArrayInput& in, uint32_t lanes,
                                  uint32_t shards);
// flags: null when the header selects by predicate. values/indices: empty Sinks for outputs not asked.
ShardedCompactResult ShardedCompact(Client& client, const v1::CompactHeader& header, ArrayInput& in,
                                    ArrayInput* flags, const Sink& values, const Sink& indices, uint32_t lanes,
                                    uint32_t shards);

}  // namespace gpuscan::cli
