// Client::PipelineStream, the raw Pipeline call (gpuscan/pipeline.h has the builder over it). The
// streamed input travels as raw messages (raw_messages.h), sent from the caller's memory where it
// lies; the responses are ordinary protobuf messages (their data is nested in each operation's
// response, and all of it comes only after every stage ran).
#include "gpuscan/pipeline.h"

#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "raw_messages.h"
#include "retry.h"
#include "stream_driver.h"

namespace gpuscan {

// A namespace of its own: the unity build joins this file with others' anonymous namespaces.
namespace pipeline_stream {

constexpr const char* kPipelineMethod = "/gpuscan.v1.GpuScan/Pipeline";

using PipelineStreamPtr =
    std::unique_ptr<grpc::ClientReaderWriter<detail::RawOut<v1::PipelineRequest>, v1::PipelineResponse>>;

PipelineStreamPtr OpenPipeline(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
  grpc::internal::RpcMethod method(kPipelineMethod, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  return PipelineStreamPtr(
      grpc::internal::ClientReaderWriterFactory<detail::RawOut<v1::PipelineRequest>, v1::PipelineResponse>::Create(
          channel.get(), method, ctx));
}

// The array bytes a response carries (for Progress).
uint64_t DataBytes(const v1::PipelineResponse& r) {
  switch (r.result_case()) {
    case v1::PipelineResponse::kScan: return r.scan().data().size();
    case v1::PipelineResponse::kCompact: return r.compact().values().size() + r.compact().indices().size();
    case v1::PipelineResponse::kSort:
      return r.sort().keys().size() + r.sort().values().size() + r.sort().indices().size();
    default: return 0;
  }
}

// One Pipeline call: the header riding with the input's first chunk, the rest of the input, every
// response in order.
std::vector<v1::PipelineResponse> PipelineOnce(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                                               const v1::PipelineHeader& header, Source in, size_t chunk,
                                               detail::ProgressTracker& tracker, detail::BorrowedSlices* borrowed) {
  PipelineStreamPtr stream = OpenPipeline(channel, &ctx);
  std::vector<v1::PipelineResponse> responses;
  auto write_all = [&] {
    detail::RawOut<v1::PipelineRequest> req;
    *req.msg.mutable_header() = header;
    bool ended = !in;
    for (bool first = true;; first = false) {
      req.data = detail::NextChunk(in, chunk, ended, borrowed);
      if (req.data.size() == 0 && !first) break;
      if (!stream->Write(req)) break;  // the call is over: Finish says why
      tracker.Sent(req.data.size());
      if (ended) break;
      req.clear_header();
    }
  };
  auto read_all = [&] {
    v1::PipelineResponse r;
    while (stream->Read(&r)) {
      tracker.Received(DataBytes(r));
      responses.push_back(std::move(r));
      r.Clear();
    }
  };
  detail::RunBidi(ctx, *stream, write_all, read_all);
  return responses;
}

bool Keeps(const v1::PipelineHeader& header) {
  return std::any_of(header.stages().begin(), header.stages().end(),
                     [](const v1::PipelineStage& s) { return s.returns() == v1::STAGE_RETURN_KEEP; });
}

}  // namespace pipeline_stream

// -- the raw call

std::vector<v1::PipelineResponse> Client::PipelineStream(const v1::PipelineHeader& header, Source input,
                                                         Progress progress) {
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  detail::ProgressTracker tracker(std::move(progress));
  auto ctx = NewContext();
  return pipeline_stream::PipelineOnce(channel_, *ctx, header, std::move(input),
                                       ChunkBytes(std::max<size_t>(DTypeSize(header.input().dtype()), 1)), tracker,
                                       &borrowed);
}

std::vector<v1::PipelineResponse> Client::PipelineStream(const v1::PipelineHeader& header, const Replay& input,
                                                         Progress progress) {
  if (pipeline_stream::Keeps(header)) return PipelineStream(header, input ? input() : Source{}, std::move(progress));
  return detail::WithRetries(options_, *calls_, [&] {
    detail::BorrowedSlices borrowed;
    detail::ProgressTracker tracker(progress);
    auto ctx = NewContext();
    return pipeline_stream::PipelineOnce(channel_, *ctx, header, input ? input() : Source{},
                                         ChunkBytes(std::max<size_t>(DTypeSize(header.input().dtype()), 1)), tracker,
                                         &borrowed);
  });
}

}  // namespace gpuscan
