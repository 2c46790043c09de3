// Striped lanes: one array over several concurrent calls, each on its own connection (see Lanes
// in gpuscan.proto). Chunk g of the array goes on lane g mod K. Each lane has a writer thread
// and a reader thread: writers take turns reading the caller's Source (chunk g is read by lane
// g mod K's writer, straight into its request message, then written while the next lane reads);
// readers read on without waiting for each other, queueing a few results per lane, and the
// caller's thread feeds the Sink from those queues in the order of the positions the server puts
// on each result (a scan's offset, a compaction's kept_offset). The first lane to fail cancels
// the rest.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <exception>
#include <mutex>
#include <thread>


#include "gpuscan/client.h"
#include "lane_pool.h"
#include "raw_messages.h"
#include "retry.h"
#include "stream_driver.h"
#include "targets.h"

namespace gpuscan {
namespace {

using detail::ProgressTracker;
using detail::ReadFull;
using detail::Deadline;
using detail::NewArrayId;

// The id as the metadata value: lowercase hex (an ASCII header: no "-bin" suffix needed).
std::string ArrayIdText(const std::string& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * id.size());
  for (const unsigned char c : id) {
    text.push_back(kHex[c >> 4]);
    text.push_back(kHex[c & 15]);
  }
  return text;
}

// The shared state of one striped call's lanes.
class LaneRun {
 public:
  // new_context: the Client's NewContext (its deadline, registered for CancelCalls). Every lane
  // carries the array's id as metadata too, so an L7 balancer can hash the lanes to one replica.
  LaneRun(uint32_t lanes, const std::function<detail::ContextPtr()>& new_context, const std::string& array_id)
      : lanes_(lanes), queued_(lanes) {
    const std::string id_text = ArrayIdText(array_id);
    for (uint32_t i = 0; i < lanes; ++i) {
      contexts_.push_back(new_context());
      contexts_.back()->AddMetadata(kArrayIdMetadata, id_text);
    }
  }
  grpc::ClientContext* context(uint32_t lane) { return contexts_[lane].get(); }

  // Writer of `lane`: waits for its turn to read the next chunk. fill(ended) reads it (under
  // the turn, so chunks leave the Source in order) and returns its payload bytes. Returns the
  // bytes (0: nothing more for this lane) or -1 when the run was aborted.
  template <class Fill>
  int64_t NextChunk(uint32_t lane, Fill&& fill) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return aborted_ || ended_ || next_chunk_ % lanes_ == lane; });
    if (aborted_) return -1;
    if (ended_) return 0;
    size_t bytes = 0;
    try {
      bytes = fill(ended_);
    } catch (...) {
      lock.unlock();
      Failed(std::current_exception());
      return -1;
    }
    if (bytes > 0) ++next_chunk_;
    lock.unlock();
    cv_.notify_all();
    return static_cast<int64_t>(bytes);
  }

  // Reader of `lane`: queues one result (its position and length in the Sink's order, and the
  // closure that feeds it to the Sink), waiting while the lane already holds kQueued. Readers
  // keep reading while earlier positions are still on their way: a reader that waited for its
  // turn would stop its stream's flow-control credit, and the lanes would take turns on the wire.
  // False when the run was aborted.
  bool Queue(uint32_t lane, uint64_t pos, uint64_t len, std::function<void()> emit) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return aborted_ || queued_[lane].size() < kQueued; });
    if (aborted_) return false;
    queued_[lane].push_back({pos, len, std::move(emit)});
    lock.unlock();
    cv_.notify_all();
    return true;
  }
  // A lane's reader read its last response.
  void ReaderDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++readers_done_;
    }
    cv_.notify_all();
  }

  // The caller's thread: feeds the Sink in position order until every reader is done (or the
  // run aborts). A position answered twice, or one never answered, fails the call: the server
  // did not join the lanes of this array.
  void DeliverAll() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      Queued* next = nullptr;
      bool stale = false;
      cv_.wait(lock, [&] {
        if (aborted_) return true;
        next = nullptr;
        stale = false;
        for (auto& q : queued_) {
          if (q.empty()) continue;
          if (q.front().pos == emitted_) next = &q.front();
          if (q.front().pos < emitted_) stale = true;
        }
        return next || stale || readers_done_ == lanes_;
      });
      if (aborted_) return;
      if (!next) {
        const bool pending = std::any_of(queued_.begin(), queued_.end(), [](const auto& q) { return !q.empty(); });
        if (!stale && !pending) return;  // every result delivered
        if (!stale) {
          // A position is missing once every reader is done: a lane that failed (a cancelled
          // call's lanes too) says why; only when every lane ended OK did the server not join.
          cv_.wait(lock, [&] { return aborted_ || lanes_done_ == lanes_; });
          if (aborted_) return;
        }
        if (failure_.ok()) {
          failure_ = grpc::Status(grpc::StatusCode::INTERNAL,
                                  "the server answered position " + std::to_string(emitted_) +
                                      (stale ? " twice" : " never") + ": it did not join the lanes of this array");
        }
        lock.unlock();
        Abort();
        return;
      }
      Queued item = std::move(*next);
      for (auto& q : queued_) {
        if (!q.empty() && &q.front() == next) q.pop_front();
      }
      lock.unlock();
      cv_.notify_all();  // room in that lane's queue
      try {
        item.emit();  // only this thread feeds the Sink: it runs unlocked
      } catch (...) {
        Failed(std::current_exception());
        return;
      }
      lock.lock();
      emitted_ += item.len;
    }
  }

  // A lane ended with `status`: the first failure (not one this run caused) is the call's.
  void LaneDone(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++lanes_done_;
      if (!status.ok() && !aborted_ && failure_.ok()) failure_ = status;
    }
    cv_.notify_all();
    if (!status.ok()) Abort();
  }

  // The caller's Source or Sink threw on a lane's thread: that is the call's error.
  void Failed(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::move(error);
    }
    Abort();
  }

  bool aborted() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }

  void Abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      aborted_ = true;
    }
    cv_.notify_all();
    for (auto& c : contexts_) c->TryCancel();
  }

  // After every lane ended: the caller's own exception first, else the first lane failure.
  void Throw() {
    if (error_) std::rethrow_exception(error_);
    if (!failure_.ok()) throw RpcError(failure_);
  }

 private:
  const uint32_t lanes_;
  std::vector<detail::ContextPtr> contexts_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_chunk_ = 0;  // chunks read from the Source so far
  bool ended_ = false;       // the Source is exhausted
  uint64_t emitted_ = 0;     // result positions given to the Sink so far
  // Results read but not yet given to the Sink, per lane, in the lane's order.
  struct Queued {
    uint64_t pos, len;
    std::function<void()> emit;
  };
  static constexpr size_t kQueued = 4;
  std::vector<std::deque<Queued>> queued_;
  uint32_t readers_done_ = 0;
  uint32_t lanes_done_ = 0;  // lanes whose status is known (LaneDone)
  bool aborted_ = false;
  std::exception_ptr error_;
  grpc::Status failure_;
};

template <class Header>
Header LaneHeader(const Header& h, const std::string& id, uint32_t lane, uint32_t lanes, uint64_t chunk_elements) {
  Header out = h;
  v1::Lanes* l = out.mutable_lanes();
  l->set_array_id(id);
  l->set_lane(lane);
  l->set_lane_count(lanes);
  l->set_chunk_elements(chunk_elements);
  return out;
}

// One lane's upload: header first (with the lane's first chunk, if it has one), then its chunks.
// fill(req, ended) puts the next chunk into req and returns its payload bytes.
template <class Req, class Stream, class Fill>
void WriteLane(LaneRun& run, uint32_t lane, Stream& stream, Req req, ProgressTracker& tracker, Fill&& fill) {
  for (bool first = true;; first = false) {
    const int64_t bytes = run.NextChunk(lane, [&](bool& ended) { return fill(req, ended); });
    if (bytes < 0) break;
    if (bytes == 0 && !first) break;  // (a first request without a chunk: the header alone)
    if (!stream.Write(req)) break;  // the call is over; Finish says why
    tracker.Sent(static_cast<uint64_t>(bytes));
    req.clear_header();
    if (bytes == 0) break;
  }
}

// One lane's upload from an input read by position (SourceAt): the lane's chunks are known
// (lane, lane + K, ...), so it copies them without waiting for the other lanes' turns.
// fill(req, g) puts chunk g into req and returns its payload bytes (0: past the input's end).
template <class Req, class Stream, class Fill>
void WriteLaneAt(LaneRun& run, uint32_t lane, uint32_t lanes, Stream& stream, Req req, ProgressTracker& tracker,
                 Fill&& fill) {
  for (uint64_t g = lane; !run.aborted(); g += lanes) {
    size_t bytes = 0;
    try {
      bytes = fill(req, g);
    } catch (...) {
      run.Failed(std::current_exception());
      break;
    }
    if (bytes == 0 && g != lane) break;  // (a first request without a chunk: the header alone)
    if (!stream.Write(req)) break;       // the call is over; Finish says why
    tracker.Sent(static_cast<uint64_t>(bytes));
    req.clear_header();
    if (bytes == 0) break;
  }
}

// Runs a bidirectional striped call. start(lane, ctx) opens lane `lane`'s stream; upload(run,
// lane, stream, first) writes its requests; place(resp) gives a data response's (position,
// length) in the Sink's order; emit(resp) feeds the Sink: on the lane's reader thread when
// emit_on_reader (results written by position, SinkAt), else in order on this thread. The
// first final response (has_timing) is kept.
template <class Req, class Resp, class Start, class Upload, class Place, class Emit>
Resp RunBidiLanes(const std::vector<v1::GpuScan::Stub*>& stubs, const std::function<detail::ContextPtr()>& new_context,
                  const std::string& array_id, const std::vector<Req>& firsts, Start start, Upload upload, Place place, Emit emit,
                  bool emit_on_reader) {
  const uint32_t lanes = static_cast<uint32_t>(stubs.size());
  LaneRun run(lanes, new_context, array_id);
  Resp final_response;
  std::mutex final_mu;
  bool have_final = false;
  std::vector<std::thread> threads;
  for (uint32_t l = 0; l < lanes; ++l) {
    threads.emplace_back([&, l] {
      auto stream = start(l, run.context(l));
      std::thread writer([&] {
        upload(run, l, *stream, firsts[l]);
        stream->WritesDone();
      });
      bool reading = true;
      detail::ReceiveInitialMetadata(*stream);  // alone: see stream_driver.h
      for (auto resp = std::make_shared<Resp>(); reading && stream->Read(resp.get()); resp = std::make_shared<Resp>()) {
        if (resp->has_timing()) {
          std::lock_guard<std::mutex> lock(final_mu);
          if (!have_final) final_response = *resp;
          have_final = true;
          continue;
        }
        const auto [pos, len] = place(*resp);
        if (len == 0) continue;
        if (emit_on_reader) {
          try {
            emit(*resp);
          } catch (...) {
            run.Failed(std::current_exception());
            reading = false;
            break;
          }
          // Queued all the same: the order check (every position once) still holds.
          reading = run.Queue(l, pos, len, [] {});
        } else {
          reading = run.Queue(l, pos, len, [resp, &emit] { emit(*resp); });
        }
      }
      run.ReaderDone();
      if (!reading) {
        Resp rest;
        while (stream->Read(&rest)) {
        }
      }
      writer.join();
      run.LaneDone(stream->Finish());
    });
  }
  run.DeliverAll();
  for (auto& t : threads) t.join();
  run.Throw();
  return final_response;
}

}  // namespace

Timing Client::ScanLanes(const v1::ScanHeader& header, Source in, Sink out, Progress progress, uint32_t lanes) {
  detail::BorrowedSlices borrowed;  // before the lanes' calls: it outlives the slices gRPC still holds
  lanes = UsableLanes(lanes);
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t chunk = ChunkBytes(esize);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const auto stubs = lane_pool_->Stubs(lanes, &channels);
  const std::string id = NewArrayId();
  // Raw messages (raw_messages.h): each chunk leaves as one slice, sent as it is (ChunkAt: an
  // array in memory's own bytes, borrowed); results go to the Sink from the slices they arrived in.
  using Out = detail::RawOut<v1::ScanRequest>;
  using In = detail::RawIn<v1::ScanResponse>;
  std::vector<Out> firsts(lanes);
  for (uint32_t l = 0; l < lanes; ++l) {
    *firsts[l].msg.mutable_header() = LaneHeader(header, id, l, lanes, chunk / esize);
  }
  ProgressTracker tracker(std::move(progress));
  bool no_source = !in;
  auto fill = [&](Out& req, bool& ended) -> size_t {
    if (no_source) ended = true;
    req.data = detail::NextChunk(in, chunk, ended);
    return req.data.size();
  };
  const SourceAt* in_at = in.target<SourceAt>();
  auto upload = [&](LaneRun& run, uint32_t l, auto& stream, Out first) {
    if (!in_at) return WriteLane(run, l, stream, std::move(first), tracker, fill);
    WriteLaneAt(run, l, lanes, stream, std::move(first), tracker, [&](Out& req, uint64_t g) {
      req.data = detail::ChunkAt(*in_at, g, chunk, &borrowed);
      return req.data.size();
    });
  };
  auto start = [&](uint32_t l, grpc::ClientContext* ctx) {
    return detail::RawBidi<v1::ScanRequest, v1::ScanResponse>(channels[l], detail::kScanMethod, ctx);
  };
  auto place = [&](const In& r) { return std::pair<uint64_t, uint64_t>(r.msg.offset(), r.data_bytes() / esize); };
  // A SinkAt is written by each lane's reader; any other Sink in array order on one thread
  // (LaneRun::DeliverAll), where one feeder serves all lanes.
  const SinkAt* out_at = out.target<SinkAt>();
  detail::ElementFeeder feeder(out, esize);
  auto emit = [&](const In& r) {
    if (out_at) {
      detail::WritePieces(*out_at, r.msg.offset() * esize, r.split.field);
    } else {
      feeder.Feed(r.split.field);
    }
    tracker.Received(r.data_bytes());
  };
  In last = RunBidiLanes<Out, In>(stubs, [this] { return NewContext(); }, id, firsts, start, upload, place, emit,
                                  out_at != nullptr);
  return FromProto(last.msg.timing());
}

v1::CompactResponse Client::CompactLanes(const v1::CompactHeader& header, Source values, Source flags,
                                         Sink values_out, Sink indices_out, Progress progress, uint32_t lanes) {
  detail::BorrowedSlices borrowed;  // before the lanes' calls: it outlives the slices gRPC still holds
  lanes = UsableLanes(lanes);
  const bool use_flags = header.selector_case() == v1::CompactHeader::kUseFlags && header.use_flags();
  if (use_flags && !flags) {
    throw std::invalid_argument("gpuscan: CompactStream with use_flags needs a flags Source");
  }
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t chunk = ChunkBytes(esize);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const auto stubs = lane_pool_->Stubs(lanes, &channels);
  const std::string id = NewArrayId();
  // Raw messages, as ScanLanes: values and flags leave as slices (ChunkAt, NextChunk); kept
  // values and indices go to the Sinks from the slices they arrived in.
  using Out = detail::RawOut<v1::CompactRequest>;
  using In = detail::RawIn<v1::CompactResponse>;
  std::vector<Out> firsts(lanes);
  for (uint32_t l = 0; l < lanes; ++l) *firsts[l].msg.mutable_header() = LaneHeader(header, id, l, lanes, chunk / esize);
  ProgressTracker tracker(std::move(progress));
  bool values_ended = !values, flags_ended = !use_flags;
  auto fill = [&](Out& req, bool& ended) -> size_t {
    req.data = ended ? grpc::Slice() : detail::NextChunk(values, chunk, values_ended);
    req.second = grpc::Slice();
    if (!flags_ended && !ended) {
      // The flags of the same elements; after the values end, one more byte of flags (if any)
      // is sent so the server (not this client) judges the length mismatch.
      const size_t want = req.data.size() == 0 ? 1 : req.data.size() / esize;
      req.second = detail::NextChunk(flags, want, flags_ended);
    }
    if (values_ended) ended = true;
    return req.data.size() + req.second.size();
  };
  // Read by position when the values are (and the flags, of the same length, too): a length
  // mismatch goes the ordered way, where the server judges it.
  const SourceAt* values_at = values.target<SourceAt>();
  const SourceAt* flags_at = use_flags ? flags.target<SourceAt>() : nullptr;
  const bool read_at =
      values_at && (!use_flags || (flags_at && flags_at->bytes() * esize == values_at->bytes()));
  auto upload = [&](LaneRun& run, uint32_t l, auto& stream, Out first) {
    if (!read_at) return WriteLane(run, l, stream, std::move(first), tracker, fill);
    WriteLaneAt(run, l, lanes, stream, std::move(first), tracker, [&](Out& req, uint64_t g) {
      req.data = detail::ChunkAt(*values_at, g, chunk, &borrowed);
      req.second = use_flags && req.data.size() > 0 ? detail::ChunkAt(*flags_at, g, chunk / esize, &borrowed) : grpc::Slice();
      return req.data.size() + req.second.size();
    });
  };
  auto start = [&](uint32_t l, grpc::ClientContext* ctx) {
    return detail::RawBidi<v1::CompactRequest, v1::CompactResponse>(channels[l], detail::kCompactMethod, ctx);
  };
  auto place = [&](const In& r) {
    const uint64_t kept = r.data_bytes() == 0 ? r.second_bytes() / sizeof(int64_t) : r.data_bytes() / esize;
    return std::pair<uint64_t, uint64_t>(r.msg.kept_offset(), kept);
  };
  // SinkAts (or no Sink) are written by each lane's reader; otherwise both Sinks are fed in array
  // order on one thread (LaneRun::DeliverAll), one feeder each.
  const SinkAt* values_at_out = values_out.target<SinkAt>();
  const SinkAt* indices_at_out = indices_out.target<SinkAt>();
  const bool write_at = (values_at_out || indices_at_out) && (values_at_out || !values_out) &&
                        (indices_at_out || !indices_out);
  detail::ElementFeeder kept_values(values_out, esize), kept_indices(indices_out, sizeof(int64_t));
  auto emit = [&](const In& r) {
    if (write_at) {
      if (values_at_out) detail::WritePieces(*values_at_out, r.msg.kept_offset() * esize, r.split.field);
      if (indices_at_out) detail::WritePieces(*indices_at_out, r.msg.kept_offset() * sizeof(int64_t), r.split.second);
    } else {
      kept_values.Feed(r.split.field);
      kept_indices.Feed(r.split.second);
    }
    tracker.Received(r.data_bytes() + r.second_bytes());
  };
  return RunBidiLanes<Out, In>(stubs, [this] { return NewContext(); }, id, firsts, start, upload, place, emit, write_at)
      .msg;
}

v1::ReduceResponse Client::ReduceLanes(const v1::ReduceHeader& header, Source in, Progress progress, uint32_t lanes) {
  detail::BorrowedSlices borrowed;  // before the lanes' calls: it outlives the slices gRPC still holds
  lanes = UsableLanes(lanes);
  const size_t esize = std::max<size_t>(DTypeSize(header.dtype()), 1);
  const size_t chunk = ChunkBytes(esize);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  lane_pool_->Stubs(lanes, &channels);
  const std::string id = NewArrayId();
  ProgressTracker tracker(std::move(progress));
  LaneRun run(lanes, [this] { return NewContext(); }, id);
  bool no_source = !in;
  auto fill = [&](detail::RawOut<v1::ReduceRequest>& req, bool& ended) -> size_t {
    if (no_source) ended = true;
    req.data = detail::NextChunk(in, chunk, ended);
    return req.data.size();
  };
  const SourceAt* in_at = in.target<SourceAt>();  // lanes read their own chunks at once
  // Client streaming: each lane's thread uploads, then waits for its one response. Every lane
  // answers with the whole array's value; lane 0's is returned.
  std::vector<v1::ReduceResponse> responses(lanes);
  std::vector<std::thread> threads;
  for (uint32_t l = 0; l < lanes; ++l) {
    threads.emplace_back([&, l] {
      auto writer =
          detail::RawWriter<v1::ReduceRequest>(channels[l], detail::kReduceMethod, run.context(l), &responses[l]);
      detail::RawOut<v1::ReduceRequest> first;
      *first.msg.mutable_header() = LaneHeader(header, id, l, lanes, chunk / esize);
      if (in_at) {
        WriteLaneAt(run, l, lanes, *writer, std::move(first), tracker, [&](detail::RawOut<v1::ReduceRequest>& req, uint64_t g) {
          req.data = detail::ChunkAt(*in_at, g, chunk, &borrowed);
          return req.data.size();
        });
      } else {
        WriteLane(run, l, *writer, std::move(first), tracker, fill);
      }
      writer->WritesDone();
      run.LaneDone(writer->Finish());
    });
  }
  for (auto& t : threads) t.join();
  run.Throw();
  return responses[0];
}

TransportResult Client::TransportLanes(uint64_t total_bytes, bool echo, uint32_t lanes, size_t chunk_bytes,
                                      const void* data) {
  if (lanes < 1) lanes = 1;
  if (chunk_bytes == 0) chunk_bytes = options_.chunk_bytes ? options_.chunk_bytes : 1 << 20;
  detail::BorrowedSlices borrowed;  // before the lanes' calls: it outlives the slices gRPC still holds
  const SourceAt array = SourceAt::Memory(data, data != nullptr ? total_bytes : 0);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  lane_pool_->Stubs(lanes, &channels);
  const std::string id_text = ArrayIdText(NewArrayId());
  const auto start = std::chrono::steady_clock::now();
  std::vector<TransportResult> results(lanes);
  std::vector<std::exception_ptr> errors(lanes);
  std::vector<std::thread> threads;
  // The bytes each lane carries when chunk g goes on lane g mod lanes, as in a striped call.
  const uint64_t chunks = (total_bytes + chunk_bytes - 1) / chunk_bytes;
  for (uint32_t l = 0; l < lanes; ++l) {
    const uint64_t mine = chunks / lanes + (l < chunks % lanes ? 1 : 0);
    uint64_t bytes = mine * chunk_bytes;
    if (chunks > 0 && (chunks - 1) % lanes == l) bytes -= chunks * chunk_bytes - total_bytes;  // the short last
    threads.emplace_back([&, l, bytes] {
      try {
        // A Client over the lane's channel would open a new connection; use the channel directly.
        grpc::ClientContext ctx;
        if (options_.timeout.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
        ctx.AddMetadata(kArrayIdMetadata, id_text);  // one replica behind a balancer, as a striped array's
        if (!options_.tenant.empty()) ctx.AddMetadata(kTenantMetadata, options_.tenant);
        const detail::TransportInput input{data != nullptr ? &array : nullptr, l, lanes};
        results[l] = detail::RunTransport(channels[l], ctx, bytes, echo, chunk_bytes, input, &borrowed);
      } catch (...) {
        errors[l] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  TransportResult total;
  for (const auto& r : results) {
    total.bytes_in += r.bytes_in;
    total.bytes_out += r.bytes_out;
    total.bytes_received += r.bytes_received;
    total.requests += r.requests;
    total.server_total_us = std::max(total.server_total_us, r.server_total_us);
  }
  total.wall_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  return total;
}

}  // namespace gpuscan
