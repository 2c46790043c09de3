// GetServerInfo: what this server runs on and what it accepts.
#include <thread>

#include "service/handlers.h"
#include "service/pipeline_plan.h"
#include "service/validate.h"

namespace gpuscan::server {

void FillServerInfo(const CallContext& ctx, v1::ServerInfo* info) {
  const engine::Engine& eng = *ctx.engine;
  info->set_version(GPUSCAN_VERSION);
  info->set_engine(eng.name());
  for (const engine::DeviceInfo& d : eng.devices()) {
    v1::Device* out = info->add_devices();
    out->set_ordinal(d.ordinal);
    out->set_name(d.name);
    out->set_compute_capability_major(d.cc_major);
    out->set_compute_capability_minor(d.cc_minor);
    out->set_memory_bytes(d.memory_bytes);
    out->set_multiprocessors(d.multiprocessors);
    out->set_uuid(d.uuid);
  }
  for (engine::ScanAlgorithm a : eng.scan_algorithms()) info->add_scan_algorithms(ToWire(a));
  info->set_float_scan_default(ToWire(eng.float_scan_default()));
  for (const std::string& a : eng.reduce_algorithms()) info->add_reduce_algorithms(a);
  for (const std::string& a : eng.compact_algorithms()) info->add_compact_algorithms(a);
  for (engine::DType t : engine::kAllDTypes) info->add_dtypes(ToWire(t));
  for (int t = v1::DTYPE_INT8; t <= v1::DTYPE_FLOAT16; ++t) info->add_narrow_dtypes(static_cast<v1::DType>(t));
  for (const char* op : {"scan", "reduce", "segmented_scan", "reduce_by_key", "scan2d", "compact", "sort", "histogram"}) {
    info->add_narrow_operations(op);
  }
  for (engine::Op op : engine::kAllOps) info->add_operators(static_cast<v1::Operator>(static_cast<int>(op) + v1::OPERATOR_SUM));
  const ServerOptions& o = *ctx.options;
  v1::Limits* limits = info->mutable_limits();
  limits->set_max_chunk_bytes(o.chunk_bytes);
  limits->set_max_request_bytes(o.max_request_bytes);
  limits->set_max_concurrent_requests(o.max_concurrent);
  limits->set_max_queued_requests(o.max_queued);
  limits->set_max_receive_message_bytes(MaxReceiveMessageBytes(o));
  limits->set_max_lanes(o.max_lanes);
  limits->set_lane_wait_ms(static_cast<uint64_t>(o.lane_wait.count()));
  limits->set_shared_memory(!o.shm_dir.empty());
  limits->set_shm_dir(o.shm_dir);
  limits->set_max_histogram_bins(engine::kMaxHistogramBins);
  limits->set_max_sort_bytes(ctx.options->max_sort_bytes);
  limits->set_max_scan2d_row_bytes(ctx.options->max_scan2d_row_bytes);
  limits->set_device_ipc(ctx.device_ipc != nullptr && ctx.device_ipc->enabled());
  for (const char* op : {"scan", "reduce", "compact", "histogram", "segmented_scan", "reduce_by_key", "sort", "scan2d",
                         "scan_axis", "scan_carry"}) {
    info->add_operations(op);
  }
  if (ctx.resident != nullptr && ctx.resident->CheckServed().ok()) {
    info->add_operations("resident");
    info->add_operations("pipeline");
    limits->set_max_pipeline_stages(kMaxPipelineStages);
    limits->set_resident_bytes(ctx.resident->options().budget_bytes);
    limits->set_tenant_quota_bytes(ctx.resident->options().tenant_quota_bytes);
    limits->set_resident_ttl_ms(static_cast<uint64_t>(ctx.resident->options().max_ttl.count()));
    limits->set_spill_bytes(ctx.resident->options().spill_bytes);
  }
  info->set_cpu_threads(ctx.executor->threads());
}

}  // namespace gpuscan::server
