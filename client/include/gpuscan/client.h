// gpuscan::Client: the C++ client of the gpuscan.v1.GpuScan service.
//
// Two layers:
// - a typed API over contiguous arrays (Scan, Reduce, Compact) for callers that hold the data;
// - a byte-level streaming API (ScanStream, ReduceStream, CompactStream) fed by a Source and
//   draining into a Sink, so arrays of any length pass through without being held in memory.
// Streaming calls upload on a writer thread while the calling thread reads results. Every failure
// throws RpcError. A Client is thread-safe: calls may run at once on one instance (one channel).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "gpuscan/client_options.h"
#include "gpuscan/device_array.h"
#include "gpuscan/dtypes.h"
#include "gpuscan/remote_array.h"
#include "gpuscan/rpc_error.h"
#include "gpuscan/shared_arena.h"
#include "gpuscan/shared_region.h"
#include "gpuscan/timing.h"
#include "gpuscan/v1/gpuscan.grpc.pb.h"

namespace gpuscan {

class Pipeline;  // gpuscan/pipeline.h

namespace detail {
class ShardPool;  // src/shards.h
class CallRegistry;  // src/call_registry.h
struct SourceAtAccess;  // src/raw_messages.h
// A call's context, deleted through the registry of its Client's calls in flight.
struct ContextRelease {
  CallRegistry* calls = nullptr;
  void operator()(grpc::ClientContext* ctx) const;
};
using ContextPtr = std::unique_ptr<grpc::ClientContext, ContextRelease>;
}

// Fills up to max_bytes of buf and returns the bytes written; 0 = end of data. Must return
// whole elements except at the very end. May throw: the call is cancelled and the exception
// rethrown to the caller of the streaming method.
using Source = std::function<size_t(void* buf, size_t max_bytes)>;
// An input that can be read again: each call returns a fresh Source over the whole input from
// its start (e.g. the file opened again). Streaming calls given one are retried (RetryOptions).
using Replay = std::function<Source()>;
// Receives result bytes in order (whole elements). May throw, like Source.
using Sink = std::function<void(const void* data, size_t bytes)>;

// Random access, for striped lanes. A Source made from a SourceAt and a Sink made from a SinkAt
// let every lane copy its own chunks at once: without them the lanes take turns reading the
// Source and one thread feeds the Sink in order, and those copies bound a fast call. On one
// stream they behave as the plain Source and Sink they also are. The typed calls (Scan,
// ScanInto, Compact...) and the CLI's files use them.
//
// An input of `bytes` bytes; read(offset, buf, n) copies its bytes [offset, offset + n) into buf.
// Called from several threads at once for disjoint ranges; may throw, like Source.
class SourceAt {
 public:
  using Read = std::function<void(uint64_t offset, void* buf, size_t n)>;
  SourceAt(uint64_t bytes, Read read) : bytes_(bytes), read_(std::move(read)) {}
  // An array in memory, which must outlive the call. The calls send its bytes from where they
  // lie, without copying them first; the array must not change until the call returns.
  static SourceAt Memory(const void* data, uint64_t bytes);
  uint64_t bytes() const { return bytes_; }
  void ReadAt(uint64_t offset, void* buf, size_t n) const { read_(offset, buf, n); }
  // As a Source: the next bytes in order.
  size_t operator()(void* buf, size_t max_bytes);

 private:
  friend struct detail::SourceAtAccess;  // the calls' view of Memory()'s array (raw_messages.h)
  uint64_t bytes_;
  Read read_;
  uint64_t pos_ = 0;
  const char* memory_ = nullptr;  // Memory()'s array
};

// A result written by position: write(offset, data, n) receives the result's bytes
// [offset, offset + n). Called from several threads at once for disjoint ranges, each byte once
// per try, in no particular order, and a range may cut an element in two. A retried call
// (RetryOptions) writes every position again, with the same bytes. May throw, like Sink.
class SinkAt {
 public:
  using Write = std::function<void(uint64_t offset, const void* data, size_t n)>;
  explicit SinkAt(Write write) : write_(std::move(write)) {}
  // Into memory of `capacity` bytes, which must outlive the call; a result that does not fit
  // throws RpcError DATA_LOSS naming `who` ("the server returned more than ...").
  static SinkAt Memory(void* data, uint64_t capacity, std::string who = "the server");
  void WriteAt(uint64_t offset, const void* data, size_t n) const { write_(offset, data, n); }
  // As a Sink: the bytes follow the ones before.
  void operator()(const void* data, size_t bytes);

 private:
  Write write_;
  uint64_t pos_ = 0;
};
// Payload bytes sent and received so far. Called after each message, from the calling thread
// or the internal writer thread, never from both at once.
using Progress = std::function<void(uint64_t bytes_sent, uint64_t bytes_received)>;

template <class T>
struct ScanResult {
  std::vector<T> values;
  Timing timing;
};

template <class T>
struct ReduceResult {
  T value{};
  uint64_t element_count = 0;
  Timing timing;
};

template <class T>
struct CompactResult {
  std::vector<T> values;          // filled unless output == COMPACT_OUTPUT_INDICES
  std::vector<int64_t> indices;   // filled unless output == COMPACT_OUTPUT_VALUES
  uint64_t kept_count = 0;
  Timing timing;
};

// A histogram's bins (numpy.histogram's semantics; see gpuscan.v1.HistogramHeader): `bins` even
// bins over [lo, hi], or explicit `edges` (bins = 0).
struct HistogramBins {
  uint32_t bins = 10;
  double lo = 0;
  double hi = 1;
  std::vector<double> edges;
};

struct HistogramResult {
  std::vector<uint64_t> counts;  // one per bin
  std::vector<double> edges;     // bins + 1: the edges the server used (float32-rounded for float32 arrays)
  uint64_t below = 0;            // non-NaN elements below edges.front()
  uint64_t above = 0;            // non-NaN elements above edges.back()
  uint64_t nan_count = 0;
  uint64_t element_count = 0;
  Timing timing;
};
// A HistogramStream's header for these bins (explicit edges when given, else even bins), and
// its response as a HistogramResult (throws RpcError INTERNAL if malformed).
v1::HistogramHeader HistogramHeaderFor(v1::DType dtype, const HistogramBins& bins);
HistogramResult ToHistogramResult(const v1::HistogramResponse& response);

struct ScanOptions {
  v1::Operator op = v1::OPERATOR_SUM;
  bool exclusive = false;
  v1::ScanAlgorithm algorithm = v1::SCAN_ALGORITHM_DEFAULT;
  uint32_t lanes = 0;  // striped lanes for this call; 0 = ClientOptions::lanes
  uint32_t shards = 0;  // shards for this call; 0 = ClientOptions::shards
  // Set: one raw element of the results' dtype folded into every result (ScanHeader.carry:
  // out[i] = op(carry, scan[i])), made with CarryOf(value). The call then runs on one stream
  // (lanes or shards above 1 asked for it: std::invalid_argument).
  std::optional<std::string> carry;
};
template <class T>
std::string CarryOf(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
}

// One (key, value) per run of equal consecutive keys (see gpuscan.v1.ReduceByKeyHeader).
template <class T, class K>
struct ReduceByKeyResult {
  std::vector<K> keys;
  std::vector<T> values;
  Timing timing;
};

// A sort's results: keys (Sort, SortPairs), values (SortPairs), the permutation (Argsort).
template <class T, class V = T>
struct SortResult {
  std::vector<T> keys;
  std::vector<V> values;
  std::vector<int64_t> indices;
  Timing timing;
};

struct SegmentedScanOptions {
  v1::Operator op = v1::OPERATOR_SUM;
  bool exclusive = false;
};

struct CompactOptions {
  // Selection by flags (one byte per element, nonzero = keep) when use_flags is set or flags is
  // non-empty; otherwise by `predicate`.
  std::vector<uint8_t> flags;
  bool use_flags = false;
  v1::Predicate predicate;
  v1::CompactOutput output = v1::COMPACT_OUTPUT_VALUES;
  uint32_t lanes = 0;  // striped lanes for this call; 0 = ClientOptions::lanes
  uint32_t shards = 0;  // shards for this call; 0 = ClientOptions::shards
};

// What Client::Transport measured: the transport ceiling for one call of this size.
struct TransportResult {
  uint64_t bytes_in = 0;        // payload bytes the server received (its count)
  uint64_t bytes_out = 0;       // payload bytes the server sent back (its count; 0 without echo)
  uint64_t bytes_received = 0;  // payload bytes this client received
  uint64_t requests = 0;        // request messages the server received
  uint64_t wall_us = 0;         // the call as this client saw it: start until Finish (microseconds)
  uint64_t server_total_us = 0; // the server's total_us: call start until the final response
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Typed API (T = int32_t, int64_t, uint32_t, uint64_t, float, double). Sets element_count.
  template <class T>
  ScanResult<T> Scan(const T* data, size_t n, const ScanOptions& options = {});
  template <class T>
  ScanResult<T> Scan(const std::vector<T>& x, const ScanOptions& options = {}) {
    return Scan(x.data(), x.size(), options);
  }
  // The same scan written into the caller's `out` (room for n elements, not overlapping `data`):
  // no result vector to allocate and clear, which matters at GiB sizes and with shards, whose
  // results land in place from several threads at once. Throws DATA_LOSS if fewer came back.
  template <class T>
  Timing ScanInto(const T* data, size_t n, T* out, const ScanOptions& options = {});
  // lanes, shards: for this call; 0 = ClientOptions::lanes, ClientOptions::shards.
  template <class T>
  ReduceResult<T> Reduce(const T* data, size_t n, v1::Operator op, uint32_t lanes = 0, uint32_t shards = 0);
  template <class T>
  ReduceResult<T> Reduce(const std::vector<T>& x, v1::Operator op, uint32_t lanes = 0, uint32_t shards = 0) {
    return Reduce(x.data(), x.size(), op, lanes, shards);
  }
  template <class T>
  HistogramResult Histogram(const T* data, size_t n, const HistogramBins& bins);
  template <class T>
  HistogramResult Histogram(const std::vector<T>& x, const HistogramBins& bins) {
    return Histogram(x.data(), x.size(), bins);
  }
  // Segmented scans (see gpuscan.v1.SegmentedScanHeader): each run of equal consecutive keys
  // (K = int32_t, int64_t, uint32_t or uint64_t; n of them) is scanned on its own.
  template <class T, class K>
  ScanResult<T> SegmentedScan(const T* data, size_t n, const K* keys, const SegmentedScanOptions& options = {});
  template <class T, class K>
  ScanResult<T> SegmentedScan(const std::vector<T>& x, const std::vector<K>& keys,
                              const SegmentedScanOptions& options = {}) {
    if (keys.size() != x.size()) throw std::invalid_argument("gpuscan: SegmentedScan needs one key per value");
    return SegmentedScan(x.data(), x.size(), keys.data(), options);
  }
  // The same with segments that begin where heads[i] is nonzero (element 0 always begins one).
  template <class T>
  ScanResult<T> SegmentedScanHeads(const T* data, size_t n, const uint8_t* heads,
                                   const SegmentedScanOptions& options = {});
  // Reduction of each run of equal consecutive keys (K as SegmentedScan's; n keys).
  template <class T, class K>
  ReduceByKeyResult<T, K> ReduceByKey(const T* data, size_t n, const K* keys, v1::Operator op);
  template <class T, class K>
  ReduceByKeyResult<T, K> ReduceByKey(const std::vector<T>& x, const std::vector<K>& keys, v1::Operator op) {
    if (keys.size() != x.size()) throw std::invalid_argument("gpuscan: ReduceByKey needs one key per value");
    return ReduceByKey(x.data(), x.size(), keys.data(), op);
  }
  // 2-D inclusive scan (summed-area table, see gpuscan.v1.Scan2DHeader) of the row-major
  // rows x cols matrix `data`: the table, row-major.
  template <class T>
  ScanResult<T> Scan2D(const T* data, size_t rows, size_t cols, v1::Operator op = v1::OPERATOR_SUM);
  // A scan along one axis of the row-major rows x cols matrix `data` (numpy's cumsum(m, axis)):
  // axis 0 scans each column top to bottom, axis 1 each row left to right, each folded in order
  // (float bits as numpy's). The result is row-major. std::invalid_argument for another axis;
  // RpcError UNIMPLEMENTED when the server does not list "scan_axis" in its operations (an older
  // one would answer the 2-D scan).
  template <class T>
  ScanResult<T> ScanAlong(const T* data, size_t rows, size_t cols, int axis, v1::Operator op = v1::OPERATOR_SUM,
                          bool exclusive = false);
  // Whether the server lists `operation` in ServerInfo.operations (asked once per Client).
  bool ServesOperation(const std::string& operation);
  // Stable sorts (see gpuscan.v1.SortHeader; floats in IEEE total order): the sorted keys; the
  // permutation (int64 input positions); the sorted keys with values V moved along.
  template <class T>
  SortResult<T> Sort(const T* keys, size_t n, bool descending = false);
  template <class T>
  SortResult<T> Argsort(const T* keys, size_t n, bool descending = false);
  template <class T, class V>
  SortResult<T, V> SortPairs(const T* keys, const V* values, size_t n, bool descending = false);
  template <class T>
  CompactResult<T> Compact(const T* data, size_t n, const CompactOptions& options);
  template <class T>
  CompactResult<T> Compact(const std::vector<T>& x, const CompactOptions& options) {
    return Compact(x.data(), x.size(), options);
  }

  // Byte-level streaming: the header is sent as given (element_count too if the caller set
  // it), together with the first chunk. Returns the final response's Timing. `lanes`: striped
  // lanes for this call (0 = ClientOptions::lanes); with more than one, the client sets
  // header.lanes itself, reads the Source and feeds the Sink in order as one call does.
  Timing ScanStream(const v1::ScanHeader& header, Source in, Sink out, Progress progress = {},
                    uint32_t lanes = 0);
  v1::ReduceResponse ReduceStream(const v1::ReduceHeader& header, Source in,
                                  Progress progress = {}, uint32_t lanes = 0);
  // No lanes: a histogram's input is one call (its counters are small; the wire is the limit).
  v1::HistogramResponse HistogramStream(const v1::HistogramHeader& header, Source in, Progress progress = {});
  // `keys` holds header.key_dtype keys, or one head byte per element with header.heads; each
  // request carries the keys of the same elements as its values (the chunk is cut so that
  // neither exceeds ClientOptions::chunk_bytes).
  Timing SegmentedScanStream(const v1::SegmentedScanHeader& header, Source values, Source keys, Sink out,
                             Progress progress = {});
  // Keys as SegmentedScanStream's. Each completed run's key goes to keys_out (raw key_dtype) and
  // its value to values_out (raw dtype), in order. Returns the final response (timing,
  // run_count, element_count).
  v1::ReduceByKeyResponse ReduceByKeyStream(const v1::ReduceByKeyHeader& header, Source values, Source keys,
                                            Sink keys_out, Sink values_out, Progress progress = {});
  // The whole input is sent, then the result comes back: keys to keys_out, values (with
  // KEYS_AND_VALUES, read from `values`) to values_out, int64 indices to indices_out, each as the
  // output asks (Sinks of parts not asked for are not called). Returns the final response.
  v1::SortResponse SortStream(const v1::SortHeader& header, Source keys, Source values, Sink keys_out,
                              Sink values_out, Sink indices_out, Progress progress = {});
  // A row-major matrix of header.cols columns, cut into chunks anywhere; the table comes back
  // row-major, in order.
  Timing Scan2DStream(const v1::Scan2DHeader& header, Source in, Sink out, Progress progress = {});
  // `flags` is read only when header.use_flags: each request carries the flags bytes of the
  // same element range as its values. Kept values go to values_out and kept indices (raw
  // int64) to indices_out, either of which may be empty when the output kind has none.
  // Returns the final response (timing, kept_count, element_count).
  v1::CompactResponse CompactStream(const v1::CompactHeader& header, Source values, Source flags,
                                    Sink values_out, Sink indices_out, Progress progress = {},
                                    uint32_t lanes = 0);

  // The same calls over a replayable input: retried as ClientOptions::retry says, each try
  // reading the input from its start; the Sinks get every result byte once, in order. Progress
  // starts again from zero with each try.
  Timing ScanStream(const v1::ScanHeader& header, const Replay& in, Sink out, Progress progress = {},
                    uint32_t lanes = 0);
  v1::ReduceResponse ReduceStream(const v1::ReduceHeader& header, const Replay& in, Progress progress = {},
                                  uint32_t lanes = 0);
  v1::HistogramResponse HistogramStream(const v1::HistogramHeader& header, const Replay& in, Progress progress = {});
  Timing SegmentedScanStream(const v1::SegmentedScanHeader& header, const Replay& values, const Replay& keys,
                             Sink out, Progress progress = {});
  v1::ReduceByKeyResponse ReduceByKeyStream(const v1::ReduceByKeyHeader& header, const Replay& values,
                                            const Replay& keys, Sink keys_out, Sink values_out,
                                            Progress progress = {});
  v1::SortResponse SortStream(const v1::SortHeader& header, const Replay& keys, const Replay& values,
                              Sink keys_out, Sink values_out, Sink indices_out, Progress progress = {});
  Timing Scan2DStream(const v1::Scan2DHeader& header, const Replay& in, Sink out, Progress progress = {});
  // `flags` may be empty when the header does not use flags.
  v1::CompactResponse CompactStream(const v1::CompactHeader& header, const Replay& values, const Replay& flags,
                                    Sink values_out, Sink indices_out, Progress progress = {}, uint32_t lanes = 0);

  // Shared memory (a server on this host started with --shm-dir; see shared_region.h): the
  // array is the first `bytes` bytes of `in`; only the header travels. Scan writes the result
  // into `out` (nullptr or `in` itself: in place); Compact writes kept values into values_out
  // and kept indices (int64) into indices_out as header.output asks, reading flags from `flags`
  // when header.use_flags (each output region needs room for the worst case: every element
  // kept). The header's other fields are sent as given, header.shared_memory.arena too (a region
  // the server should map populated and register for DMA on this first call). Errors as for the
  // streamed calls (RpcError).
  // Never retried: an in-place scan may have written over its input before it failed.
  // The SharedSpan forms name ranges of regions (SharedRegion::Span) or pieces of an arena
  // (shared_arena.h; their arena bit is sent); the SharedRegion forms name whole regions.
  Timing ScanShared(v1::ScanHeader header, const SharedSpan& in, const SharedSpan* out = nullptr);
  v1::ReduceResponse ReduceShared(v1::ReduceHeader header, const SharedSpan& in);
  v1::CompactResponse CompactShared(v1::CompactHeader header, const SharedSpan& in, const SharedSpan* flags,
                                    const SharedSpan* values_out, const SharedSpan* indices_out);
  Timing ScanShared(v1::ScanHeader header, const SharedRegion& in, size_t bytes, const SharedRegion* out = nullptr);
  v1::ReduceResponse ReduceShared(v1::ReduceHeader header, const SharedRegion& in, size_t bytes);
  v1::CompactResponse CompactShared(v1::CompactHeader header, const SharedRegion& in, size_t bytes,
                                    const SharedRegion* flags, const SharedRegion* values_out,
                                    const SharedRegion* indices_out);

  // Device memory (a server on this host and GPU started with --allow-device-ipc; see
  // device_array.h): `in` and the outputs are ranges of this process's device allocations,
  // exported (gpuscan/device_export.h); only the header travels and the server computes where
  // they lie. Scan writes into `out` (nullptr or `in`: in place); Compact reads flags and writes
  // kept values and indices as CompactShared does. The caller's writes to `in` must be complete
  // (its stream synchronized); the outputs are complete when the call returns. Never retried.
  Timing ScanDevice(v1::ScanHeader header, const DeviceArray& in, const DeviceArray* out = nullptr);
  // header.device_memory naming `in` as the input (device_uuid, handle, offset, bytes), for the
  // calls below and headers filled by hand.
  static v1::DeviceMemory DeviceMemoryOf(const DeviceArray& in);
  // A call whose header says where its arrays lie (device_memory, shared_memory): the header
  // goes alone with the half-close, on this thread, and the final response comes back (counts,
  // Timing). ScanDevice and its kin run these; the C API's gpuscan_header_call runs them for
  // other languages. Never retried.
  v1::ScanResponse ScanHeaderOnly(const v1::ScanHeader& header);
  v1::ReduceResponse ReduceHeaderOnly(const v1::ReduceHeader& header);
  v1::CompactResponse CompactHeaderOnly(const v1::CompactHeader& header);
  v1::HistogramResponse HistogramHeaderOnly(const v1::HistogramHeader& header);
  v1::SortResponse SortHeaderOnly(const v1::SortHeader& header);
  v1::ScanResponse SegmentedScanHeaderOnly(const v1::SegmentedScanHeader& header);
  v1::ReduceResponse ReduceDevice(v1::ReduceHeader header, const DeviceArray& in);
  v1::CompactResponse CompactDevice(v1::CompactHeader header, const DeviceArray& in, const DeviceArray* flags,
                                    const DeviceArray* values_out, const DeviceArray* indices_out);

  // Runs the kernel suite on the server's device; on_row gets each row as it is measured (on
  // the calling thread). An exception from on_row cancels the call and is rethrown.
  void Benchmark(const v1::BenchmarkRequest& request,
                 const std::function<void(const v1::BenchmarkRow&)>& on_row);

  // The diagnostic transport ceiling: streams total_bytes of payload in chunk_bytes messages
  // (0 = options().chunk_bytes) through the server's Transport RPC, which does no compute. With
  // echo the server sends every chunk back (read concurrently, as ScanStream does: the byte
  // pattern of a Scan); without it, one final response (the pattern of a Reduce). The payload
  // is `data` when given (total_bytes of an array that outlives the call, sent from where it
  // lies, as the calls send a SourceAt::Memory), else a fixed pattern copied into each message.
  TransportResult Transport(uint64_t total_bytes, bool echo, size_t chunk_bytes = 0, const void* data = nullptr);
  // The same over `lanes` concurrent Transport calls on the lanes' own connections (the
  // plain parallel-stream ceiling a striped call of that many lanes compares with); totals are
  // summed, wall_us is the whole run's. With `data`, lane l sends chunks l, l + lanes, ... of it.
  TransportResult TransportLanes(uint64_t total_bytes, bool echo, uint32_t lanes, size_t chunk_bytes = 0,
                                 const void* data = nullptr);

  // Resident arrays (src/resident_calls.cc; RemoteArray: remote_array.h): kept by a server with
  // --resident-bytes (else UNIMPLEMENTED), under ClientOptions::tenant, on the server the calls
  // reach (pick_first; not spread by round_robin or shards). One call each: lanes and shards do
  // not apply (ScanOptions asking for them: std::invalid_argument). Reading calls (GetArray,
  // ListArrays, Scan without keep, Reduce) are retried as RetryOptions says; those that make or
  // drop an array are not (a lost answer would have left an array behind or dropped it already).
  // Put: n elements of T, or `bytes` of raw little-endian elements of any dtype (narrow ones too).
  template <class T>
  RemoteArray Put(const T* data, size_t n, const ResidentOptions& options = {}) {
    return Put(DTypeOf<T>(), data, n * sizeof(T), options);
  }
  template <class T>
  RemoteArray Put(const std::vector<T>& x, const ResidentOptions& options = {}) {
    return Put(x.data(), x.size(), options);
  }
  RemoteArray Put(v1::DType dtype, const void* data, size_t bytes, const ResidentOptions& options = {});
  // A PutArray of the header as given and the Source's elements: the new array's info (not owned).
  v1::ArrayInfo PutStream(const v1::PutArrayHeader& header, Source in, Progress progress = {});
  // Elements [offset, offset + count) (count unset: to the end) of array `id`, as raw bytes to
  // `out` in order or returned; the array's info comes back or into *info.
  v1::ArrayInfo GetArrayStream(const std::string& id, Sink out, uint64_t offset = 0,
                               std::optional<uint64_t> count = std::nullopt, Progress progress = {});
  std::string GetArray(const std::string& id, uint64_t offset = 0, std::optional<uint64_t> count = std::nullopt,
                       v1::ArrayInfo* info = nullptr);
  v1::ArrayInfo DropArray(const std::string& id);  // its last info
  v1::ListArraysResponse ListArrays();  // every page: the tenant's arrays; the last page's counts
  v1::ListArraysResponse ListArrays(const v1::ListArraysRequest& request);  // one page
  // Scans of a resident array (the same bits as the streamed Scan of its elements): the values
  // (T its dtype, else std::invalid_argument), or the result kept as a new resident array.
  template <class T>
  ScanResult<T> Scan(const RemoteArray& in, const ScanOptions& options = {});
  RemoteArray Scan(const RemoteArray& in, const ScanOptions& options, const ResidentOptions& keep);
  template <class T>
  ReduceResult<T> Reduce(const RemoteArray& in, v1::Operator op);
  // The raw calls: header.resident as the caller set it; the results (unless kept) to the Sinks
  // (as the streamed calls'). Return the final response (timing, counts, and with keep the kept
  // arrays' infos). The other operations' typed forms: resident_ops.h.
  v1::ScanResponse ScanResident(const v1::ScanHeader& header, Sink out = {});
  v1::ReduceResponse ReduceResident(const v1::ReduceHeader& header);
  v1::ScanResponse SegmentedScanResident(const v1::SegmentedScanHeader& header, Sink out = {});
  v1::ScanResponse Scan2DResident(const v1::Scan2DHeader& header, Sink out = {});
  v1::HistogramResponse HistogramResident(const v1::HistogramHeader& header);
  v1::CompactResponse CompactResident(const v1::CompactHeader& header, Sink values_out = {}, Sink indices_out = {});
  v1::ReduceByKeyResponse ReduceByKeyResident(const v1::ReduceByKeyHeader& header, Sink keys_out = {},
                                              Sink values_out = {});
  v1::SortResponse SortResident(const v1::SortHeader& header, Sink keys_out = {}, Sink values_out = {},
                                Sink indices_out = {});

  // Pipelines (gpuscan/pipeline.h, PipelineHeader): stages run in one call on this Client's server,
  // on RemoteArrays, one streamed input and earlier stages' arrays. NewPipeline(): a builder.
  Pipeline NewPipeline();
  // The raw call: the header, then `input`'s bytes (header.input's elements) in chunks of
  // chunk_bytes; every response in order, the last the whole pipeline's (its Timing). The Source
  // form is one try; the Replay form is retried as RetryOptions says unless a stage keeps (a lost
  // answer may have kept arrays), each try reading the input from its start. Progress counts the
  // input sent and the data received.
  std::vector<v1::PipelineResponse> PipelineStream(const v1::PipelineHeader& header, Source input,
                                                   Progress progress = {});
  std::vector<v1::PipelineResponse> PipelineStream(const v1::PipelineHeader& header, const Replay& input = {},
                                                   Progress progress = {});

  v1::ServerInfo Info();
  // grpc.health.v1 status of `service` ("" = the whole server): "SERVING", "NOT_SERVING",
  // "UNKNOWN" or "SERVICE_UNKNOWN". Throws RpcError when the server cannot be reached.
  std::string Health(const std::string& service = "");

  // Cancels every call of this Client in flight now, from any thread: each fails with
  // RpcError CANCELLED and is not retried (calls that start afterwards are not affected). For a
  // caller that must stop at once (the C API's, on a Python caller's Ctrl-C); striped lanes
  // included, shards (other Clients) not.
  void CancelCalls();

  const ClientOptions& options() const { return options_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  // Fresh context for one call, with the deadline from options_.timeout, registered with calls_.
  detail::ContextPtr NewContext() const;
  // options_.chunk_bytes rounded down to whole elements of `element_size` (at least one).
  size_t ChunkBytes(size_t element_size) const;

  // Striped lanes (src/lanes.cc; their connections and UsableLanes: src/lane_pool.cc).
  uint32_t LanesFor(uint32_t lanes) const { return lanes ? lanes : (options_.lanes ? options_.lanes : 1); }
  // `wanted` (> 1) capped by the server's Limits.max_lanes, asked once per Client.
  uint32_t UsableLanes(uint32_t wanted);
  Timing ScanLanes(const v1::ScanHeader& header, Source in, Sink out, Progress progress, uint32_t lanes);
  v1::ReduceResponse ReduceLanes(const v1::ReduceHeader& header, Source in, Progress progress, uint32_t lanes);
  v1::CompactResponse CompactLanes(const v1::CompactHeader& header, Source values, Source flags, Sink values_out,
                                   Sink indices_out, Progress progress, uint32_t lanes);
  // One stub per lane, each on its own connection, all to one server; kept for later calls.
  class LanePool;
  std::unique_ptr<LanePool> lane_pool_;

  // Shards (src/shards.cc): the shards an array of n elements of T is split into: `wanted`
  // (0 = ClientOptions::shards), at most one per chunk.
  template <class T>
  uint32_t ShardsFor(uint32_t wanted, size_t n) const {
    const uint64_t per_chunk = ChunkBytes(sizeof(T)) / sizeof(T);
    const uint64_t chunks = (n + per_chunk - 1) / per_chunk;
    const uint64_t s = wanted ? wanted : (options_.shards ? options_.shards : 1);
    return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(s, chunks)));
  }
  template <class T>
  std::vector<size_t> ShardBounds(size_t n, uint32_t shards) const;  // cut on chunk boundaries
  std::unique_ptr<detail::ShardPool> shard_pool_;
  struct Operations;  // ServerInfo.operations, asked once (ServesOperation)
  std::unique_ptr<Operations> operations_;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GpuScan::Stub> stub_;
  std::unique_ptr<detail::CallRegistry> calls_;  // every call's contexts while in flight
};

}  // namespace gpuscan
