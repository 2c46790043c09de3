// Internal: the raw RPCs' messages (Scan, Reduce, Histogram, Compact, SegmentedScan, ReduceByKey,
// Transport) as the client sends and reads them (gpuscan/wire), so
// an array's bytes are not copied into a protobuf string on the way out nor out of one on the way
// in. A request's data is a slice the Source filled (gRPC sends it by reference); a response's data
// stays in the slices gRPC received it in, and goes to the Sink from there.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <gpuscan/wire/fields.h>
#include <grpcpp/channel.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/sync_stream.h>

#include "gpuscan/client.h"
#include "gpuscan/v1/gpuscan.grpc.pb.h"
#include "stream_driver.h"

namespace gpuscan::detail {

// The bytes fields a raw message carries outside protobuf: its data, and Compact's second one.
template <class Msg>
struct RawFields {
  static constexpr int kFirst = Msg::kDataFieldNumber, kSecond = 0;
};
template <>
struct RawFields<v1::CompactRequest> {
  static constexpr int kFirst = v1::CompactRequest::kValuesFieldNumber;
  static constexpr int kSecond = v1::CompactRequest::kFlagsFieldNumber;
};
template <>
struct RawFields<v1::CompactResponse> {
  static constexpr int kFirst = v1::CompactResponse::kValuesFieldNumber;
  static constexpr int kSecond = v1::CompactResponse::kIndicesFieldNumber;
};
template <>
struct RawFields<v1::SegmentedScanRequest> {
  static constexpr int kFirst = v1::SegmentedScanRequest::kDataFieldNumber;
  static constexpr int kSecond = v1::SegmentedScanRequest::kKeysFieldNumber;
};
template <>
struct RawFields<v1::ReduceByKeyRequest> {
  static constexpr int kFirst = v1::ReduceByKeyRequest::kDataFieldNumber;
  static constexpr int kSecond = v1::ReduceByKeyRequest::kKeysFieldNumber;
};
template <>
struct RawFields<v1::ReduceByKeyResponse> {
  static constexpr int kFirst = v1::ReduceByKeyResponse::kKeysFieldNumber;
  static constexpr int kSecond = v1::ReduceByKeyResponse::kValuesFieldNumber;
};

// A request: the message without its data, and the data as one slice (and Compact's flags).
template <class Msg>
struct RawOut {
  Msg msg;
  grpc::Slice data;
  grpc::Slice second;
  void clear_header() { msg.clear_header(); }
};

// A response: the message without its data, and where the data's bytes lie (split.field; for
// Compact the values there and the indices in split.second).
template <class Msg>
struct RawIn {
  Msg msg;
  wire::SplitMessage split;
  size_t data_bytes() const { return split.field_bytes; }
  size_t second_bytes() const { return split.second_bytes; }
  bool has_timing() const { return msg.has_timing(); }
};

// Slices that point into the caller's array (SourceAt::Memory) instead of holding a copy of it.
// A request's slices stay referenced until gRPC has written their bytes to the socket, which can
// be after the call's stream is gone, so a call makes one of these before its streams (it is
// destroyed after them) and its destructor waits until every borrowed slice is released: the
// caller's array outlives them all. One copy of every input byte fewer on the client, and no
// second pass over a large array through the CPU's caches.
class BorrowedSlices {
 public:
  BorrowedSlices() = default;
  BorrowedSlices(const BorrowedSlices&) = delete;
  BorrowedSlices& operator=(const BorrowedSlices&) = delete;
  ~BorrowedSlices() {
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait(lock, [this] { return live_ == 0; });
  }
  grpc::Slice Borrow(const char* data, size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++live_;
    }
    return grpc::Slice(const_cast<char*>(data), n, &Release, this);  // gRPC only reads it
  }

 private:
  static void Release(void* self) {
    auto* b = static_cast<BorrowedSlices*>(self);
    std::lock_guard<std::mutex> lock(b->mu_);
    if (--b->live_ == 0) b->released_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable released_;
  uint64_t live_ = 0;
};

// The calls' view of a SourceAt::Memory array (nullptr for any other SourceAt), and its bytes
// handed out in place as a Source would copy them.
struct SourceAtAccess {
  static const char* Memory(const SourceAt& at) { return at.memory_; }
  static size_t Take(SourceAt& at, size_t max_bytes, const char** where) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, at.bytes_ - at.pos_));
    *where = at.memory_ + at.pos_;
    at.pos_ += n;
    return n;
  }
};

// The Source's next chunk (up to `chunk` bytes): borrowed from the caller's array when the
// Source is a SourceAt::Memory and the call keeps `borrowed`, else read into a fresh slice;
// empty once it has ended.
inline grpc::Slice NextChunk(Source& in, size_t chunk, bool& ended, BorrowedSlices* borrowed = nullptr) {
  if (ended) return grpc::Slice();
  SourceAt* at = borrowed != nullptr ? in.target<SourceAt>() : nullptr;
  if (at != nullptr && SourceAtAccess::Memory(*at) != nullptr) {
    const char* where = nullptr;
    const size_t n = SourceAtAccess::Take(*at, chunk, &where);
    if (n < chunk) ended = true;  // as ReadFull: the Source had no more
    return n > 0 ? borrowed->Borrow(where, n) : grpc::Slice();
  }
  grpc::Slice slice(chunk);
  const size_t n = ReadFull(in, reinterpret_cast<char*>(const_cast<uint8_t*>(slice.begin())), chunk, ended);
  return n == chunk ? slice : slice.sub(0, n);
}

// Chunk g (of `chunk` bytes each) of an input read by position: borrowed as NextChunk's, else
// in a fresh slice; empty past its end.
inline grpc::Slice ChunkAt(const SourceAt& in, uint64_t g, size_t chunk, BorrowedSlices* borrowed = nullptr) {
  const uint64_t offset = g * chunk;
  if (offset >= in.bytes()) return grpc::Slice();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, in.bytes() - offset));
  if (borrowed != nullptr && SourceAtAccess::Memory(in) != nullptr) {
    return borrowed->Borrow(SourceAtAccess::Memory(in) + offset, n);
  }
  grpc::Slice slice(n);
  in.ReadAt(offset, const_cast<uint8_t*>(slice.begin()), n);
  return slice;
}

// Writes a response's data pieces to a SinkAt from byte `offset` on.
inline void WritePieces(const SinkAt& out, uint64_t offset, const std::vector<wire::Piece>& pieces) {
  for (const wire::Piece& p : pieces) {
    out.WriteAt(offset, p.data, p.size);
    offset += p.size;
  }
}

// Gives a response's data pieces to a Sink in whole elements: gRPC cuts slices anywhere, so an
// element split between two pieces is joined in a small buffer first. With `gather`, a response
// cut into several pieces is first copied whole into one buffer and given to the Sink at once:
// a file's Sink makes a system call a piece, and gRPC's pieces are frames of ~16 KiB.
class ElementFeeder {
 public:
  ElementFeeder(const Sink& out, size_t element_size, bool gather = false)
      : out_(out), esize_(element_size), gather_(gather) {}

  void Feed(const std::vector<wire::Piece>& pieces) {
    if (!out_) return;
    if (gather_ && pieces.size() > 1) {
      size_t total = 0;
      for (const wire::Piece& p : pieces) total += p.size;
      if (whole_bytes_ < total) {
        whole_.reset(new char[total]);
        whole_bytes_ = total;
      }
      wire::Gather(pieces, whole_.get());
      FeedPieces({wire::Piece{whole_.get(), total}});
      return;
    }
    FeedPieces(pieces);
  }

 private:
  void FeedPieces(const std::vector<wire::Piece>& pieces) {
    for (const wire::Piece& p : pieces) {
      const char* at = p.data;
      size_t left = p.size;
      if (held_ > 0) {  // finish the element cut at the end of the last piece
        const size_t take = std::min(left, esize_ - held_);
        std::memcpy(partial_ + held_, at, take);
        held_ += take;
        at += take;
        left -= take;
        if (held_ < esize_) continue;
        out_(partial_, esize_);
        held_ = 0;
      }
      const size_t whole = left / esize_ * esize_;
      if (whole) out_(at, whole);
      held_ = left - whole;
      std::memcpy(partial_, at + whole, held_);
    }
    if (held_ != 0) throw std::runtime_error("gpuscan: a response's data is not whole elements");
  }

  const Sink& out_;
  size_t esize_;
  bool gather_;
  std::unique_ptr<char[]> whole_;  // gather: one response's bytes
  size_t whole_bytes_ = 0;
  char partial_[16];
  size_t held_ = 0;
};

// A bidirectional stream of the raw method `name` ("/gpuscan.v1.GpuScan/Scan") on `channel`.
template <class ReqMsg, class RespMsg>
std::unique_ptr<grpc::ClientReaderWriter<RawOut<ReqMsg>, RawIn<RespMsg>>> RawBidi(
    const std::shared_ptr<grpc::Channel>& channel, const char* name, grpc::ClientContext* ctx) {
  grpc::internal::RpcMethod method(name, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  return std::unique_ptr<grpc::ClientReaderWriter<RawOut<ReqMsg>, RawIn<RespMsg>>>(
      grpc::internal::ClientReaderWriterFactory<RawOut<ReqMsg>, RawIn<RespMsg>>::Create(channel.get(), method, ctx));
}

// A client-streaming stream of the raw method `name`, its one response read into *response.
template <class ReqMsg, class Resp>
std::unique_ptr<grpc::ClientWriter<RawOut<ReqMsg>>> RawWriter(const std::shared_ptr<grpc::Channel>& channel,
                                                               const char* name, grpc::ClientContext* ctx,
                                                               Resp* response) {
  grpc::internal::RpcMethod method(name, grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
  return std::unique_ptr<grpc::ClientWriter<RawOut<ReqMsg>>>(
      grpc::internal::ClientWriterFactory<RawOut<ReqMsg>>::Create(channel.get(), method, ctx, response));
}

// Where a Transport call's bytes come from: a fixed pattern copied into each message (`array`
// null), or chunks first_chunk, first_chunk + stride, ... of a SourceAt::Memory array, borrowed
// by ChunkAt as the calls send one (the ceiling of the same bytes sent the same way).
struct TransportInput {
  const SourceAt* array = nullptr;
  uint64_t first_chunk = 0;
  uint64_t stride = 1;
};

// One raw Transport call of `total_bytes` on `channel` (diagnostic_calls.cc); wall_us left 0.
// `borrowed` must outlive ctx when input.array is set.
TransportResult RunTransport(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                             uint64_t total_bytes, bool echo, size_t chunk_bytes, const TransportInput& input = {},
                             BorrowedSlices* borrowed = nullptr);

inline constexpr const char* kScanMethod = "/gpuscan.v1.GpuScan/Scan";
inline constexpr const char* kReduceMethod = "/gpuscan.v1.GpuScan/Reduce";
inline constexpr const char* kCompactMethod = "/gpuscan.v1.GpuScan/Compact";
inline constexpr const char* kTransportMethod = "/gpuscan.v1.GpuScan/Transport";
inline constexpr const char* kHistogramMethod = "/gpuscan.v1.GpuScan/Histogram";
inline constexpr const char* kSegmentedScanMethod = "/gpuscan.v1.GpuScan/SegmentedScan";
inline constexpr const char* kReduceByKeyMethod = "/gpuscan.v1.GpuScan/ReduceByKey";

}  // namespace gpuscan::detail

namespace grpc {

// How gRPC writes a RawOut and reads a RawIn (each direction only ever does the one).
template <class Msg>
class SerializationTraits<gpuscan::detail::RawOut<Msg>, void> {
 public:
  static Status Serialize(const gpuscan::detail::RawOut<Msg>& m, ByteBuffer* buffer, bool* own_buffer) {
    using Fields = gpuscan::detail::RawFields<Msg>;
    *buffer = gpuscan::wire::Join(m.msg, Fields::kFirst, m.data, Fields::kSecond, m.second);
    *own_buffer = true;
    return Status::OK;
  }
  static Status Deserialize(ByteBuffer*, gpuscan::detail::RawOut<Msg>*) {
    return Status(StatusCode::INTERNAL, "gpuscan: a request is never read");
  }
};

template <class Msg>
class SerializationTraits<gpuscan::detail::RawIn<Msg>, void> {
 public:
  static Status Serialize(const gpuscan::detail::RawIn<Msg>&, ByteBuffer*, bool*) {
    return Status(StatusCode::INTERNAL, "gpuscan: a response is never written");
  }
  static Status Deserialize(ByteBuffer* buffer, gpuscan::detail::RawIn<Msg>* m) {
    m->msg.Clear();
    using Fields = gpuscan::detail::RawFields<Msg>;
    Status s = gpuscan::wire::Parse(*buffer, Fields::kFirst, "the response", &m->msg, &m->split, Fields::kSecond);
    buffer->Clear();
    return s;
  }
};

}  // namespace grpc
