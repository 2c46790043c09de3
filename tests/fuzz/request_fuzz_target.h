// The request fuzzer's entry point and its input format, shared by the libFuzzer binary
// (request_fuzzer, clang + -DGPUSCAN_FUZZ=ON), the corpus replay (request_fuzz_replay, every
// build, CTest fuzz_corpus_replay) and the seed generator (request_fuzz_replay --write-seeds).
//
// One input is one streaming call, decoded from bytes as follows (short reads give zeros, and a
// record cut off by the end of the input keeps what it got):
//
//   byte 0    the RPC: 0 Scan, 1 Reduce, 2 Compact, 3 Histogram, 4 Scan2D (modulo 5)
//   byte 1    the server's limits: --chunk-bytes = 8 << (b & 7) (8..1024 bytes),
//             --max-request-bytes = {0 (unlimited), 64, 512, 4096}[(b >> 3) & 3]
//   then up to 64 records, one per request message of the call:
//     u8        bit 0: the request carries a header
//     [u8 len, len bytes]   if bit 0: the serialized header of that RPC
//                           (unparseable bytes give an empty header)
//     u16 le    data (Compact: values) length, then that many bytes
//     u16 le    Compact only: flags length, then that many bytes
//
// Each input goes through the checks the handlers run (service/validate.h: header placement,
// ToEngine, the scan algorithm check, ChunkChecker / PairedChecker) and the chunk assembly
// (service/flags_aligner.h), and the requests accepted so far through a CPU engine session, as
// the server does. Invariants (a violation prints why and aborts):
//   - a rejected call has INVALID_ARGUMENT, RESOURCE_EXHAUSTED or UNIMPLEMENTED and a message
//     that names a field;
//   - a header ToEngine accepts never makes the engine throw;
//   - the engine's output equals the reference on the elements it was given, accepted call or
//     not: the canonical tree (tests/common/canonical_reference.h) for a deterministic session
//     (float SUM/PRODUCT by default), else the sequential fold (tests/common/reference.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuscan::fuzz {

// Runs one input; aborts on an invariant violation. Returns 0 (libFuzzer's convention).
// `outcome`, if given, receives one line: accepted (and the elements checked) or rejected (why).
int RunRequestInput(const uint8_t* data, size_t size, std::string* outcome = nullptr);

// Builds inputs in the format above (for the seed corpus).
struct SeedRequest {
  bool has_header = false;
  std::string header;  // serialized header message
  std::string data;    // Scan/Reduce data, Compact values
  std::string flags;   // Compact only
};
std::string EncodeInput(int rpc, uint8_t limits, const std::vector<SeedRequest>& requests);

}  // namespace gpuscan::fuzz
