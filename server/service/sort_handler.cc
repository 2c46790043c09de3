// Sort: bidirectional streaming. The keys (and values) are held as they arrive, up to
// --max-sort-bytes; after the client half-closes the engine sorts them whole and the result
// goes back in chunks of --chunk-bytes, in order; the final response carries Timing.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/handlers.h"
#include "service/resident_call.h"
#include "service/resident_narrow.h"
#include "service/streaming_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

class SortCall final : public StreamingCall<v1::SortRequest, v1::SortResponse,
                                            grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>> {
 public:
  using StreamingCall::StreamingCall;

 protected:
  grpc::Status OnHeader(const v1::SortHeader& header) override {
    if (auto s = ToEngine(header, &spec_, &narrow_keys_, &narrow_values_); !s.ok()) return s;
    const bool device = header.has_device_memory();
    if (auto s = NarrowStreamedOnly(narrow_keys_, false, device); !s.ok()) return s;
    if (auto s = NarrowStreamedOnly(narrow_values_, false, device, "header.values_dtype"); !s.ok()) return s;
    const std::optional<uint64_t> count = DeclaredCount(header);
    const PairedChecker::Side side = SortSide(spec_, narrow_values_);
    checker_.emplace(spec_.dtype, narrow_keys_, side, count, ctx_.options->chunk_bytes,
                     ctx_.options->max_request_bytes);
    key_size_ = engine::SizeOf(spec_.dtype);
    value_size_ = spec_.has_values ? engine::SizeOf(spec_.values_dtype) : 0;
    budget_.emplace(spec_, ctx_.options->max_sort_bytes, narrow_keys_, narrow_values_);
    if (header.has_resident()) {
      const ResidentConflicts conflicts{false, device, false, true};
      if (auto s = OpenResident(*ctx_.resident, *rpc_, header.resident(), header.dtype(), count, conflicts,
                                &resident_.emplace(), &device_.emplace(), WantsOf(header));
          !s.ok()) {
        return s;
      }
      return budget_->CheckDeclared(device_->elements);
    }
    if (header.has_device_memory()) {
      SortNeeds needs;
      needs.key_size = key_size_;
      needs.keys_output = spec_.want_keys;
      needs.indices_output = spec_.want_indices;
      needs.value_size = value_size_;
      if (auto s = OpenDeviceSort(*ctx_.device_ipc, Peer(), header.device_memory(), needs, count, &device_.emplace());
          !s.ok()) {
        return s;
      }
      return budget_->CheckDeclared(device_->elements);
    }
    return budget_->CheckDeclared(count);
  }

  grpc::Status CheckRequest(const v1::SortRequest& req, uint64_t index) override {
    if (device_) {
      const char* header = resident_ ? "header.resident" : "header.device_memory";
      if (auto s = NoInlinePayload(req.keys().size(), "keys", index, header); !s.ok()) return s;
      return NoInlinePayload(req.values().size(), "values", index, header);
    }
    if (auto s = checker_->Add(req.keys().size(), req.values().size(), index); !s.ok()) return s;
    return budget_->Add(req.keys().size() + req.values().size());
  }

  bool HeaderEndsStream() const override { return resident_.has_value(); }
  void ReleaseHeld() override { resident_.reset(); }

  void Open() override {}

  void Process(v1::SortRequest& req, std::vector<v1::SortResponse>&) override {
    keys_.append(req.keys());
    values_.append(req.values());
    bytes_in_ += req.keys().size() + req.values().size();
    if (!req.keys().empty()) ++chunks_;
  }

  grpc::Status Complete(std::vector<v1::SortResponse>& out) override {
    if (resident_) return SortResident(out);
    if (device_) {
      SortDevice();
      FillFinal(out.emplace_back(), processed_, algorithm_);
      return grpc::Status::OK;
    }
    if (auto s = checker_->Finish(); !s.ok()) return s;
    const uint64_t n = checker_->elements();
    Widened(narrow_keys_, spec_.dtype, n, keys_);  // narrow keys and values run as their carriers
    Widened(narrow_values_, spec_.values_dtype, n, values_);
    std::string sorted_keys(spec_.want_keys ? keys_.size() : 0, '\0');
    std::string sorted_values(spec_.has_values ? values_.size() : 0, '\0');
    std::vector<int64_t> indices(spec_.want_indices ? n : 0);
    algorithm_ = ctx_.engine->Sort(spec_, keys_.data(), values_.data(), n, spec_.want_keys ? sorted_keys.data() : nullptr,
                                   spec_.has_values ? sorted_values.data() : nullptr,
                                   spec_.want_indices ? indices.data() : nullptr, stages_);
    keys_.clear();
    keys_.shrink_to_fit();
    values_.clear();
    values_.shrink_to_fit();
    const size_t key_out = Narrowed(narrow_keys_, spec_.dtype, n, sorted_keys);
    const size_t value_out = Narrowed(narrow_values_, spec_.values_dtype, n, sorted_values);
    const char* sorted[3] = {sorted_keys.data(), sorted_values.data(), reinterpret_cast<const char*>(indices.data())};
    Respond(n, OutputSizes(key_out, value_out), out, [&](int f, uint64_t at, uint64_t bytes, char* dst) {
      std::memcpy(dst, sorted[f] + at, bytes);
    });
    processed_ = n;
    FillFinal(out.emplace_back(), n, algorithm_);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    return fmt::format("dtype={} descending={} values={} indices={} n={} algorithm={} engine={}",
                       narrow_keys_ ? NarrowName(narrow_keys_->wire) : engine::Name(spec_.dtype), spec_.descending,
                       !spec_.has_values ? "-"
                       : narrow_values_  ? NarrowName(narrow_values_->wire)
                                         : engine::Name(spec_.values_dtype),
                       spec_.want_indices,
                       processed_, algorithm_.empty() ? "-" : algorithm_, ctx_.engine->name());
  }

  MetricLabels Labels() const override { return {std::string(engine::Name(spec_.dtype)), algorithm_, ""}; }

 private:
  // A narrow array held as it arrived, widened in place of itself into its carrier.
  static void Widened(const std::optional<NarrowInput>& narrow, engine::DType carrier, uint64_t n, std::string& bytes) {
    if (!narrow || bytes.empty()) return;
    std::string wide(n * engine::SizeOf(carrier), '\0');
    Widen(*narrow, carrier, bytes.data(), wide.data(), n);
    bytes.swap(wide);
  }
  // A sorted carrier array narrowed back in place (exact: its values are the input's); the
  // element size it leaves.
  static size_t Narrowed(const std::optional<NarrowInput>& narrow, engine::DType carrier, uint64_t n,
                         std::string& bytes) {
    if (!narrow) return engine::SizeOf(carrier);
    if (!bytes.empty()) {
      NarrowBack(*narrow, carrier, bytes.data(), bytes.data(), n);  // front to back
      bytes.resize(n * narrow->size);
    }
    return narrow->size;
  }

  // The element size of each output (keys, values, indices), 0 for those not asked for.
  std::array<size_t, 3> OutputSizes(size_t key_out, size_t value_out) const {
    return {spec_.want_keys ? key_out : 0, spec_.has_values ? value_out : 0, spec_.want_indices ? sizeof(int64_t) : 0};
  }

  // The sorted outputs in responses of whole elements, no part above the chunk limit:
  // read(output, byte offset, bytes, dst) copies that part of output 0, 1 or 2 (OutputSizes).
  template <class Read>
  void Respond(uint64_t n, const std::array<size_t, 3>& sizes, std::vector<v1::SortResponse>& out, Read&& read) {
    const size_t widest = *std::max_element(sizes.begin(), sizes.end());
    const uint64_t per = std::max<uint64_t>(ctx_.options->chunk_bytes / widest, 1);
    for (uint64_t first = 0; first < n; first += per) {
      const uint64_t m = std::min(per, n - first);
      v1::SortResponse& resp = out.emplace_back();
      std::string* fields[3] = {resp.mutable_keys(), resp.mutable_values(), resp.mutable_indices()};
      for (int f = 0; f < 3; ++f) {
        if (sizes[f] == 0) continue;
        fields[f]->resize(m * sizes[f]);
        read(f, first * sizes[f], m * sizes[f], fields[f]->data());
        bytes_out_ += m * sizes[f];
      }
      resp.set_offset(first);
    }
  }

  // header.resident: sorted from the arrays into new memory (never in place: the inputs stay as
  // they are), kept as new arrays or read back in responses as a streamed call's. Narrow keys or
  // values are sorted as their carriers (widened into counted memory for the call) and narrowed
  // back (resident_narrow.h).
  grpc::Status SortResident(std::vector<v1::SortResponse>& out) {
    const uint64_t n = device_->elements;
    std::shared_ptr<engine::ResidentMemory> wide[2];  // the narrow inputs as carriers
    if (auto s = WidenInput(*resident_->values, narrow_keys_, spec_.dtype, &wide[0]); !s.ok()) return s;
    if (wide[0]) device_->in = wide[0]->data();
    if (spec_.has_values) {
      if (auto s = WidenInput(*resident_->sort_values, narrow_values_, spec_.values_dtype, &wide[1]); !s.ok()) return s;
      if (wide[1]) device_->values = wide[1]->data();
    }
    const std::array<size_t, 3> sizes = OutputSizes(key_size_, value_size_);
    std::shared_ptr<engine::ResidentMemory> outputs[3];
    for (int f = 0; f < 3; ++f) {
      if (sizes[f] == 0) continue;
      if (auto s = ResidentOutput(*ctx_.resident, *resident_, n * sizes[f], &outputs[f]); !s.ok()) return s;
    }
    auto data = [](const std::shared_ptr<engine::ResidentMemory>& m) { return m ? m->data() : nullptr; };
    device_->out = data(outputs[0]);
    device_->values_output = data(outputs[1]);
    device_->indices = reinterpret_cast<int64_t*>(data(outputs[2]));
    SortDevice();
    wide[0].reset();
    wide[1].reset();
    bytes_in_ = bytes_out_ = 0;  // nothing crossed the wire
    v1::SortResponse final;
    if (resident_->keep) {
      if (auto s = NarrowOutputs(n, outputs); !s.ok()) return s;
      const int dtypes[3] = {resident_->values->dtype, spec_.has_values ? resident_->sort_values->dtype : 0,
                             v1::DTYPE_INT64};
      auto info = [&](int f) {  // only those kept are set
        return f == 0   ? final.mutable_keys_array()
               : f == 1 ? final.mutable_values_array()
                        : final.mutable_indices_array();
      };
      for (int f = 0; f < 3; ++f) {
        if (sizes[f] == 0) continue;
        *info(f) = ctx_.resident->Add(resident_->tenant, dtypes[f], n, std::move(outputs[f]), resident_->ttl_ms,
                                       resident_->label);
      }
    } else {
      const std::optional<NarrowInput>* narrows[3] = {&narrow_keys_, &narrow_values_, nullptr};
      const engine::DType carriers[2] = {spec_.dtype, spec_.values_dtype};
      const size_t key_out = narrow_keys_ ? narrow_keys_->size : key_size_;
      const size_t value_out = narrow_values_ ? narrow_values_->size : value_size_;
      const std::array<size_t, 3> wire = OutputSizes(key_out, value_out);
      Respond(n, wire, out, [&](int f, uint64_t at, uint64_t bytes, char* dst) {
        if (f < 2 && *narrows[f]) {
          ReadNarrowed(*outputs[f], **narrows[f], carriers[f], at / wire[f], bytes / wire[f], dst);
        } else {
          outputs[f]->Read(at, dst, bytes);
        }
      });
    }
    FillFinal(final, processed_, algorithm_);
    out.push_back(std::move(final));
    return grpc::Status::OK;
  }

  // A narrow resident input widened into its carrier for the call (*wide unset for another).
  grpc::Status WidenInput(const ResidentArray& a, const std::optional<NarrowInput>& narrow, engine::DType carrier,
                          std::shared_ptr<engine::ResidentMemory>* wide) {
    if (!narrow) return grpc::Status::OK;
    return WidenResident(*ctx_.resident, resident_->tenant, *a.memory, *narrow, carrier, a.count,
                         ctx_.options->chunk_bytes, wide);
  }

  // Kept sorted carriers of narrow inputs replaced by their narrow arrays: every one allocated
  // (counted) before any is filled, so that a refusal keeps none.
  grpc::Status NarrowOutputs(uint64_t n, std::shared_ptr<engine::ResidentMemory>* outputs) {
    const std::optional<NarrowInput>* narrows[2] = {&narrow_keys_, &narrow_values_};
    const engine::DType carriers[2] = {spec_.dtype, spec_.values_dtype};
    std::shared_ptr<engine::ResidentMemory> narrowed[2];
    for (int f = 0; f < 2; ++f) {
      if (!outputs[f] || !*narrows[f]) continue;
      auto s = ctx_.resident->Allocate(resident_->tenant, n * (*narrows[f])->size, &narrowed[f],
                                       resident_->values->memory.get());
      if (!s.ok()) return s;
    }
    for (int f = 0; f < 2; ++f) {
      if (!narrowed[f]) continue;
      NarrowInto(*outputs[f], **narrows[f], carriers[f], n, *narrowed[f], ctx_.options->chunk_bytes);
      outputs[f] = std::move(narrowed[f]);
    }
    return grpc::Status::OK;
  }

  // The whole arrays at once where they lie (the caller's device memory, or resident arrays).
  void SortDevice() {
    const DeviceRanges& r = *device_;
    auto session = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewSort(spec_); });
    session->Run(r.in, r.values, r.elements, spec_.want_keys ? r.out : nullptr,
                 spec_.has_values ? r.values_output : nullptr, spec_.want_indices ? r.indices : nullptr, stages_);
    algorithm_ = session->algorithm();
    processed_ = r.elements;
    bytes_in_ = processed_ * (key_size_ + value_size_);
    bytes_out_ = processed_ * ((spec_.want_keys ? key_size_ : 0) + value_size_ + (spec_.want_indices ? 8 : 0));
    ++chunks_;
  }

  engine::SortSpec spec_;
  std::optional<NarrowInput> narrow_keys_, narrow_values_;  // narrow dtypes, run as their carriers
  std::optional<PairedChecker> checker_;
  std::optional<SortBudget> budget_;
  size_t key_size_ = 4, value_size_ = 0;
  std::string keys_, values_;  // the whole input, held until the client half-closes
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges (header.resident: the arrays')
  std::optional<ResidentCall> resident_;  // header.resident
  std::string algorithm_;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* StartSort(CallContext ctx,
                                                                      grpc::CallbackServerContext* rpc) {
  return StartCall<SortCall>(std::move(ctx), rpc, "sort");
}

}  // namespace gpuscan::server
