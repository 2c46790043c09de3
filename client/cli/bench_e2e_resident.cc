#include "bench_e2e_resident.h"

namespace gpuscan::cli {

Timing ResidentCall(Client& client, const E2EArgs& a, const RemoteArray& in, const Sink& out,
                    const v1::Predicate& predicate) {
  const auto dtype = static_cast<v1::DType>(in.info().dtype());
  if (a.op == "scan") {
    v1::ScanHeader h;
    h.set_dtype(dtype);
    h.set_op(v1::OPERATOR_SUM);
    h.mutable_resident()->set_values(in.id());
    const v1::ScanResponse r = client.ScanResident(h, out);
    if (r.element_count() != in.info().element_count()) throw std::runtime_error("resident scan result incomplete");
    return FromProto(r.timing());
  }
  if (a.op == "reduce") {
    v1::ReduceHeader h;
    h.set_dtype(dtype);
    h.set_op(v1::OPERATOR_SUM);
    h.mutable_resident()->set_values(in.id());
    return FromProto(client.ReduceResident(h).timing());
  }
  v1::CompactHeader h;
  h.set_dtype(dtype);
  *h.mutable_predicate() = predicate;
  h.mutable_resident()->set_values(in.id());
  return FromProto(client.CompactResident(h, [](const void*, size_t) {}).timing());
}

}  // namespace gpuscan::cli
