// The C API (gpuscan_capi.h) over gpuscan::Client.
#include "gpuscan_capi.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <memory>
#include <optional>
#include <string>

#include "gpuscan/client.h"
#include "retry.h"          // client/src: a call's deadline (DeadlineScope)
#include "typed_support.h"  // client/src: memory as a Replay

struct gpuscan_client {
  std::unique_ptr<gpuscan::Client> client;
};

namespace {

// `what` into a C buffer of `len` bytes, cut to fit, NUL-terminated (error messages, Timing names).
void Say(const std::string& what, char* dst, size_t len) {
  if (!dst || len == 0) return;
  const size_t n = std::min(what.size(), len - 1);
  std::memcpy(dst, what.data(), n);
  dst[n] = '\0';
}

void Fill(const gpuscan::Timing& t, gpuscan_timing* out) {
  if (!out) return;
  *out = gpuscan_timing{};
  out->receive_us = t.receive_us;
  out->queue_us = t.queue_us;
  out->h2d_us = t.h2d_us;
  out->kernel_us = t.kernel_us;
  out->d2h_us = t.d2h_us;
  out->send_us = t.send_us;
  out->total_us = t.total_us;
  out->bytes_in = t.bytes_in;
  out->bytes_out = t.bytes_out;
  out->chunks = t.chunks;
  Say(t.engine, out->engine, sizeof(out->engine));
  Say(t.device, out->device, sizeof(out->device));
  Say(t.algorithm, out->algorithm, sizeof(out->algorithm));
}

// Runs f, turning what it throws into a status code and message. timeout_ms (see the header):
// the deadline of every context the call makes on this thread, its retries' included.
template <class F>
int Guard(int64_t timeout_ms, F&& f, char* error, size_t error_len) {
  try {
    std::optional<gpuscan::detail::DeadlineScope> deadline;
    if (timeout_ms > 0) {
      deadline.emplace(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    } else if (timeout_ms < 0) {
      deadline.emplace(std::nullopt);
    }
    f();
    return 0;
  } catch (const gpuscan::RpcError& e) {
    Say(e.message(), error, error_len);
    return static_cast<int>(e.code());
  } catch (const std::invalid_argument& e) {
    Say(e.what(), error, error_len);
    return static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  } catch (const std::exception& e) {
    Say(e.what(), error, error_len);
    return static_cast<int>(grpc::StatusCode::INTERNAL);
  }
}

}  // namespace

extern "C" {

int gpuscan_capi_version(void) { return GPUSCAN_CAPI_VERSION; }

gpuscan_client* gpuscan_client_new(const gpuscan_options* options, char* error, size_t error_len) {
  auto handle = std::make_unique<gpuscan_client>();
  const int code = Guard(
      0,
      [&] {
        if (!options || !options->target) throw std::invalid_argument("gpuscan: options.target is required");
        gpuscan::ClientOptions o;
        o.target = options->target;
        if (options->chunk_bytes) o.chunk_bytes = options->chunk_bytes;
        o.timeout = std::chrono::milliseconds(options->timeout_ms);
        o.lanes = options->lanes ? options->lanes : 1;
        o.retry.attempts = options->attempts ? options->attempts : 1;
        if (options->backoff_initial_ms > 0) o.retry.initial_backoff = std::chrono::milliseconds(options->backoff_initial_ms);
        if (options->backoff_max_ms > 0) o.retry.max_backoff = std::chrono::milliseconds(options->backoff_max_ms);
        if (options->load_balancing_policy) o.load_balancing_policy = options->load_balancing_policy;
        handle->client = std::make_unique<gpuscan::Client>(o);
      },
      error, error_len);
  return code == 0 ? handle.release() : nullptr;
}

void gpuscan_client_free(gpuscan_client* client) { delete client; }

void gpuscan_cancel_calls(gpuscan_client* client) { client->client->CancelCalls(); }

int gpuscan_compact(gpuscan_client* client, const void* header, size_t header_len, const void* in,
                    const uint8_t* flags, uint64_t n, uint32_t lanes, void* values_out, int64_t* indices_out,
                    uint64_t* kept, gpuscan_timing* timing, int64_t timeout_ms, char* error, size_t error_len) {
  return Guard(
      timeout_ms,
      [&] {
        gpuscan::v1::CompactHeader h;
        if (!h.ParseFromArray(header, static_cast<int>(header_len))) {
          throw std::invalid_argument("gpuscan: header is not a serialized CompactHeader");
        }
        h.set_element_count(n);
        const size_t esize = gpuscan::DTypeSize(h.dtype());
        if (esize == 0) throw std::invalid_argument("gpuscan: header.dtype is not an element type");
        // Results land by position in the caller's buffers of room for n elements (striped
        // lanes write them at once).
        auto into = [n](void* dst, size_t element_bytes) -> gpuscan::Sink {
          if (!dst) return {};
          return gpuscan::SinkAt::Memory(dst, n * element_bytes);
        };
        const gpuscan::Replay flags_in =
            h.use_flags() && flags ? gpuscan::detail::MemoryReplay(flags, n) : gpuscan::Replay{};
        const gpuscan::v1::CompactResponse last = client->client->CompactStream(
            h, gpuscan::detail::MemoryReplay(in, n * esize), flags_in, into(values_out, esize),
            into(indices_out, sizeof(int64_t)), {}, lanes);
        *kept = last.kept_count();
        Fill(gpuscan::FromProto(last.timing()), timing);
      },
      error, error_len);
}

int gpuscan_header_call(gpuscan_client* client, int rpc, const void* request, size_t request_len, void* response,
                        size_t response_cap, size_t* response_len, int64_t timeout_ms, char* error,
                        size_t error_len) {
  return Guard(
      timeout_ms,
      [&] {
        // The request's header, parsed as the RPC's message, and the final response back.
        auto run = [&](auto message, auto call) {
          if (!message.ParseFromArray(request, static_cast<int>(request_len))) {
            throw std::invalid_argument("gpuscan: request is not a serialized " + message.GetTypeName());
          }
          const std::string out = call(message.header()).SerializeAsString();
          *response_len = out.size();
          if (out.size() > response_cap) {
            throw gpuscan::RpcError(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    "gpuscan: the response has " + std::to_string(out.size()) + " bytes, room for " +
                                        std::to_string(response_cap));
          }
          std::memcpy(response, out.data(), out.size());
        };
        gpuscan::Client& c = *client->client;
        switch (rpc) {
          case GPUSCAN_RPC_SCAN:
            return run(gpuscan::v1::ScanRequest{}, [&](const auto& h) { return c.ScanHeaderOnly(h); });
          case GPUSCAN_RPC_REDUCE:
            return run(gpuscan::v1::ReduceRequest{}, [&](const auto& h) { return c.ReduceHeaderOnly(h); });
          case GPUSCAN_RPC_COMPACT:
            return run(gpuscan::v1::CompactRequest{}, [&](const auto& h) { return c.CompactHeaderOnly(h); });
          case GPUSCAN_RPC_HISTOGRAM:
            return run(gpuscan::v1::HistogramRequest{}, [&](const auto& h) { return c.HistogramHeaderOnly(h); });
          case GPUSCAN_RPC_SORT:
            return run(gpuscan::v1::SortRequest{}, [&](const auto& h) { return c.SortHeaderOnly(h); });
          case GPUSCAN_RPC_SEGMENTED_SCAN:
            return run(gpuscan::v1::SegmentedScanRequest{}, [&](const auto& h) { return c.SegmentedScanHeaderOnly(h); });
          default: throw std::invalid_argument("gpuscan: rpc " + std::to_string(rpc) + " is none of GPUSCAN_RPC_*");
        }
      },
      error, error_len);
}

int gpuscan_scan(gpuscan_client* client, int dtype, int op, int exclusive, int algorithm, const void* in, void* out,
                 uint64_t n, uint32_t lanes, gpuscan_timing* timing, int64_t timeout_ms, char* error,
                 size_t error_len) {
  return Guard(
      timeout_ms,
      [&] {
        gpuscan::ScanOptions so;
        so.op = static_cast<gpuscan::v1::Operator>(op);
        so.exclusive = exclusive != 0;
        so.algorithm = static_cast<gpuscan::v1::ScanAlgorithm>(algorithm);
        so.lanes = lanes;
        gpuscan::WithElementType(static_cast<gpuscan::v1::DType>(dtype), [&](auto t) {
          using T = decltype(t);
          Fill(client->client->ScanInto(static_cast<const T*>(in), n, static_cast<T*>(out), so), timing);
        });
      },
      error, error_len);
}

int gpuscan_scan_header(gpuscan_client* client, const void* header, size_t header_len, const void* in,
                        uint64_t in_bytes, void* out, uint64_t out_bytes, gpuscan_timing* timing,
                        int64_t timeout_ms, char* error, size_t error_len) {
  return Guard(
      timeout_ms,
      [&] {
        gpuscan::v1::ScanHeader h;
        if (!h.ParseFromArray(header, static_cast<int>(header_len))) {
          throw std::invalid_argument("header is not a serialized gpuscan.v1.ScanHeader");
        }
        gpuscan::detail::BufferSink sink(out, out_bytes, "the server");
        Fill(client->client->ScanStream(h, gpuscan::detail::MemoryReplay(in, in_bytes), sink.at(), {}, 1), timing);
        sink.CheckFull();
      },
      error, error_len);
}

int gpuscan_reduce(gpuscan_client* client, int dtype, int op, const void* in, uint64_t n, uint32_t lanes,
                   void* value, gpuscan_timing* timing, int64_t timeout_ms, char* error, size_t error_len) {
  return Guard(
      timeout_ms,
      [&] {
        gpuscan::WithElementType(static_cast<gpuscan::v1::DType>(dtype), [&](auto t) {
          using T = decltype(t);
          const gpuscan::ReduceResult<T> r =
              client->client->Reduce(static_cast<const T*>(in), n, static_cast<gpuscan::v1::Operator>(op), lanes);
          std::memcpy(value, &r.value, sizeof(T));
          Fill(r.timing, timing);
        });
      },
      error, error_len);
}

}  // extern "C"
