// ResidentFeed: header.resident for what has no device path (SegmentedScan's float SUM/PRODUCT
// and the cpu engine's segmented scans, ReduceByKey, Scan2D, narrow dtypes on every RPC). The
// resident inputs are read back a chunk at a time, values and their keys or flags cut at the same
// element, and handed to the call's streamed Process as a streamed request would be; so the
// results are the streamed call's bit for bit. Only one chunk of the inputs is on the host at a
// time. A kept result is written into its resident memory as it is made.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/narrow.h"
#include "service/payload.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/validate.h"

namespace gpuscan::server {

class ResidentFeed {
 public:
  ResidentFeed(ResidentStore& store, const ResidentCall& call, uint64_t chunk_bytes, PayloadPool& payloads)
      : store_(store), call_(call), chunk_bytes_(chunk_bytes), payloads_(payloads) {}

  // Reads values (and call.keys or call.flags, the one set) chunk by chunk: each chunk holds at
  // most chunk_bytes of the widest input; f(values, second) in order (second empty when the call
  // has one input). CANCELLED as soon as cancelled() says so between chunks.
  using Chunk = std::function<void(Payload values, Payload second)>;
  grpc::Status Each(const std::function<bool()>& cancelled, const Chunk& f);

  bool keep() const { return call_.keep; }

  // keep: the memory the result goes into, `bytes` at most. exact: the result has that size
  // (ResidentStore::Allocate, counted from now); else scratch on the input's device that Keep
  // cuts to the size written (ReduceByKey's runs).
  grpc::Status OpenResult(uint64_t bytes, bool exact);
  // The next bytes of the result, after those appended before.
  void Append(const void* data, uint64_t bytes);
  // Registers what was appended as a kept array of `dtype`: its ArrayInfo.
  grpc::Status Keep(int dtype, v1::ArrayInfo* info);

  // A device path's result (ResidentOutput's memory, `count` elements of `dtype`): kept, or read
  // back in chunks into replies (a payload `data`, msg.offset), counted in *bytes_out.
  template <class Reply>
  void KeepOrReadBack(std::shared_ptr<engine::ResidentMemory> result, int dtype, uint64_t count,
                      std::vector<Reply>& out, uint64_t* bytes_out, v1::ArrayInfo* kept) {
    if (call_.keep) {
      *kept = store_.Add(call_.tenant, dtype, count, std::move(result), call_.ttl_ms, call_.label);
      return;
    }
    const size_t size = WireDTypeSize(dtype);
    ReadBack(*result, count * size, size, chunk_bytes_, payloads_, [&](Payload p, uint64_t first) {
      Reply& reply = out.emplace_back();
      *bytes_out += p.size();
      reply.data = std::move(p);
      reply.msg.set_offset(first);
    });
  }

 private:
  ResidentStore& store_;
  const ResidentCall& call_;
  uint64_t chunk_bytes_;
  PayloadPool& payloads_;
  std::shared_ptr<engine::ResidentMemory> result_;
  bool exact_ = true;
  uint64_t written_ = 0;
};

// A resident call's session (none: a streamed one's): on the engine of the device its arrays lie
// on, named after it (OpenSession's rule, device_memory.h). make(engine) opens it.
template <class Make>
auto OpenFedSession(engine::Engine& engine, const std::optional<ResidentCall>& call, Make&& make) {
  if (!call) return make(engine);
  const engine::ResidentMemory& m = *call->values->memory;
  auto session = make(*m.engine);
  if (!m.device.empty()) session->Place(m.device);
  return session;
}

// The dtype of a call's results (a kept array's): the engine's; FLOAT16 for a narrow call's
// FLOAT16 output.
inline int ResultDType(const std::optional<NarrowInput>& narrow, engine::DType engine) {
  return narrow && narrow->half_out ? v1::DTYPE_FLOAT16 : ToWire(engine);
}

// The fallback of a call with one result array (Scan, SegmentedScan, Scan2D): the inputs fed to
// process(values, second, replies), the call's streamed Process on them; with keep each reply's
// bytes (bytes_of(reply): a payload or string) go into the kept array of out_dtype, `out_bytes`
// in all, else the replies stream back (appended to `out`).
template <class Reply, class Process, class BytesOf>
grpc::Status FeedOneArray(ResidentFeed& feed, const std::function<bool()>& cancelled, int out_dtype,
                          uint64_t out_bytes, std::vector<Reply>& out, Process&& process, BytesOf&& bytes_of,
                          v1::ArrayInfo* kept) {
  if (feed.keep()) {
    if (auto s = feed.OpenResult(out_bytes, true); !s.ok()) return s;
  }
  std::vector<Reply> made;
  auto s = feed.Each(cancelled, [&](Payload values, Payload second) {
    process(std::move(values), std::move(second), made);
    for (Reply& r : made) {
      if (!feed.keep()) {
        out.push_back(std::move(r));
        continue;
      }
      const auto& bytes = bytes_of(r);
      feed.Append(bytes.data(), bytes.size());
    }
    made.clear();
  });
  if (!s.ok() || !feed.keep()) return s;
  return feed.Keep(out_dtype, kept);
}

}  // namespace gpuscan::server
