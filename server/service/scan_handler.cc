// Scan: bidirectional streaming. Each data chunk is scanned as it arrives (the session carries
// the running prefix) and sent straight back; the final response carries Timing.
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/resident_feed.h"
#include "service/shared_memory.h"
#include "service/streaming_call.h"
#include "service/validate.h"
#include "service/wire.h"

namespace gpuscan::server {
namespace {

// Scan is a raw RPC: each request's data is gathered from gRPC's slices into a payload, scanned
// there in place (or into a second payload when the session cannot scan in place), and sent back
// by reference (wire.h).
inline constexpr char kScanRequest[] = "the ScanRequest";
using ScanWire = RawWire<ScanChunk, ScanReply, kScanRequest>;

class ScanCall final : public StreamingCall<ScanChunk, ScanReply,
                                            grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>, ScanWire> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::ScanHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_); !s.ok()) return s;
    if (spec_.carry && header.has_lanes()) {
      return InvalidArgument("header.carry with header.lanes is not served: a striped call's lanes scan one array, "
                             "so send the carry on one stream");
    }
    if (auto s = NarrowStreamedOnly(narrow_, header.has_shared_memory(), header.has_device_memory()); !s.ok()) return s;
    if (auto s = CheckScanAlgorithm(spec_.algorithm, ctx_.engine->scan_algorithms(), ctx_.engine->name()); !s.ok()) {
      return s;
    }
    const std::optional<uint64_t> count = DeclaredCount(header);
    checker_.emplace(spec_.dtype, narrow_, count, ctx_.options->chunk_bytes, ctx_.options->max_request_bytes);
    if (header.has_resident()) {
      const ResidentConflicts conflicts{header.has_shared_memory(), header.has_device_memory(), header.has_lanes(),
                                        true};
      return OpenResident(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, conflicts,
                          &resident_.emplace(), &device_.emplace());
    }
    SharedNeeds needs;
    needs.scan_output = true;
    if (header.has_device_memory()) {
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), header.has_shared_memory(),
                        engine::SizeOf(spec_.dtype), needs, count, &device_.emplace());
    }
    if (header.has_shared_memory()) {
      return OpenShared(*ctx_.regions, header.shared_memory(), engine::SizeOf(spec_.dtype), needs, count,
                        ctx_.options->max_request_bytes, &shared_.emplace());
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const ScanChunk& req, uint64_t index) override {
    if (shared_) return NoInlinePayload(req.data.size(), "data", index);
    if (resident_) return NoInlinePayload(req.data.size(), "data", index, "header.resident");
    if (device_) return NoInlinePayload(req.data.size(), "data", index, "header.device_memory");
    return checker_->Add(req.data.size(), "data", index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    session_ = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewScan(spec_); });
  }

  void Process(ScanChunk& req, std::vector<ScanReply>& out) override {
    if (narrow_) return ProcessNarrow(req, out);
    EndChunk(BeginChunk(req, out));
  }

  uint64_t BeginChunk(ScanChunk& req, std::vector<ScanReply>& out) override {
    const size_t bytes = req.data.size();
    if (bytes == 0) return 0;
    const uint64_t n = bytes / engine::SizeOf(spec_.dtype);
    ScanReply& resp = out.emplace_back();
    uint64_t ticket = 0;
    if (session_->in_place()) {
      resp.data = std::move(req.data);  // the result replaces the request's bytes
      ticket = session_->Begin(resp.data.data(), resp.data.data(), n, stages_);
    } else {
      resp.data = ctx_.payloads->Take(bytes);
      ticket = session_->Begin(req.data.data(), resp.data.data(), n, stages_);
    }
    resp.msg.set_offset(processed_);
    processed_ += n;
    bytes_in_ += bytes;
    bytes_out_ += bytes;
    ++chunks_;
    return ticket;
  }

  void EndChunk(uint64_t ticket) override { session_->End(ticket, stages_); }
  uint64_t OverlapElements() const override { return session_ ? session_->overlap_elements() : 0; }

  // A small chunk the session scans on the host, and the end (a count check and the Timing),
  // run on gRPC's thread; never with shared memory, whose Complete scans the whole region.
  bool RunsInline(const ScanChunk* req, bool session_open) const override {
    if (shared_ || device_) return false;
    if (req == nullptr) return true;
    const size_t bytes = req->data.size();
    if (!session_open) return bytes <= engine::kSmallChunkBytes;
    return session_->on_host(bytes / WireSize(narrow_, spec_.dtype));
  }

  grpc::Status Complete(std::vector<ScanReply>& out) override {
    // The array in the client's region, device memory or on the server runs now; a streamed one has run.
    v1::ArrayInfo kept;
    const grpc::Status s = shared_     ? ScanShared()
                           : resident_ ? ScanResident(out, &kept)
                           : device_   ? ScanDevice()
                                       : checker_->Finish();
    if (!s.ok()) return s;
    v1::ScanResponse& final = out.emplace_back().msg;
    FillFinal(final, processed_, session_->algorithm());
    if (!kept.id().empty()) *final.mutable_array() = std::move(kept);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("op={} dtype={} kind={} n={} algorithm={} engine={}", engine::Name(spec_.op),
                       AccumulatedName(narrow_, spec_.dtype), spec_.exclusive ? "exclusive" : "inclusive", processed_,
                       session_ ? session_->algorithm() : std::string(engine::Name(spec_.algorithm)),
                       ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

 private:
  // header.device_memory: the whole array at once, in the caller's device memory.
  grpc::Status ScanDevice() {
    session_->ProcessDevice(device_->in, device_->out, device_->elements, stages_);
    processed_ = device_->elements;
    bytes_in_ = bytes_out_ = processed_ * engine::SizeOf(spec_.dtype);
    ++chunks_;
    return grpc::Status::OK;
  }


  // header.resident: the whole array at once where it lies, into a kept array or a scratch one
  // read back in chunks (nothing crossed the wire on the way in). A narrow array has no device
  // path: it is fed to Process chunk by chunk (resident_feed.h), widened as a streamed one is.
  grpc::Status ScanResident(std::vector<ScanReply>& out, v1::ArrayInfo* kept) {
    ResidentFeed feed(*ctx_.resident, *resident_, ctx_.options->chunk_bytes, *ctx_.payloads);
    if (narrow_) {
      const int dtype = ResultDType(narrow_, spec_.dtype);
      const grpc::Status status = FeedOneArray(
          feed, [this] { return Cancelled(); }, dtype, device_->elements * WireDTypeSize(dtype), out,
          [&](Payload values, Payload, std::vector<ScanReply>& made) {
            ScanChunk req;
            req.data = std::move(values);
            Process(req, made);
          },
          [](const ScanReply& r) -> const Payload& { return r.data; }, kept);
      bytes_in_ = 0;
      if (resident_->keep) bytes_out_ = 0;
      return status;
    }
    std::shared_ptr<engine::ResidentMemory> result;
    if (auto s = ResidentOutput(*ctx_.resident, *resident_, device_->elements * engine::SizeOf(spec_.dtype), &result);
        !s.ok()) {
      return s;
    }
    device_->out = result->data();
    ScanDevice();
    bytes_in_ = bytes_out_ = 0;
    feed.KeepOrReadBack(std::move(result), ToWire(spec_.dtype), processed_, out, &bytes_out_, kept);
    return grpc::Status::OK;
  }

  // A narrow input's chunk: widened into the engine's dtype, scanned, and for a FLOAT16 output
  // rounded once per element (service/narrow.h).
  void ProcessNarrow(ScanChunk& req, std::vector<ScanReply>& out) {
    const size_t bytes = req.data.size();
    if (bytes == 0) return;
    const uint64_t n = bytes / narrow_->size;
    const size_t wide_bytes = n * engine::SizeOf(spec_.dtype);
    Payload wide = ctx_.payloads->Take(wide_bytes);
    Widen(*narrow_, spec_.dtype, req.data.data(), wide.data(), n);
    Payload result;
    if (session_->in_place()) {
      session_->Process(wide.data(), wide.data(), n, stages_);
      result = std::move(wide);
    } else {
      result = ctx_.payloads->Take(wide_bytes);
      session_->Process(wide.data(), result.data(), n, stages_);
    }
    ScanReply& resp = out.emplace_back();
    if (narrow_->half_out) {
      resp.data = ctx_.payloads->Take(n * 2);
      RoundToHalf(result.data(), resp.data.data(), n);
    } else {
      resp.data = std::move(result);
    }
    resp.msg.set_offset(processed_);
    processed_ += n;
    bytes_in_ += bytes;
    bytes_out_ += resp.data.size();
    ++chunks_;
  }

  // The whole region, piece by piece, straight from the input's pages to the output's (in place
  // through a bounce buffer when the session cannot take one buffer as both).
  grpc::Status ScanShared() {
    const size_t size = engine::SizeOf(spec_.dtype);
    std::vector<std::byte> bounce;
    const bool bounced = shared_->in_place && !session_->in_place();
    auto status = ForEachPiece(shared_->elements, size, [this] { return Cancelled(); }, [&](uint64_t first, uint64_t n) {
      const std::byte* in = shared_->in.data() + first * size;
      std::byte* out = shared_->out.data() + first * size;
      if (bounced) {
        bounce.assign(in, in + n * size);
        in = bounce.data();
      }
      session_->Process(in, out, n, stages_);
      ++chunks_;
    });
    if (!status.ok()) return status;
    processed_ = shared_->elements;
    bytes_in_ = bytes_out_ = processed_ * size;
    return CheckIntact(*shared_);
  }

  engine::ScanSpec spec_;
  std::optional<NarrowInput> narrow_;   // a narrow header.dtype: what each chunk is widened from
  std::optional<SharedRanges> shared_;  // header.shared_memory: the mapped ranges
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges (header.resident: the array's)
  std::optional<ResidentCall> resident_;  // header.resident
  std::optional<ChunkChecker> checker_;
  std::unique_ptr<engine::ScanSession> session_;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartScan(CallContext ctx,
                                                                       grpc::CallbackServerContext* rpc) {
  return StartCall<ScanCall>(std::move(ctx), rpc, "scan");
}

}  // namespace gpuscan::server
