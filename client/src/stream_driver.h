// Internal: the machinery shared by the streaming calls. A bidirectional call uploads on a
// writer thread while the calling thread reads, because the server streams results back during
// the upload (reading only after the upload would stall on flow control for big arrays).
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/client_context.h>
#include <grpcpp/support/sync_stream.h>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// Counts payload bytes both ways and reports them to the caller's Progress, one call at a time.
// Counting and reporting happen under one lock, so the caller sees both totals only grow (the
// writer and the reader thread both report).
class ProgressTracker {
 public:
  explicit ProgressTracker(Progress fn) : fn_(std::move(fn)) {}
  void Sent(uint64_t n) { Add(n, 0); }
  void Received(uint64_t n) { Add(0, n); }

 private:
  void Add(uint64_t sent, uint64_t received) {
    if (!fn_) return;
    std::lock_guard<std::mutex> lock(mu_);
    sent_ += sent;
    received_ += received;
    fn_(sent_, received_);
  }
  Progress fn_;
  std::mutex mu_;
  uint64_t sent_ = 0, received_ = 0;
};

// Calls `source` until `want` bytes are in `buf` or it reports the end; returns bytes read.
inline size_t ReadFull(const Source& source, char* buf, size_t want, bool& ended) {
  size_t got = 0;
  while (got < want && !ended) {
    size_t n = source(buf + got, want - got);
    if (n > want - got) throw std::logic_error("gpuscan: Source returned more than max_bytes");
    if (n == 0) ended = true;
    got += n;
  }
  return got;
}

// Receives a streaming call's initial metadata on its own, before the first Read. gRPC 1.51
// (Debian 12's) can lose a cancellation that lands after the initial metadata arrived but before
// the first message, when both are received in one batch, as the first Read asks: that Read then
// never returns, deadline included. Reproduced with CancelCalls at a random moment of 1 MiB scans
// (a hang within ~50 calls; none in 3,800 with this); the trace shows the cancel reaching the
// transport and the batch never completing.
template <class Stream>
void ReceiveInitialMetadata(Stream& stream) {
  stream.WaitForInitialMetadata();
}

// Runs a bidirectional call: write_all() on a writer thread (it writes every request and returns
// early when Write fails), then WritesDone; read_all() on this thread until Read ends. Joins the
// writer on every path and throws: the writer's or reader's own exception first (the caller's
// Source or Sink failed; the call is cancelled so the other side unblocks), else RpcError for a
// non-OK status.
template <class Req, class Resp, class WriteAll, class ReadAll>
void RunBidi(grpc::ClientContext& ctx, grpc::ClientReaderWriter<Req, Resp>& stream,
             WriteAll&& write_all, ReadAll&& read_all) {
  std::exception_ptr writer_error, reader_error;
  std::thread writer([&] {
    try {
      write_all();
    } catch (...) {
      writer_error = std::current_exception();
      ctx.TryCancel();
      return;
    }
    stream.WritesDone();
  });
  try {
    ReceiveInitialMetadata(stream);
    read_all();
  } catch (...) {
    reader_error = std::current_exception();
    ctx.TryCancel();
    Resp drain;
    while (stream.Read(&drain)) {
    }
  }
  writer.join();
  grpc::Status status = stream.Finish();
  if (writer_error) std::rethrow_exception(writer_error);
  if (reader_error) std::rethrow_exception(reader_error);
  if (!status.ok()) throw RpcError(status);
}

}  // namespace gpuscan::detail
