// The request fuzzer's entry point and its input format, shared by the libFuzzer binary
// (request_fuzzer, clang + -DGPUSCAN_FUZZ=ON), the corpus replay (request_fuzz_replay, every
// build, CTest fuzz_corpus_replay) and the seed generator (request_fuzz_replay --write-seeds).
//
// One input is one streaming call, decoded from bytes as follows (short reads give zeros, and a
// record cut off by the end of the input keeps what it got):
//
//   byte 0    the RPC: below 0xE0 (modulo 8) 0 Scan, 1 Reduce, 2 Compact, 3 Histogram, 4 Scan2D,
//             5 SegmentedScan, 6 ReduceByKey, 7 Sort; from 0xE0 a resident call ((b - 0xE0) modulo
//             14, EncodeInput's rpc 8..21): 8 PutArray, 9 GetArray, 10 DropArray, 11 ListArrays,
//             12 Scan and 13 Reduce with header.resident (request_fuzz_resident.cc), 14..19 the
//             operations 2..7 with header.resident (request_fuzz_resident_ops.cc), 20 Pipeline and
//             21 Pipeline's plan alone (request_fuzz_pipeline.cc; 0xEC and 0xED, unused before)
//   byte 1    the server's limits: --chunk-bytes = 8 << (b & 7) (8..1024 bytes),
//             --max-request-bytes = {0 (unlimited), 64, 512, 4096}[(b >> 3) & 3],
//             Sort's --max-sort-bytes = {4 GiB (the default), 64, 512, 4096}[(b >> 5) & 3];
//             resident calls: --resident-bytes = {4096, 0 (not served), 512, 65536}[(b >> 3) & 3],
//             --tenant-quota-bytes = {0 (none), 64, 512, 4096}[(b >> 5) & 3]
//   then up to 64 records, one per request message of the call:
//     u8        bit 0: the request carries a header
//     [u8 len, len bytes]   if bit 0: the serialized header of that RPC (PutArrayHeader;
//                           GetArray's and DropArray's one request; ListArrays: the first byte
//                           is the request's array's dtype; Pipeline's plan alone: every
//                           record's header bytes, concatenated, are one PipelineHeader)
//                           (unparseable bytes give an empty header)
//     u16 le    data length, then that many bytes: the request's `data` (Compact, SegmentedScan,
//               ReduceByKey: the values; Sort: `keys`)
//     u16 le    RPCs with a second stream only (Compact, SegmentedScan, ReduceByKey, Sort, streamed
//               or resident; Pipeline): its length, then that many bytes: Compact's `flags`,
//               SegmentedScan's and ReduceByKey's `keys` (keys or head bytes), Sort's `values`;
//               Pipeline's: the contents of the arrays its one-byte stage ids name (the k-th such
//               id's from request #k's), its `data` being header.input's chunks
//
// Each input goes through the checks the handlers run (service/validate.h: header placement,
// ToEngine, the scan algorithm check, ChunkChecker / Scan2DChecker / PairedChecker /
// SortBudget) and the chunk assembly (service/flags_aligner.h, service/row_cutter.h), and the
// requests accepted so far
// through a CPU engine session (engine::RunReducer for ReduceByKey), as the server does; a Sort
// reaches the engine only once the whole call is accepted, as in the handler. Not reached:
// admission and engine health. Besides, the whole input's bytes, cut into slices, go through
// the raw RPCs' decoder (gpuscan/wire) as a ScanRequest and a ReduceRequest. Invariants (a
// violation prints why and aborts):
//   - what the wire decoder accepts, protobuf parses to the same fields and data;
//   - a rejected call has INVALID_ARGUMENT, RESOURCE_EXHAUSTED or UNIMPLEMENTED and a message
//     that names a field;
//   - a header ToEngine accepts never makes the engine throw;
//   - the engine's output equals the reference on the elements it was given, accepted call or
//     not: the canonical tree (tests/common/canonical_reference.h) for a deterministic session
//     (float SUM/PRODUCT by default; always for segmented scans and reductions by key), else the
//     sequential fold (tests/common/reference.h); a sort is the stable sort in the order
//     SortHeader defines (floats in IEEE 754 totalOrder), keys and values bit for bit;
//   - the paired streams' assembly hands the engine exactly their common prefix, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuscan::fuzz {

// Runs one input; aborts on an invariant violation. Returns 0 (libFuzzer's convention).
// `outcome`, if given, receives one line: accepted (and the elements checked) or rejected (why).
int RunRequestInput(const uint8_t* data, size_t size, std::string* outcome = nullptr);

// Whether requests of this RPC carry a second byte string (the format above).
bool HasSecondStream(int rpc);

// Builds inputs in the format above (for the seed corpus).
struct SeedRequest {
  bool has_header = false;
  std::string header;  // serialized header message
  std::string data;    // the `data` bytes (Compact: values; Sort: keys)
  std::string flags;   // the second stream: Compact flags, SegmentedScan/ReduceByKey keys, Sort values
};
std::string EncodeInput(int rpc, uint8_t limits, const std::vector<SeedRequest>& requests);

}  // namespace gpuscan::fuzz
