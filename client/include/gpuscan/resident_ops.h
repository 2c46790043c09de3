// The operations on resident arrays beyond Scan and Reduce (Client::Scan and Client::Reduce of a
// RemoteArray: client.h): Histogram, Compact, SegmentedScan(Heads), ReduceByKey, Sort, Argsort,
// SortPairs, Scan2D and ScanAlong (src/resident_ops.cc). Every input is a RemoteArray of one
// Client (the calls go through in.client(); another Client's array is std::invalid_argument),
// named by id in header.resident (Resident in gpuscan.proto): only the header travels, and the
// results are the bits of the streamed call of the same elements. The typed forms read the
// results back: T is the values' dtype (std::invalid_argument otherwise), or for a narrow array
// (int8 ... float16, which the server widens) of the scans and ReduceByKey the accumulator's,
// sent as header.output_dtype. The forms taking ResidentOptions keep the results on the server
// instead and return them as RemoteArrays; they are one try each (a lost answer may have kept
// them: a retry would keep them twice), while the typed forms are retried as RetryOptions says.
// The raw calls behind them (Client::CompactResident, ...) take any header, narrow dtypes too.
#pragma once

#include <cstdint>

#include "gpuscan/client.h"
#include "gpuscan/remote_array.h"

namespace gpuscan {

// A keeping call's arrays (empty where the call made none) and its final response's count.
struct KeptArrays {
  RemoteArray keys;     // Sort: the sorted keys; ReduceByKey: the runs' keys
  RemoteArray values;   // Compact: the kept values; Sort: the values moved along; ReduceByKey: the runs' values
  RemoteArray indices;  // Compact: the kept indices; Sort: the permutation (int64)
  uint64_t count = 0;   // Compact: kept_count; ReduceByKey: run_count; Sort: element_count
  Timing timing;
};

// Histogram keeps nothing (its answer is counts).
HistogramResult Histogram(const RemoteArray& in, const HistogramBins& bins);

// flags: a UINT8/INT8 resident array of in's size, used when given (options.flags must be empty);
// else options.predicate.
template <class T>
CompactResult<T> Compact(const RemoteArray& in, const CompactOptions& options, const RemoteArray* flags = nullptr);
KeptArrays Compact(const RemoteArray& in, const CompactOptions& options, const RemoteArray* flags,
                   const ResidentOptions& keep);

// keys: an integer resident array; heads: UINT8/INT8 (nonzero begins a segment); in's size.
template <class T>
ScanResult<T> SegmentedScan(const RemoteArray& in, const RemoteArray& keys, const SegmentedScanOptions& options = {});
RemoteArray SegmentedScan(const RemoteArray& in, const RemoteArray& keys, const SegmentedScanOptions& options,
                          const ResidentOptions& keep);
template <class T>
ScanResult<T> SegmentedScanHeads(const RemoteArray& in, const RemoteArray& heads,
                                 const SegmentedScanOptions& options = {});
RemoteArray SegmentedScanHeads(const RemoteArray& in, const RemoteArray& heads, const SegmentedScanOptions& options,
                               const ResidentOptions& keep);

// K: the keys' dtype (a narrow one comes back widened to int32 or uint32, as sent streamed).
template <class T, class K>
ReduceByKeyResult<T, K> ReduceByKey(const RemoteArray& in, const RemoteArray& keys, v1::Operator op);
KeptArrays ReduceByKey(const RemoteArray& in, const RemoteArray& keys, v1::Operator op, const ResidentOptions& keep);

template <class T>
SortResult<T> Sort(const RemoteArray& keys, bool descending = false);
template <class T>
SortResult<T> Argsort(const RemoteArray& keys, bool descending = false);
template <class T, class V>
SortResult<T, V> SortPairs(const RemoteArray& keys, const RemoteArray& values, bool descending = false);
// values: required for (and only with) SORT_OUTPUT_KEYS_AND_VALUES.
KeptArrays Sort(const RemoteArray& keys, const RemoteArray* values, v1::SortOutput output, bool descending,
                const ResidentOptions& keep);

// The resident array as a row-major matrix of `cols` columns (its size a multiple of cols).
template <class T>
ScanResult<T> Scan2D(const RemoteArray& in, uint64_t cols, v1::Operator op = v1::OPERATOR_SUM);
RemoteArray Scan2D(const RemoteArray& in, uint64_t cols, v1::Operator op, const ResidentOptions& keep);
template <class T>
ScanResult<T> ScanAlong(const RemoteArray& in, uint64_t cols, int axis, v1::Operator op = v1::OPERATOR_SUM,
                        bool exclusive = false);
RemoteArray ScanAlong(const RemoteArray& in, uint64_t cols, int axis, v1::Operator op, bool exclusive,
                      const ResidentOptions& keep);

}  // namespace gpuscan
