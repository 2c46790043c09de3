// Request validation: turns a call's wire header into an engine spec, or a gRPC status naming
// the offending field and value. Everything here is pure (no I/O), so it is easy to test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "engine/types.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/narrow.h"

namespace gpuscan::server {

// Narrow inputs (service/narrow.h) are taken where `narrow` is given: the spec gets the engine's
// dtype and *narrow what the call converts (nullopt for an input of the engine's dtype). Scan,
// Reduce, SegmentedScan, ReduceByKey and Scan2D accumulate them in header.output_dtype; Compact,
// Sort and Histogram run them as their carrier. Without `narrow` a narrow dtype is refused.
grpc::Status ToEngine(const v1::ScanHeader& header, engine::ScanSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
grpc::Status ToEngine(const v1::ReduceHeader& header, engine::ReduceSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
grpc::Status ToEngine(const v1::CompactHeader& header, engine::CompactSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
grpc::Status ToEngine(const v1::SegmentedScanHeader& header, engine::SegmentedScanSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
grpc::Status ToEngine(const v1::SortHeader& header, engine::SortSpec* spec,
                      std::optional<NarrowInput>* narrow_keys = nullptr,
                      std::optional<NarrowInput>* narrow_values = nullptr);
// Scan2D: also refuses a row (cols x element size) above max_row_bytes.
grpc::Status ToEngine(const v1::Scan2DHeader& header, uint64_t max_row_bytes, engine::Scan2DSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
// Reduce by key runs on the segmented scan: the spec of its inclusive scan by keys.
grpc::Status ToEngine(const v1::ReduceByKeyHeader& header, engine::SegmentedScanSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);
// Even bins become their edges (engine::EvenHistogramEdges); max_bins: the server's limit.
grpc::Status ToEngine(const v1::HistogramHeader& header, uint32_t max_bins, engine::HistogramSpec* spec,
                      std::optional<NarrowInput>* narrow = nullptr);

// Where the header may appear: in request #0, which must carry it, and nowhere else.
// `index` counts the call's requests from 0.
grpc::Status CheckHeaderPlacement(uint64_t index, bool has_header);
// The status of a call that ended before sending its first request.
grpc::Status EmptyStreamStatus();
// UNIMPLEMENTED for a (known) scan algorithm the engine does not offer, naming those it does.
grpc::Status CheckScanAlgorithm(engine::ScanAlgorithm wanted, const std::vector<engine::ScanAlgorithm>& offered,
                                const std::string& engine_name);

// A narrow input (ToEngine's `narrow`, of the header's `field`) travels in the stream only: with
// shared_memory or device_memory, INVALID_ARGUMENT naming the field.
grpc::Status NarrowStreamedOnly(const std::optional<NarrowInput>& narrow, bool shared_memory, bool device_memory,
                                const char* field = "header.dtype");

// wire: a v1::DType value of 4 or 8 bytes (a narrow one is refused, naming `field`).
grpc::Status ToEngineDType(int wire, engine::DType* out, const char* field = "header.dtype");
v1::DType ToWire(engine::DType t);
v1::ScanAlgorithm ToWire(engine::ScanAlgorithm a);

// Converts a predicate operand to one raw element of `dtype` (8 bytes of room), checking that
// its kind matches the dtype and that the value fits. `field` names it in the message.
grpc::Status ScalarToElement(const v1::Scalar& scalar, engine::DType dtype, const std::string& field,
                             unsigned char out[8]);
// A predicate operand of a narrow array, as ScalarToElement for the narrow dtype itself: its kind
// and range are the narrow dtype's (int8 300 is refused naming int8), a FLOAT16 bound is rounded
// to float16 where it fits (numpy compares so); written into `out` as the carrier's element.
grpc::Status NarrowBound(const v1::Scalar& scalar, const NarrowInput& narrow, const std::string& field,
                         unsigned char out[8]);
// The inverse, for Reduce's answer.
v1::Scalar ElementToScalar(const void* element, engine::DType dtype);

// Checks the data chunks of one call as they arrive: whole elements, the per-chunk limit, the
// per-call byte limit and the declared element count.
class ChunkChecker {
 public:
  ChunkChecker(engine::DType dtype, std::optional<uint64_t> declared_count, uint64_t max_chunk_bytes,
               uint64_t max_request_bytes)
      : ChunkChecker(dtype, std::nullopt, declared_count, max_chunk_bytes, max_request_bytes) {}
  // Elements of a narrow input's size where `narrow` is set (the chunks arrive narrow), else dtype's.
  ChunkChecker(engine::DType dtype, const std::optional<NarrowInput>& narrow, std::optional<uint64_t> declared_count,
               uint64_t max_chunk_bytes, uint64_t max_request_bytes);
  // `field` names the bytes field ("data", "values"); `request_index` counts from 0.
  grpc::Status Add(uint64_t bytes, const char* field, uint64_t request_index);
  // Counts payload bytes that are not elements (a compaction's flags) toward the per-call limit.
  grpc::Status AddOtherBytes(uint64_t bytes);
  // At the end of the stream: the declared count, if any, must equal what arrived.
  grpc::Status Finish() const;
  uint64_t elements() const { return elements_; }

 private:
  std::string dtype_name_;
  uint64_t size_;
  std::optional<uint64_t> declared_;
  uint64_t max_chunk_bytes_;
  uint64_t max_request_bytes_;
  uint64_t elements_ = 0;
  uint64_t bytes_ = 0;
};

// Scan2D's stream: ChunkChecker's checks, no more than header.rows (when set) rows of the
// spec's cols, and in the end whole rows, header.rows of them.
class Scan2DChecker {
 public:
  Scan2DChecker(const engine::Scan2DSpec& spec, std::optional<uint64_t> declared_rows, uint64_t max_chunk_bytes,
                uint64_t max_request_bytes, const std::optional<NarrowInput>& narrow = std::nullopt);
  grpc::Status Add(uint64_t bytes, uint64_t request_index);
  grpc::Status Finish() const;
  uint64_t elements() const { return data_.elements(); }

 private:
  uint64_t cols_;
  std::optional<uint64_t> rows_;
  ChunkChecker data_;
};

// The checks per request of a call whose values come with a second stream matched to them by
// element position (Compact's flags, SegmentedScan's keys): the values as ChunkChecker does;
// the second stream absent when the header wants none, else whole units within the chunk
// limit, never out of step with the values by more than kMaxSkewChunks chunks (bounds what the
// server buffers), and in the end exactly one unit per value. It counts toward
// --max-request-bytes.
class PairedChecker {
 public:
  static constexpr uint64_t kMaxSkewChunks = 4;
  struct Side {
    const char* values_field = "values";  // the values' field name
    const char* field = "flags";          // the second stream's field name
    std::string unit;                     // what one unit is, for messages ("flag", "key_dtype int64")
    uint64_t size = 1;                    // bytes per element; 0: the header wants none
    std::string unused;                   // size 0: why (" but <unused>")
    std::string needs;                    // the final count check's explanation
  };

  PairedChecker(engine::DType dtype, const Side& side, std::optional<uint64_t> declared_count,
                uint64_t max_chunk_bytes, uint64_t max_request_bytes)
      : PairedChecker(dtype, std::nullopt, side, declared_count, max_chunk_bytes, max_request_bytes) {}
  // Values of a narrow input's size where `narrow` is set (the chunks arrive narrow), else dtype's.
  PairedChecker(engine::DType dtype, const std::optional<NarrowInput>& narrow, const Side& side,
                std::optional<uint64_t> declared_count, uint64_t max_chunk_bytes, uint64_t max_request_bytes);
  grpc::Status Add(uint64_t values_bytes, uint64_t side_bytes, uint64_t request_index);
  grpc::Status Finish() const;
  uint64_t elements() const { return values_.elements(); }

 private:
  Side side_;
  uint64_t element_size_;
  uint64_t max_chunk_bytes_;
  ChunkChecker values_;
  uint64_t side_count_ = 0;
};

// A sort holds its whole input, so --max-sort-bytes bounds it: the declared element count at the
// header, and the keys and values received as they come. RESOURCE_EXHAUSTED names the flag.
class SortBudget {
 public:
  // Narrow keys or values count at their size on the wire.
  SortBudget(const engine::SortSpec& spec, uint64_t max_sort_bytes,
             const std::optional<NarrowInput>& narrow_keys = std::nullopt,
             const std::optional<NarrowInput>& narrow_values = std::nullopt);
  grpc::Status CheckDeclared(std::optional<uint64_t> element_count) const;
  grpc::Status Add(uint64_t bytes);  // one request's keys and values

 private:
  grpc::Status TooBig(uint64_t bytes, const std::string& what) const;
  uint64_t per_element_, max_, received_ = 0;
};

// Compact: flags with use_flags. SegmentedScan: keys (key_dtype) or head bytes.
PairedChecker::Side CompactSide(const engine::CompactSpec& spec);
PairedChecker::Side SegmentedScanSide(const engine::SegmentedScanSpec& spec);
// Sort: the keys are the elements; values (KEYS_AND_VALUES) the second stream, narrow_values
// when header.values_dtype is narrow.
PairedChecker::Side SortSide(const engine::SortSpec& spec, const std::optional<NarrowInput>& narrow_values = std::nullopt);

}  // namespace gpuscan::server
