// The byte-level streaming calls: ScanStream, ReduceStream, CompactStream, SegmentedScanStream,
// ReduceByKeyStream, SortStream, Scan2DStream. Each request holds
// up to one chunk of whole elements; the first also carries the header (alone if the input is
// empty).
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "gpuscan/client.h"
#include "raw_messages.h"
#include "stream_driver.h"
#include "typed_support.h"

namespace gpuscan {

using detail::ProgressTracker;
using detail::ReadFull;

namespace {

// Replaces a typed message's bytes field with up to `bytes` read from the Source, read straight
// into the field's own buffer (no extra copy); returns how many it read.
size_t ReadInto(std::string* field, Source& in, size_t bytes, bool& ended) {
  field->resize(bytes);
  field->resize(ReadFull(in, field->data(), bytes, ended));
  return field->size();
}

// Writes the Source's chunks as raw requests, each a slice that gRPC sends as it is (borrowed
// from the caller's array, or filled from the Source: NextChunk). The header rides in `req` with
// the first (sent alone when the input is empty). Stops early when the call is over (its Finish
// says why).
template <class Msg, class Stream>
void WriteRawChunks(Stream& stream, detail::RawOut<Msg> req, Source& in, size_t chunk, ProgressTracker& tracker,
                    detail::BorrowedSlices& borrowed) {
  bool ended = !in;
  for (bool first = true;; first = false) {
    req.data = detail::NextChunk(in, chunk, ended, &borrowed);
    if (req.data.size() == 0 && !first) return;
    if (!stream.Write(req)) return;
    tracker.Sent(req.data.size());
    if (ended) return;
    req.clear_header();
  }
}

// Reads a raw scan's responses (Scan, SegmentedScan) to the end: their data to `feeder`, counted;
// returns the final response's Timing.
template <class Stream>
Timing ReadScanResponses(Stream& stream, detail::ElementFeeder& feeder, ProgressTracker& tracker) {
  Timing timing;
  detail::RawIn<v1::ScanResponse> resp;
  while (stream.Read(&resp)) {
    if (resp.data_bytes()) {
      feeder.Feed(resp.split.field);
      tracker.Received(resp.data_bytes());
    }
    if (resp.has_timing()) timing = FromProto(resp.msg.timing());
  }
  return timing;
}

// A bidirectional call with one byte stream each way (Scan2D): the header rides with the
// first chunk, each request holds up to one chunk, responses are read as they come.
template <class Req, class Resp, class Stream, class Header>
Timing PlainBidi(grpc::ClientContext& ctx, Stream& stream, const Header& header, Source& in, size_t chunk, Sink& out,
                 ProgressTracker& tracker) {
  Timing timing;
  auto write_all = [&] {
    Req req;
    *req.mutable_header() = header;
    std::string* data = req.mutable_data();
    bool ended = !in;
    for (bool first = true;; first = false) {
      if (ReadInto(data, in, chunk, ended) == 0 && !first) return;
      if (!stream.Write(req)) return;  // the call is over; Finish says why
      tracker.Sent(data->size());
      if (ended) return;
      req.clear_header();
    }
  };
  auto read_all = [&] {
    Resp resp;
    while (stream.Read(&resp)) {
      if (!resp.data().empty()) {
        if (out) out(resp.data().data(), resp.data().size());
        tracker.Received(resp.data().size());
      }
      if (resp.has_timing()) timing = FromProto(resp.timing());
    }
  };
  detail::RunBidi(ctx, stream, write_all, read_all);
  return timing;
}

}  // namespace

Timing Client::ScanStream(const v1::ScanHeader& header, Source in, Sink out,
                          Progress progress, uint32_t lanes) {
  if (header.has_carry()) detail::RequireServed(*this, "scan_carry", "scans with a carry");
  if (LanesFor(lanes) > 1) return ScanLanes(header, std::move(in), std::move(out), std::move(progress), LanesFor(lanes));
  // Raw messages (raw_messages.h): each chunk leaves as one slice, sent as it is (an array in
  // memory's own bytes, borrowed; any other Source's copied into it), and results go to the Sink
  // from the slices they arrived in: at most one copy each way.
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  auto stream = detail::RawBidi<v1::ScanRequest, v1::ScanResponse>(channel_, detail::kScanMethod, ctx.get());
  ProgressTracker tracker(std::move(progress));
  // A narrow input's results are wider (header.output_dtype): chunks of as many elements as
  // fit chunk_bytes of results, so no response outgrows a chunk.
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t out_size = std::max<size_t>(ScanOutputSize(header), 1), widest = std::max(esize, out_size);
  const size_t chunk = ChunkBytes(widest) / widest * esize;
  Timing timing;
  auto write_all = [&] {
    detail::RawOut<v1::ScanRequest> first;
    *first.msg.mutable_header() = header;
    WriteRawChunks(*stream, std::move(first), in, chunk, tracker, borrowed);
  };
  auto read_all = [&] {
    detail::ElementFeeder feeder(out, out_size);
    timing = ReadScanResponses(*stream, feeder, tracker);
  };
  detail::RunBidi(*ctx, *stream, write_all, read_all);
  return timing;
}

Timing Client::Scan2DStream(const v1::Scan2DHeader& header, Source in, Sink out, Progress progress) {
  auto ctx = NewContext();
  auto stream = stub_->Scan2D(ctx.get());
  ProgressTracker tracker(std::move(progress));
  // A narrow matrix's results are wider (header.output_dtype): chunks whose results fit chunk_bytes.
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t widest = std::max(esize, ScanOutputSize(header.dtype(), header.output_dtype()));
  return PlainBidi<v1::Scan2DRequest, v1::ScanResponse>(*ctx, *stream, header, in, ChunkBytes(widest) / widest * esize,
                                                        out, tracker);
}

namespace {

// Runs a client-streaming call's upload (write_all) and waits for the server's answer; when the
// caller's Source throws, the call is cancelled first.
template <class Stream, class WriteAll>
void FinishUpload(grpc::ClientContext& ctx, Stream& stream, WriteAll&& write_all) {
  try {
    write_all();
  } catch (...) {
    ctx.TryCancel();
    stream.Finish();
    throw;
  }
  stream.WritesDone();
  grpc::Status status = stream.Finish();
  if (!status.ok()) throw RpcError(status);
}

// A client-streaming call of raw requests (Reduce, Histogram): the header rides with the first
// chunk, each chunk leaves as one slice (WriteRawChunks); returns the server's one answer.
template <class Req, class Resp, class Header, class NewContext>
Resp RawUpload(const std::shared_ptr<grpc::Channel>& channel, const char* method, NewContext&& new_context,
               const Header& header, Source& in, size_t chunk, Progress progress) {
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = new_context();
  Resp response;
  auto stream = detail::RawWriter<Req>(channel, method, ctx.get(), &response);
  ProgressTracker tracker(std::move(progress));
  detail::RawOut<Req> first;
  *first.msg.mutable_header() = header;
  FinishUpload(*ctx, *stream, [&] { WriteRawChunks(*stream, std::move(first), in, chunk, tracker, borrowed); });
  return response;
}

}  // namespace

v1::ReduceResponse Client::ReduceStream(const v1::ReduceHeader& header, Source in,
                                        Progress progress, uint32_t lanes) {
  if (LanesFor(lanes) > 1) return ReduceLanes(header, std::move(in), std::move(progress), LanesFor(lanes));
  return RawUpload<v1::ReduceRequest, v1::ReduceResponse>(
      channel_, detail::kReduceMethod, [this] { return NewContext(); }, header, in,
      ChunkBytes(std::max<size_t>(DTypeSize(header.dtype()), 1)), std::move(progress));
}

v1::HistogramResponse Client::HistogramStream(const v1::HistogramHeader& header, Source in, Progress progress) {
  return RawUpload<v1::HistogramRequest, v1::HistogramResponse>(
      channel_, detail::kHistogramMethod, [this] { return NewContext(); }, header, in,
      ChunkBytes(std::max<size_t>(DTypeSize(header.dtype()), 1)), std::move(progress));
}

namespace {

// Writes a call whose elements come with a second stream (Sort: keys with their values;
// SegmentedScan and ReduceByKey: values with their keys; Compact: values with their flags): each
// request carries both for the same elements, per_chunk elements at most. fill(req, second,
// source, bytes, ended) replaces the first (second = false) or second field of req with up to
// `bytes` read from source and returns how many it read; a field with nothing to read this time
// goes out empty, never with the last request's bytes again.
template <class Req, class Stream, class Fill>
void WriteKeyedRequests(Stream& stream, Req& req, Source& values, Source& keys, size_t esize, size_t ksize,
                        size_t per_chunk, ProgressTracker& tracker, Fill fill) {
  bool values_ended = !values, keys_ended = !keys;
  for (bool first = true;; first = false) {
    const size_t vbytes = fill(req, false, values, per_chunk * esize, values_ended);
    // The keys of the same elements; once the values end, whatever keys remain are sent too,
    // so the server (not this client) judges the length mismatch.
    const size_t kwant =
        keys_ended ? 0 : (values_ended && vbytes == 0 ? per_chunk : (vbytes + esize - 1) / esize) * ksize;
    const size_t kbytes = fill(req, true, keys, kwant, keys_ended);
    const bool empty = vbytes == 0 && kbytes == 0;
    if (empty && !first) return;
    if (!stream.Write(req)) return;
    tracker.Sent(vbytes + kbytes);
    if ((values_ended && keys_ended) || empty) return;
    req.clear_header();
  }
}

// WriteKeyedRequests as raw requests (SegmentedScan, ReduceByKey, Compact): both fields in slices
// (NextChunk).
template <class Req, class Header, class Stream>
void WriteRawWithKeys(Stream& stream, const Header& header, Source& values, Source& keys, size_t esize,
                      size_t ksize, size_t per_chunk, ProgressTracker& tracker, detail::BorrowedSlices& borrowed) {
  detail::RawOut<Req> req;
  *req.msg.mutable_header() = header;
  WriteKeyedRequests(stream, req, values, keys, esize, ksize, per_chunk, tracker,
                     [&borrowed](detail::RawOut<Req>& r, bool second, Source& in, size_t bytes, bool& ended) {
                       grpc::Slice& field = second ? r.second : r.data;
                       field = detail::NextChunk(in, bytes, ended, &borrowed);
                       return field.size();
                     });
}

// Reads a raw call's responses that carry two element streams (Compact: kept values and
// indices; ReduceByKey: the runs' keys and values) to the end; returns the final response (the
// one with the timing).
template <class Resp, class Stream>
Resp ReadPairedResponses(Stream& stream, detail::ElementFeeder& first, detail::ElementFeeder& second,
                         ProgressTracker& tracker) {
  Resp final_response;
  detail::RawIn<Resp> resp;
  while (stream.Read(&resp)) {
    first.Feed(resp.split.field);
    second.Feed(resp.split.second);
    tracker.Received(resp.data_bytes() + resp.second_bytes());
    if (resp.has_timing()) final_response = std::move(resp.msg);
  }
  return final_response;
}

// Elements per request: neither the values nor the keys may exceed the chunk limit.
size_t KeyedChunk(size_t chunk_bytes, size_t esize, size_t ksize) {
  return std::max<size_t>(chunk_bytes / std::max(esize, ksize), 1);
}

}  // namespace

v1::CompactResponse Client::CompactStream(const v1::CompactHeader& header, Source values,
                                          Source flags, Sink values_out, Sink indices_out,
                                          Progress progress, uint32_t lanes) {
  if (LanesFor(lanes) > 1) {
    return CompactLanes(header, std::move(values), std::move(flags), std::move(values_out), std::move(indices_out),
                        std::move(progress), LanesFor(lanes));
  }
  const bool use_flags = header.selector_case() == v1::CompactHeader::kUseFlags &&
                         header.use_flags();
  if (use_flags && !flags && !header.has_shared_memory() && !header.has_resident()) {  // a region or array holds them
    throw std::invalid_argument("gpuscan: CompactStream with use_flags needs a flags Source");
  }
  // Raw messages, as ScanStream: values and flags leave as slices (NextChunk); kept
  // values and indices go to the Sinks (whole elements) from the slices they arrived in.
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  auto stream =
      detail::RawBidi<v1::CompactRequest, v1::CompactResponse>(channel_, detail::kCompactMethod, ctx.get());
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t chunk = ChunkBytes(esize);
  ProgressTracker tracker(std::move(progress));
  v1::CompactResponse final_response;

  auto write_all = [&] {  // the flags (a byte an element) beside the values
    Source none;
    WriteRawWithKeys<v1::CompactRequest>(*stream, header, values, use_flags ? flags : none, esize, 1, chunk / esize,
                                         tracker, borrowed);
  };
  auto read_all = [&] {
    detail::ElementFeeder kept_values(values_out, esize), kept_indices(indices_out, sizeof(int64_t));
    final_response = ReadPairedResponses<v1::CompactResponse>(*stream, kept_values, kept_indices, tracker);
  };
  detail::RunBidi(*ctx, *stream, write_all, read_all);
  return final_response;
}

Timing Client::SegmentedScanStream(const v1::SegmentedScanHeader& header, Source values, Source keys, Sink out,
                                   Progress progress) {
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t ksize = header.segments_case() == v1::SegmentedScanHeader::kKeyDtype
                           ? std::max<size_t>(DTypeSize(header.key_dtype()), 1)
                           : 1;
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  auto stream = detail::RawBidi<v1::SegmentedScanRequest, v1::ScanResponse>(channel_, detail::kSegmentedScanMethod,
                                                                            ctx.get());
  ProgressTracker tracker(std::move(progress));
  Timing timing;
  auto write_all = [&] {
    WriteRawWithKeys<v1::SegmentedScanRequest>(*stream, header, values, keys, esize, ksize,
                                               KeyedChunk(options_.chunk_bytes, esize, ksize), tracker, borrowed);
  };
  auto read_all = [&] {
    detail::ElementFeeder feeder(out, esize, /*gather=*/true);
    timing = ReadScanResponses(*stream, feeder, tracker);
  };
  detail::RunBidi(*ctx, *stream, write_all, read_all);
  return timing;
}

v1::ReduceByKeyResponse Client::ReduceByKeyStream(const v1::ReduceByKeyHeader& header, Source values, Source keys,
                                                  Sink keys_out, Sink values_out, Progress progress) {
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t ksize = std::max<size_t>(DTypeSize(header.key_dtype()), 1);
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  auto stream = detail::RawBidi<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
      channel_, detail::kReduceByKeyMethod, ctx.get());
  ProgressTracker tracker(std::move(progress));
  v1::ReduceByKeyResponse final_response;
  auto write_all = [&] {
    WriteRawWithKeys<v1::ReduceByKeyRequest>(*stream, header, values, keys, esize, ksize,
                                             KeyedChunk(options_.chunk_bytes, esize, ksize), tracker, borrowed);
  };
  auto read_all = [&] {
    detail::ElementFeeder run_keys(keys_out, ksize, /*gather=*/true), run_values(values_out, esize, /*gather=*/true);
    final_response = ReadPairedResponses<v1::ReduceByKeyResponse>(*stream, run_keys, run_values, tracker);
  };
  detail::RunBidi(*ctx, *stream, write_all, read_all);
  return final_response;
}

v1::SortResponse Client::SortStream(const v1::SortHeader& header, Source keys, Source values, Sink keys_out,
                                    Sink values_out, Sink indices_out, Progress progress) {
  const size_t ksize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const bool with_values = header.output() == v1::SORT_OUTPUT_KEYS_AND_VALUES;
  const size_t vsize = with_values ? std::max<size_t>(DTypeSize(header.values_dtype()), 1) : 1;
  if (with_values && !values && !header.has_resident()) {  // (a resident array holds them)
    throw std::invalid_argument("gpuscan: SortStream with values needs a values Source");
  }
  auto ctx = NewContext();
  auto stream = stub_->Sort(ctx.get());
  ProgressTracker tracker(std::move(progress));
  v1::SortResponse final_response;
  auto write_all = [&] {
    Source none;
    v1::SortRequest req;
    *req.mutable_header() = header;
    WriteKeyedRequests(*stream, req, keys, with_values ? values : none, ksize, vsize,
                       KeyedChunk(options_.chunk_bytes, ksize, with_values ? vsize : 1), tracker,
                       [](v1::SortRequest& r, bool second, Source& in, size_t bytes, bool& ended) {
                         return ReadInto(second ? r.mutable_values() : r.mutable_keys(), in, bytes, ended);
                       });
  };
  auto read_all = [&] {
    v1::SortResponse resp;
    while (stream->Read(&resp)) {
      const std::string& k = resp.keys();
      const std::string& v = resp.values();
      const std::string& i = resp.indices();
      if (!k.empty() && keys_out) keys_out(k.data(), k.size());
      if (!v.empty() && values_out) values_out(v.data(), v.size());
      if (!i.empty() && indices_out) indices_out(i.data(), i.size());
      tracker.Received(k.size() + v.size() + i.size());
      if (resp.has_timing()) final_response = std::move(resp);
    }
  };
  detail::RunBidi(*ctx, *stream, write_all, read_all);
  return final_response;
}

}  // namespace gpuscan
