// Internal: the raw RPCs' messages (Scan, Reduce, Histogram, Compact, SegmentedScan, ReduceByKey,
// Transport) as the client sends and reads them (gpuscan/wire), so
// an array's bytes are not copied into a protobuf string on the way out nor out of one on the way
// in. A request's data is a slice the Source filled (gRPC sends it by reference); a response's data
// stays in the slices gRPC received it in, and goes to the Sink from there.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
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

// The Source's next chunk (up to `chunk` bytes) in a fresh slice; empty once it has ended.
inline grpc::Slice NextChunk(const Source& in, size_t chunk, bool& ended) {
  if (ended) return grpc::Slice();
  grpc::Slice slice(chunk);
  const size_t n = ReadFull(in, reinterpret_cast<char*>(const_cast<uint8_t*>(slice.begin())), chunk, ended);
  return n == chunk ? slice : slice.sub(0, n);
}

// Chunk g (of `chunk` bytes each) of an input read by position, in a fresh slice; empty past its end.
inline grpc::Slice ChunkAt(const SourceAt& in, uint64_t g, size_t chunk) {
  const uint64_t offset = g * chunk;
  if (offset >= in.bytes()) return grpc::Slice();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, in.bytes() - offset));
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

// One raw Transport call of `total_bytes` on `channel` (diagnostic_calls.cc); wall_us left 0.
TransportResult RunTransport(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                             uint64_t total_bytes, bool echo, size_t chunk_bytes);

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
