// Calls on shared memory (header.shared_memory): the header alone goes out, the server reads
// and writes the regions, the final response comes back.
#include "gpuscan/client.h"

namespace gpuscan {
namespace {

v1::SharedMemory Whole(const SharedRegion& in, size_t bytes) {
  v1::SharedMemory m;
  m.set_region(in.name());
  m.set_bytes(bytes);
  return m;
}

}  // namespace

Timing Client::ScanShared(v1::ScanHeader header, const SharedRegion& in, size_t bytes, const SharedRegion* out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Whole(in, bytes);
  if (out && out != &in) m->set_output_region(out->name());
  return ScanStream(header, Source{}, Sink{}, {}, 1);
}

v1::ReduceResponse Client::ReduceShared(v1::ReduceHeader header, const SharedRegion& in, size_t bytes) {
  *header.mutable_shared_memory() = Whole(in, bytes);
  return ReduceStream(header, Source{}, {}, 1);
}

v1::CompactResponse Client::CompactShared(v1::CompactHeader header, const SharedRegion& in, size_t bytes,
                                          const SharedRegion* flags, const SharedRegion* values_out,
                                          const SharedRegion* indices_out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Whole(in, bytes);
  if (flags) m->set_flags_region(flags->name());
  if (values_out) m->set_output_region(values_out->name());
  if (indices_out) m->set_indices_region(indices_out->name());
  return CompactStream(header, Source{}, Source{}, Sink{}, Sink{}, {}, 1);
}

}  // namespace gpuscan
