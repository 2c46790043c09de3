// The diagnostic calls: Benchmark (the server's kernel suite) and Transport (the transport
// ceiling, no compute).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpuscan/client.h"
#include "raw_messages.h"
#include "stream_driver.h"

namespace gpuscan {

void Client::Benchmark(const v1::BenchmarkRequest& request,
                       const std::function<void(const v1::BenchmarkRow&)>& on_row) {
  auto ctx = NewContext();
  auto reader = stub_->Benchmark(ctx.get(), request);
  v1::BenchmarkRow row;
  try {
    detail::ReceiveInitialMetadata(*reader);  // alone: see stream_driver.h
    while (reader->Read(&row)) {
      if (on_row) on_row(row);
    }
  } catch (...) {
    ctx->TryCancel();
    while (reader->Read(&row)) {
    }
    reader->Finish();
    throw;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) throw RpcError(status);
}

namespace detail {

TransportResult RunTransport(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                             uint64_t total_bytes, bool echo, size_t chunk_bytes, const TransportInput& input,
                             BorrowedSlices* borrowed) {
  // Without an array: one chunk of a fixed pattern, copied into each message's slice, the one
  // copy a chunk of a Source that is not an array in memory takes (both read responses in place).
  // With one: its chunks borrowed in place, as the calls send a SourceAt::Memory.
  if (input.array != nullptr && borrowed == nullptr) throw std::logic_error("RunTransport: an array needs borrowed");
  std::string pattern(input.array != nullptr ? 0
                                            : static_cast<size_t>(std::min<uint64_t>(chunk_bytes, std::max<uint64_t>(total_bytes, 1))),
                      '\0');
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<char>(i * 131 + 7);
  auto stream = RawBidi<v1::TransportRequest, v1::TransportResponse>(channel, kTransportMethod, &ctx);
  TransportResult result;
  auto write_all = [&] {
    RawOut<v1::TransportRequest> req;
    req.msg.set_echo(echo);
    uint64_t left = total_bytes;
    for (uint64_t i = 0; i == 0 || left > 0; ++i) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk_bytes));
      if (input.array == nullptr) {
        req.data = grpc::Slice(pattern.data(), n);  // a copy, like a Source's
      } else {
        // Empty past the array's end: an empty call (or lane) sends the request alone.
        req.data = ChunkAt(*input.array, input.first_chunk + i * input.stride, chunk_bytes, borrowed);
        if (req.data.size() != n) throw std::logic_error("RunTransport: chunk past the array");
      }
      if (!stream->Write(req)) return;
      left -= n;
    }
  };
  auto read_all = [&] {
    RawIn<v1::TransportResponse> resp;
    while (stream->Read(&resp)) {
      result.bytes_received += resp.data_bytes();
      if (resp.msg.final()) {
        result.bytes_in = resp.msg.bytes_in();
        result.bytes_out = resp.msg.bytes_out();
        result.requests = resp.msg.requests();
        result.server_total_us = resp.msg.total_us();
      }
    }
  };
  RunBidi(ctx, *stream, write_all, read_all);
  return result;
}

}  // namespace detail

TransportResult Client::Transport(uint64_t total_bytes, bool echo, size_t chunk_bytes, const void* data) {
  if (chunk_bytes == 0) chunk_bytes = options_.chunk_bytes;
  if (chunk_bytes == 0) chunk_bytes = 1 << 20;
  const auto start = std::chrono::steady_clock::now();
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  const SourceAt array = SourceAt::Memory(data, data != nullptr ? total_bytes : 0);
  const detail::TransportInput input{data != nullptr ? &array : nullptr};
  TransportResult result = detail::RunTransport(channel_, *ctx, total_bytes, echo, chunk_bytes, input, &borrowed);
  result.wall_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  return result;
}

}  // namespace gpuscan
