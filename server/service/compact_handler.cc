// Compact: bidirectional streaming. Values (and, with use_flags, a flags stream matched to them
// by element position) are compacted chunk by chunk; kept values and/or indices stream back.
#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/flags_aligner.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/resident_narrow.h"
#include "service/shared_memory.h"
#include "service/streaming_call.h"
#include "service/validate.h"
#include "service/wire.h"

namespace gpuscan::server {
namespace {

// Compact is a raw RPC (wire.h): a request's values and flags are gathered once into payloads
// (registered with the cuda engine, which then uploads from them with no staging copy), and the
// kept values and indices are made in payloads that the responses send by reference.
inline constexpr char kCompactRequest[] = "the CompactRequest";
using CompactWire = RawWire<CompactChunk, CompactReply, kCompactRequest>;

class CompactCall final
    : public StreamingCall<CompactChunk, CompactReply, grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                           CompactWire> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::CompactHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_); !s.ok()) return s;
    if (auto s = NarrowStreamedOnly(narrow_, header.has_shared_memory(), header.has_device_memory()); !s.ok()) return s;
    const std::optional<uint64_t> count = DeclaredCount(header);
    checker_.emplace(spec_.dtype, narrow_, CompactSide(spec_), count, ctx_.options->chunk_bytes,
                     ctx_.options->max_request_bytes);
    elem_size_ = engine::SizeOf(spec_.dtype);
    aligner_.emplace(WireSize(narrow_, spec_.dtype));
    SharedNeeds needs;
    needs.values_output = spec_.want_values;
    needs.indices_output = spec_.want_indices;
    needs.flags_input = spec_.use_flags;
    if (header.has_resident()) {
      const ResidentConflicts conflicts{header.has_shared_memory(), header.has_device_memory(), header.has_lanes(),
                                        true};
      return OpenResident(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, conflicts,
                          &resident_.emplace(), &device_.emplace(), WantsOf(header));
    }
    if (header.has_device_memory()) {
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), header.has_shared_memory(), elem_size_,
                        needs, count, &device_.emplace());
    }
    if (header.has_shared_memory()) {
      return OpenShared(*ctx_.regions, header.shared_memory(), elem_size_, needs, count,
                        ctx_.options->max_request_bytes, &shared_.emplace());
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const CompactChunk& req, uint64_t index) override {
    if (shared_ || device_) {
      const char* header = shared_ ? "header.shared_memory" : resident_ ? "header.resident" : "header.device_memory";
      if (auto s = NoInlinePayload(req.values.size(), "values", index, header); !s.ok()) return s;
      return NoInlinePayload(req.flags.size(), "flags", index, header);
    }
    return checker_->Add(req.values.size(), req.flags.size(), index);
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {
    session_ = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewCompact(spec_); });
  }

  void Process(CompactChunk& req, std::vector<CompactReply>& out) override {
    bytes_in_ += req.values.size() + req.flags.size();
    if (!spec_.use_flags) {
      Select(req.values.data(), nullptr, req.values.size() / WireSize(narrow_, spec_.dtype), out);
      return;
    }
    aligner_->Add(req.values, req.flags, [&](const char* values, const uint8_t* flags, uint64_t n) {
      Select(values, flags, n, out);
    });
  }

  grpc::Status Complete(std::vector<CompactReply>& out) override {
    v1::CompactResponse kept;  // header.resident.keep: the kept arrays' info
    if (shared_) {
      if (auto s = CompactShared(); !s.ok()) return s;
    } else if (resident_) {
      if (auto s = CompactResident(out, &kept); !s.ok()) return s;
    } else if (device_) {
      CompactDevice();
    } else if (auto s = checker_->Finish(); !s.ok()) {
      return s;
    }
    v1::CompactResponse& last = out.emplace_back().msg;
    last = std::move(kept);
    last.set_kept_count(kept_);
    FillFinal(last, processed_, session_->algorithm());
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("dtype={} select={} n={} kept={} algorithm={} engine={}",
                       narrow_ ? NarrowName(narrow_->wire) : engine::Name(spec_.dtype),
                       spec_.use_flags ? "flags" : std::string(engine::Name(spec_.predicate.op)), processed_,
                       kept_, session_ ? session_->algorithm() : "-", ctx_.engine->name());
  }

  MetricLabels Labels() const override {
    return {std::string(engine::Name(spec_.dtype)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

 private:
  // The whole array at once where it lies (the caller's device memory, or a resident array's).
  void CompactDevice() {
    const DeviceRanges& r = *device_;
    kept_ = session_->ProcessDevice(r.in, r.flags, r.elements, r.out, r.indices, stages_);
    processed_ = r.elements;
    bytes_in_ = processed_ * elem_size_ + (spec_.use_flags ? processed_ : 0);
    bytes_out_ = kept_ * ((spec_.want_values ? elem_size_ : 0) + (spec_.want_indices ? sizeof(int64_t) : 0));
    ++chunks_;
  }

  // header.resident: compacted into scratch memory of the whole array's size (the kept count is
  // known only after), then either cut to the kept count into new arrays (keep: the budget
  // counts what is kept) or read back in responses as a streamed call's. A narrow array is
  // compacted as its carrier (widened into counted memory for the call), its kept values
  // narrowed back (resident_narrow.h).
  grpc::Status CompactResident(std::vector<CompactReply>& out, v1::CompactResponse* kept) {
    const uint64_t n = device_->elements;
    std::shared_ptr<engine::ResidentMemory> wide;
    if (narrow_) {
      if (auto s = WidenResident(*ctx_.resident, resident_->tenant, *resident_->values->memory, *narrow_, spec_.dtype,
                                 n, ctx_.options->chunk_bytes, &wide);
          !s.ok()) {
        return s;
      }
      device_->in = wide->data();
    }
    const size_t out_size = WireSize(narrow_, spec_.dtype);  // a kept value's bytes
    ResidentCall scratch = *resident_;
    scratch.keep = false;
    std::shared_ptr<engine::ResidentMemory> values, indices;
    if (spec_.want_values) {
      if (auto s = ResidentOutput(*ctx_.resident, scratch, n * elem_size_, &values); !s.ok()) return s;
      device_->out = values->data();
    }
    if (spec_.want_indices) {
      if (auto s = ResidentOutput(*ctx_.resident, scratch, n * sizeof(int64_t), &indices); !s.ok()) return s;
      device_->indices = reinterpret_cast<int64_t*>(indices->data());
    }
    CompactDevice();
    wide.reset();
    bytes_in_ = bytes_out_ = 0;  // nothing crossed the wire
    if (resident_->keep) {
      // Both allocated before either is kept, so that a refusal keeps neither; beside the input.
      std::shared_ptr<engine::ResidentMemory> kept_values, kept_indices;
      const engine::ResidentMemory* near = resident_->values->memory.get();
      if (values) {
        if (auto s = ctx_.resident->Allocate(resident_->tenant, kept_ * out_size, &kept_values, near); !s.ok()) {
          return s;
        }
      }
      if (indices) {
        if (auto s = ctx_.resident->Allocate(resident_->tenant, kept_ * sizeof(int64_t), &kept_indices, near); !s.ok()) {
          return s;
        }
      }
      if (values && narrow_) {
        NarrowInto(*values, *narrow_, spec_.dtype, kept_, *kept_values, ctx_.options->chunk_bytes);
        *kept->mutable_values_array() = ctx_.resident->Add(resident_->tenant, resident_->values->dtype, kept_,
                                                           std::move(kept_values), resident_->ttl_ms, resident_->label);
      } else if (values) {
        *kept->mutable_values_array() = Keep(*values, std::move(kept_values), elem_size_, resident_->values->dtype);
      }
      if (indices) {
        *kept->mutable_indices_array() = Keep(*indices, std::move(kept_indices), sizeof(int64_t), v1::DTYPE_INT64);
      }
      return grpc::Status::OK;
    }
    // Responses of whole elements, neither part above the chunk limit; kept_offset as streamed.
    const size_t widest = std::max(values ? out_size : 0, indices ? sizeof(int64_t) : 0);
    const uint64_t per = std::max<uint64_t>(ctx_.options->chunk_bytes / widest, 1);
    auto read = [&](const engine::ResidentMemory& from, size_t size, uint64_t first, uint64_t m) {
      Payload p = ctx_.payloads->Take(m * size);
      from.Read(first * size, p.data(), m * size);
      bytes_out_ += m * size;
      return p;
    };
    for (uint64_t first = 0; first < kept_; first += per) {
      const uint64_t m = std::min(per, kept_ - first);
      CompactReply& reply = out.emplace_back();
      if (values && narrow_) {
        reply.values = ctx_.payloads->Take(m * out_size);
        ReadNarrowed(*values, *narrow_, spec_.dtype, first, m, reply.values.data());
        bytes_out_ += m * out_size;
      } else if (values) {
        reply.values = read(*values, elem_size_, first, m);
      }
      if (indices) reply.indices = read(*indices, sizeof(int64_t), first, m);
      reply.msg.set_kept_offset(first);
    }
    return grpc::Status::OK;
  }

  // The first kept_ elements of a scratch result, copied into `memory` (of exactly their size) and
  // kept as a new array.
  v1::ArrayInfo Keep(const engine::ResidentMemory& scratch, std::shared_ptr<engine::ResidentMemory> memory, size_t size,
                     int dtype) {
    if (kept_ > 0) scratch.CopyTo(0, *memory, 0, kept_ * size);
    return ctx_.resident->Add(resident_->tenant, dtype, kept_, std::move(memory), resident_->ttl_ms, resident_->label);
  }

  // The whole region, piece by piece: kept values and indices go straight into their regions.
  grpc::Status CompactShared() {
    const SharedRanges& r = *shared_;
    auto status = ForEachPiece(r.elements, elem_size_, [this] { return Cancelled(); }, [&](uint64_t first, uint64_t n) {
      const uint8_t* flags = spec_.use_flags ? reinterpret_cast<const uint8_t*>(r.flags.data()) + first : nullptr;
      const uint64_t kept = session_->Process(
          r.in.data() + first * elem_size_, flags, n, spec_.want_values ? r.out.data() + kept_ * elem_size_ : nullptr,
          spec_.want_indices ? reinterpret_cast<int64_t*>(r.indices.data()) + kept_ : nullptr, stages_);
      kept_ += kept;
      ++chunks_;
    });
    if (!status.ok()) return status;
    processed_ = r.elements;
    bytes_in_ = processed_ * elem_size_ + (spec_.use_flags ? processed_ : 0);
    bytes_out_ = kept_ * ((spec_.want_values ? elem_size_ : 0) + (spec_.want_indices ? sizeof(int64_t) : 0));
    return CheckIntact(r);
  }

  // Kept values and indices go into payloads taken at the chunk's size and cut to what was kept.
  // Narrow values are widened to their carrier first and the kept ones narrowed back.
  void Select(const void* values, const uint8_t* flags, uint64_t n, std::vector<CompactReply>& out) {
    if (n == 0) return;
    Payload wide;
    values = EngineElements(narrow_, spec_.dtype, values, n, *ctx_.payloads, &wide);
    CompactReply resp;
    if (spec_.want_values) resp.values = ctx_.payloads->Take(n * elem_size_);
    if (spec_.want_indices) resp.indices = ctx_.payloads->Take(n * sizeof(int64_t));
    const uint64_t kept = session_->Process(values, flags, n, spec_.want_values ? resp.values.data() : nullptr,
                                            spec_.want_indices ? reinterpret_cast<int64_t*>(resp.indices.data()) : nullptr,
                                            stages_);
    if (narrow_ && spec_.want_values) {
      NarrowBack(*narrow_, spec_.dtype, resp.values.data(), resp.values.data(), kept);  // in place, front to back
      resp.values.Truncate(kept * narrow_->size);
    } else {
      resp.values.Truncate(kept * elem_size_);
    }
    resp.indices.Truncate(kept * sizeof(int64_t));
    processed_ += n;
    ++chunks_;
    if (kept == 0) return;
    resp.msg.set_kept_offset(kept_);
    kept_ += kept;
    bytes_out_ += resp.values.size() + resp.indices.size();
    out.push_back(std::move(resp));
  }

  engine::CompactSpec spec_;
  std::optional<NarrowInput> narrow_;   // a narrow header.dtype: run as its carrier (service/narrow.h)
  std::optional<SharedRanges> shared_;  // header.shared_memory: the mapped ranges
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges (header.resident: the arrays')
  std::optional<ResidentCall> resident_;  // header.resident
  std::optional<PairedChecker> checker_;
  std::unique_ptr<engine::CompactSession> session_;
  size_t elem_size_ = 4;
  std::optional<FlagsAligner> aligner_;  // use_flags: matches flags with values by position
  uint64_t processed_ = 0;
  uint64_t kept_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartCompact(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc) {
  return StartCall<CompactCall>(std::move(ctx), rpc, "compact");
}

}  // namespace gpuscan::server
