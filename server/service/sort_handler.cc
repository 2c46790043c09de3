// Sort: bidirectional streaming. The keys (and values) are held as they arrive, up to
// --max-sort-bytes; after the client half-closes the engine sorts them whole and the result
// goes back in chunks of --chunk-bytes, in order; the final response carries Timing.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/handlers.h"
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
      if (auto s = NoInlinePayload(req.keys().size(), "keys", index, "header.device_memory"); !s.ok()) return s;
      return NoInlinePayload(req.values().size(), "values", index, "header.device_memory");
    }
    if (auto s = checker_->Add(req.keys().size(), req.values().size(), index); !s.ok()) return s;
    return budget_->Add(req.keys().size() + req.values().size());
  }

  void Open() override {}

  void Process(v1::SortRequest& req, std::vector<v1::SortResponse>&) override {
    keys_.append(req.keys());
    values_.append(req.values());
    bytes_in_ += req.keys().size() + req.values().size();
    if (!req.keys().empty()) ++chunks_;
  }

  grpc::Status Complete(std::vector<v1::SortResponse>& out) override {
    if (device_) return SortDevice(out);
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
    // Chunks of whole elements, no part above the chunk limit.
    const size_t widest =
        std::max({spec_.want_keys ? key_out : 0, spec_.has_values ? value_out : 0, spec_.want_indices ? size_t{8} : 0});
    const uint64_t per = std::max<uint64_t>(ctx_.options->chunk_bytes / widest, 1);
    for (uint64_t first = 0; first < n; first += per) {
      const uint64_t m = std::min(per, n - first);
      v1::SortResponse& resp = out.emplace_back();
      if (spec_.want_keys) resp.set_keys(sorted_keys.data() + first * key_out, m * key_out);
      if (spec_.has_values) resp.set_values(sorted_values.data() + first * value_out, m * value_out);
      if (spec_.want_indices) resp.set_indices(indices.data() + first, m * sizeof(int64_t));
      resp.set_offset(first);
      bytes_out_ += resp.keys().size() + resp.values().size() + resp.indices().size();
    }
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

  // The arrays in the caller's device memory: sorted where they lie, only the final response back.
  grpc::Status SortDevice(std::vector<v1::SortResponse>& out) {
    const DeviceRanges& r = *device_;
    auto session = OpenSession(*ctx_.engine, device_, [&](engine::Engine& e) { return e.NewSort(spec_); });
    session->Run(r.in, r.values, r.elements, spec_.want_keys ? r.out : nullptr,
                 spec_.has_values ? r.values_output : nullptr, spec_.want_indices ? r.indices : nullptr, stages_);
    algorithm_ = session->algorithm();
    processed_ = r.elements;
    bytes_in_ = processed_ * (key_size_ + value_size_);
    bytes_out_ = processed_ * ((spec_.want_keys ? key_size_ : 0) + value_size_ + (spec_.want_indices ? 8 : 0));
    ++chunks_;
    FillFinal(out.emplace_back(), processed_, algorithm_);
    return grpc::Status::OK;
  }

  engine::SortSpec spec_;
  std::optional<NarrowInput> narrow_keys_, narrow_values_;  // narrow dtypes, run as their carriers
  std::optional<PairedChecker> checker_;
  std::optional<SortBudget> budget_;
  size_t key_size_ = 4, value_size_ = 0;
  std::string keys_, values_;  // the whole input, held until the client half-closes
  std::optional<DeviceRanges> device_;  // header.device_memory: the opened ranges
  std::string algorithm_;
  uint64_t processed_ = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* StartSort(CallContext ctx,
                                                                      grpc::CallbackServerContext* rpc) {
  return StartCall<SortCall>(std::move(ctx), rpc, "sort");
}

}  // namespace gpuscan::server
