// Request validation, the stream's side (validate.h): where the header may stand, and the
// checks of the chunks as they arrive (sizes, limits, declared counts, paired streams, the
// sort's budget). The header's conversion to an engine spec is in validate.cc.
#include "service/validate.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "service/status.h"

namespace gpuscan::server {

grpc::Status CheckHeaderPlacement(uint64_t index, bool has_header) {
  if (index == 0 && !has_header) {
    return InvalidArgument("header missing: request #0 has no header; the first request must carry the header");
  }
  if (index != 0 && has_header) {
    return InvalidArgument("header repeated in request #" + std::to_string(index) +
                           ": only the first request may carry it");
  }
  return grpc::Status::OK;
}

grpc::Status EmptyStreamStatus() {
  return InvalidArgument("empty stream: the call ended before its first request (the header)");
}

ChunkChecker::ChunkChecker(engine::DType dtype, const std::optional<NarrowInput>& narrow,
                           std::optional<uint64_t> declared_count, uint64_t max_chunk_bytes,
                           uint64_t max_request_bytes)
    : dtype_name_(narrow ? NarrowName(narrow->wire) : engine::Name(dtype)),
      size_(WireSize(narrow, dtype)),
      declared_(declared_count),
      max_chunk_bytes_(max_chunk_bytes),
      max_request_bytes_(max_request_bytes) {}

grpc::Status ChunkChecker::Add(uint64_t bytes, const char* field, uint64_t request_index) {
  const uint64_t size = size_;
  const std::string where = "request #" + std::to_string(request_index) + ": " + field;
  if (bytes % size != 0) {
    return InvalidArgument(where + " length " + std::to_string(bytes) + " bytes is not a multiple of the " +
                           dtype_name_ + " element size " + std::to_string(size));
  }
  if (bytes > max_chunk_bytes_) {
    return ResourceExhausted(where + " length " + std::to_string(bytes) + " bytes exceeds the chunk limit of " +
                             std::to_string(max_chunk_bytes_) + " bytes; split the array into smaller chunks");
  }
  bytes_ += bytes;
  elements_ += bytes / size;
  if (max_request_bytes_ != 0 && bytes_ > max_request_bytes_) {
    return ResourceExhausted("the call's input exceeds --max-request-bytes=" + std::to_string(max_request_bytes_) +
                             " bytes (received " + std::to_string(bytes_) + " so far)");
  }
  if (declared_ && elements_ > *declared_) {
    return InvalidArgument("received more elements than header.element_count=" + std::to_string(*declared_) +
                           " (" + std::to_string(elements_) + " so far)");
  }
  return grpc::Status::OK;
}

grpc::Status ChunkChecker::AddOtherBytes(uint64_t bytes) {
  bytes_ += bytes;
  if (max_request_bytes_ != 0 && bytes_ > max_request_bytes_) {
    return ResourceExhausted("the call's input exceeds --max-request-bytes=" + std::to_string(max_request_bytes_) +
                             " bytes (received " + std::to_string(bytes_) + " so far, values and flags)");
  }
  return grpc::Status::OK;
}

grpc::Status ChunkChecker::Finish() const {
  if (declared_ && elements_ != *declared_) {
    return InvalidArgument("header.element_count=" + std::to_string(*declared_) + " but the stream carried " +
                           std::to_string(elements_) + " elements");
  }
  return grpc::Status::OK;
}

Scan2DChecker::Scan2DChecker(const engine::Scan2DSpec& spec, std::optional<uint64_t> declared_rows,
                             uint64_t max_chunk_bytes, uint64_t max_request_bytes,
                             const std::optional<NarrowInput>& narrow)
    : cols_(spec.cols),
      rows_(declared_rows),
      data_(spec.dtype, narrow, std::nullopt, max_chunk_bytes, max_request_bytes) {}

grpc::Status Scan2DChecker::Add(uint64_t bytes, uint64_t request_index) {
  if (auto s = data_.Add(bytes, "data", request_index); !s.ok()) return s;
  if (rows_ && data_.elements() > *rows_ * cols_) {  // ToEngine refused an overflowing product
    return InvalidArgument("received more than header.rows=" + std::to_string(*rows_) + " rows of header.cols=" +
                           std::to_string(cols_) + " (" + std::to_string(data_.elements()) + " elements so far)");
  }
  return grpc::Status::OK;
}

grpc::Status Scan2DChecker::Finish() const {
  const uint64_t n = data_.elements();
  if (n % cols_ != 0) {
    return InvalidArgument("the stream ended inside a row: " + std::to_string(n) +
                           " elements is not a whole number of rows of header.cols=" + std::to_string(cols_));
  }
  if (rows_ && n / cols_ != *rows_) {
    return InvalidArgument("header.rows=" + std::to_string(*rows_) + " but the stream carried " +
                           std::to_string(n / cols_) + " rows of header.cols=" + std::to_string(cols_));
  }
  return grpc::Status::OK;
}

PairedChecker::PairedChecker(engine::DType dtype, const std::optional<NarrowInput>& narrow, const Side& side,
                             std::optional<uint64_t> declared_count, uint64_t max_chunk_bytes,
                             uint64_t max_request_bytes)
    : side_(side),
      // A narrow input's skew is bound by the wider of its two streams' bytes.
      element_size_(narrow ? std::max<uint64_t>(narrow->size, side.size) : engine::SizeOf(dtype)),
      max_chunk_bytes_(max_chunk_bytes),
      values_(dtype, narrow, declared_count, max_chunk_bytes, max_request_bytes) {}

grpc::Status PairedChecker::Add(uint64_t values_bytes, uint64_t side_bytes, uint64_t request_index) {
  if (auto s = values_.Add(values_bytes, side_.values_field, request_index); !s.ok()) return s;
  const std::string where = "request #" + std::to_string(request_index) + ": ";
  if (side_.size == 0) {
    if (side_bytes == 0) return grpc::Status::OK;
    return InvalidArgument(where + side_.field + " sent (" + std::to_string(side_bytes) + " bytes) but " +
                           side_.unused);
  }
  if (side_bytes % side_.size != 0) {
    return InvalidArgument(where + side_.field + " length " + std::to_string(side_bytes) +
                           " bytes is not a multiple of the " + side_.unit + " size " + std::to_string(side_.size));
  }
  if (side_bytes > max_chunk_bytes_) {
    return ResourceExhausted(where + side_.field + " length " + std::to_string(side_bytes) +
                             " bytes exceeds the chunk limit of " + std::to_string(max_chunk_bytes_) + " bytes");
  }
  if (auto s = values_.AddOtherBytes(side_bytes); !s.ok()) return s;
  side_count_ += side_bytes / side_.size;
  const uint64_t values = values_.elements();
  const uint64_t skew = values > side_count_ ? values - side_count_ : side_count_ - values;
  const uint64_t max_skew = kMaxSkewChunks * max_chunk_bytes_ / element_size_;
  if (skew > max_skew) {
    return InvalidArgument(where + side_.field + " (" + std::to_string(side_count_) + " so far) and " +
                           side_.values_field + " (" + std::to_string(values) +
                           " elements so far) are out of step by more than " + std::to_string(max_skew) +
                           " elements; send each chunk's " + side_.field + " with its " + side_.values_field);
  }
  return grpc::Status::OK;
}

grpc::Status PairedChecker::Finish() const {
  if (auto s = values_.Finish(); !s.ok()) return s;
  if (side_.size != 0 && side_count_ != values_.elements()) {
    return InvalidArgument(std::string(side_.field) + " length " + std::to_string(side_count_) + " differs from " +
                           side_.values_field + " length " + std::to_string(values_.elements()) +
                           " (elements): " + side_.needs);
  }
  return grpc::Status::OK;
}

PairedChecker::Side CompactSide(const engine::CompactSpec& spec) {
  PairedChecker::Side side;
  side.values_field = "values";
  side.field = "flags";
  side.unit = "flag";
  side.size = spec.use_flags ? 1 : 0;
  side.unused = "the header selects by predicate, not use_flags";
  side.needs = "use_flags needs one flag byte per value";
  return side;
}

SortBudget::SortBudget(const engine::SortSpec& spec, uint64_t max_sort_bytes,
                       const std::optional<NarrowInput>& narrow_keys, const std::optional<NarrowInput>& narrow_values)
    : per_element_((narrow_keys ? narrow_keys->size : engine::SizeOf(spec.dtype)) +
                   (!spec.has_values ? 0 : narrow_values ? narrow_values->size : engine::SizeOf(spec.values_dtype))),
      max_(max_sort_bytes) {}

grpc::Status SortBudget::TooBig(uint64_t bytes, const std::string& what) const {
  return {grpc::StatusCode::RESOURCE_EXHAUSTED,
          what + std::to_string(bytes) + " bytes of keys and values, beyond the server's --max-sort-bytes=" +
              std::to_string(max_) + " (Limits.max_sort_bytes): a sort holds its whole input"};
}

grpc::Status SortBudget::CheckDeclared(std::optional<uint64_t> element_count) const {
  // Divided, not multiplied: a count near 2^64 would wrap the product below the limit.
  if (!element_count || *element_count <= max_ / per_element_) return grpc::Status::OK;
  const uint64_t n = *element_count;
  const uint64_t bytes = n > UINT64_MAX / per_element_ ? UINT64_MAX : n * per_element_;
  return TooBig(bytes, "header.element_count=" + std::to_string(n) + " makes ");
}

grpc::Status SortBudget::Add(uint64_t bytes) {
  received_ += bytes;
  return received_ > max_ ? TooBig(received_, "the input reached ") : grpc::Status::OK;
}

PairedChecker::Side SortSide(const engine::SortSpec& spec, const std::optional<NarrowInput>& narrow_values) {
  PairedChecker::Side side;
  side.values_field = "keys";
  side.field = "values";
  side.unit = "values_dtype " + std::string(narrow_values ? NarrowName(narrow_values->wire) : engine::Name(spec.values_dtype));
  side.size = !spec.has_values ? 0 : narrow_values ? narrow_values->size : engine::SizeOf(spec.values_dtype);
  side.unused = "the header's output is not SORT_OUTPUT_KEYS_AND_VALUES";
  side.needs = "SORT_OUTPUT_KEYS_AND_VALUES needs one value per key";
  return side;
}

PairedChecker::Side SegmentedScanSide(const engine::SegmentedScanSpec& spec) {
  PairedChecker::Side side;
  side.values_field = "data";
  side.field = "keys";
  side.unit = spec.heads ? "head flag" : "key_dtype " + std::string(engine::Name(spec.key_dtype));
  side.size = spec.heads ? 1 : engine::SizeOf(spec.key_dtype);
  side.needs = spec.heads ? "heads needs one head byte per value" : "key_dtype needs one key per value";
  return side;
}

}  // namespace gpuscan::server
