/* gpuscan C API: the C++ client's scan and reduce over arrays in memory, for callers that are
 * not C++ (the Python package loads it with ctypes to move data outside the GIL). A handle keeps
 * its channel and lane connections for later calls; calls on one handle may run at once.
 * Every call returns a gRPC status code (0 = OK) and, otherwise, the message in `error`.
 *
 * timeout_ms, every call's: its own deadline, every try and backoff included: > 0 that many
 * milliseconds from now; 0 the handle's (gpuscan_options.timeout_ms); < 0 none. Past it the call
 * returns DEADLINE_EXCEEDED (4). */
#ifndef GPUSCAN_CAPI_H_
#define GPUSCAN_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUSCAN_CAPI __attribute__((visibility("default")))

typedef struct gpuscan_client gpuscan_client;

/* The calls' signatures: 2 since every call takes its timeout_ms. A caller binding them at run
 * time (ctypes) checks gpuscan_capi_version() == GPUSCAN_CAPI_VERSION before calling any. */
#define GPUSCAN_CAPI_VERSION 2
GPUSCAN_CAPI int gpuscan_capi_version(void);

typedef struct gpuscan_options {
  const char* target;          /* any gRPC target */
  uint64_t chunk_bytes;        /* bytes per request message; 0 = 1 MiB */
  int64_t timeout_ms;          /* per call, every retry included; 0 = none */
  uint32_t lanes;              /* striped lanes per call; 0 or 1 = one call */
  uint32_t attempts;           /* tries per call (retries + 1); 0 = 1 */
  int64_t backoff_initial_ms;  /* wait before the second try */
  int64_t backoff_max_ms;      /* the waits double up to this */
  const char* load_balancing_policy; /* NULL or "" = gRPC's default */
} gpuscan_options;

/* The server's Timing of a call (microseconds, bytes), as the C++ Timing. */
typedef struct gpuscan_timing {
  uint64_t receive_us, queue_us, h2d_us, kernel_us, d2h_us, send_us, total_us;
  uint64_t bytes_in, bytes_out, chunks;
  char engine[32], device[128], algorithm[64];
} gpuscan_timing;

/* NULL with the reason in `error` when the options are unusable. */
GPUSCAN_CAPI gpuscan_client* gpuscan_client_new(const gpuscan_options* options, char* error, size_t error_len);
GPUSCAN_CAPI void gpuscan_client_free(gpuscan_client* client);

/* dtype, op, algorithm: the wire enums' numbers (gpuscan.proto: DType, Operator, ScanAlgorithm).
 * Writes n scanned elements to `out` (not overlapping `in`). lanes: 0 = the handle's. */
GPUSCAN_CAPI int gpuscan_scan(gpuscan_client* client, int dtype, int op, int exclusive, int algorithm, const void* in,
                              void* out, uint64_t n, uint32_t lanes, gpuscan_timing* timing, int64_t timeout_ms,
                              char* error, size_t error_len);
/* A scan whose header is given: `header` a serialized gpuscan.v1.ScanHeader (a narrow dtype with
 * its output_dtype, say), `in` its input of in_bytes, results (out_bytes of room: in elements x
 * the output's element size) to `out`. One stream, no lanes. */
GPUSCAN_CAPI int gpuscan_scan_header(gpuscan_client* client, const void* header, size_t header_len, const void* in,
                                     uint64_t in_bytes, void* out, uint64_t out_bytes, gpuscan_timing* timing,
                                     int64_t timeout_ms, char* error, size_t error_len);
/* Writes one element of the dtype to `value`. */
GPUSCAN_CAPI int gpuscan_reduce(gpuscan_client* client, int dtype, int op, const void* in, uint64_t n, uint32_t lanes,
                   void* value, gpuscan_timing* timing, int64_t timeout_ms, char* error, size_t error_len);


/* Stream compaction. `header`: a serialized gpuscan.v1.CompactHeader (dtype, the predicate or
 * use_flags, output); element_count is set to n. `flags` (n bytes, nonzero = keep) when the header
 * says use_flags, else NULL. Kept values go to `values_out` and their int64 indices to
 * `indices_out` (each of room for n elements; NULL when the header's output leaves it out);
 * *kept says how many. */
GPUSCAN_CAPI int gpuscan_compact(gpuscan_client* client, const void* header, size_t header_len, const void* in,
                                 const uint8_t* flags, uint64_t n, uint32_t lanes, void* values_out,
                                 int64_t* indices_out, uint64_t* kept, gpuscan_timing* timing, int64_t timeout_ms,
                                 char* error, size_t error_len);

/* A call whose header says where its arrays lie (header.device_memory or header.shared_memory):
 * `request` is a serialized ScanRequest, ReduceRequest, CompactRequest, HistogramRequest,
 * SortRequest or SegmentedScanRequest (rpc GPUSCAN_RPC_*) carrying the header alone; it goes out with the half-close and
 * the final response comes back serialized (ScanResponse, ...) into `response`, room for
 * `response_cap` bytes, its length in *response_len (RESOURCE_EXHAUSTED when it does not fit).
 * Never retried. */
#define GPUSCAN_RPC_SCAN 0
#define GPUSCAN_RPC_REDUCE 1
#define GPUSCAN_RPC_COMPACT 2
#define GPUSCAN_RPC_HISTOGRAM 3
#define GPUSCAN_RPC_SORT 4
#define GPUSCAN_RPC_SEGMENTED_SCAN 5
GPUSCAN_CAPI int gpuscan_header_call(gpuscan_client* client, int rpc, const void* request, size_t request_len,
                                     void* response, size_t response_cap, size_t* response_len, int64_t timeout_ms,
                                     char* error, size_t error_len);

/* Cancels every call of this handle in flight now, from any thread: each returns CANCELLED (1)
 * and is not retried. For a caller that must stop at once (Python's Ctrl-C). */
GPUSCAN_CAPI void gpuscan_cancel_calls(gpuscan_client* client);

#ifdef __cplusplus
}
#endif

#endif /* GPUSCAN_CAPI_H_ */
