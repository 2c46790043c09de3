// Calls on shared memory (header.shared_memory): the header alone goes out, the server reads
// and writes the regions, the final response comes back.
#include "gpuscan/client.h"

namespace gpuscan {
namespace {

// The header's shared_memory for the whole of `in`: region and bytes, and the caller's `arena`.
v1::SharedMemory Whole(const v1::SharedMemory& given, const SharedRegion& in, size_t bytes) {
  v1::SharedMemory m;
  m.set_region(in.name());
  m.set_bytes(bytes);
  m.set_arena(given.arena());
  return m;
}

}  // namespace

Timing Client::ScanShared(v1::ScanHeader header, const SharedRegion& in, size_t bytes, const SharedRegion* out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Whole(*m, in, bytes);
  if (out && out != &in) m->set_output_region(out->name());
  return ScanStream(header, Source{}, Sink{}, {}, 1);
}

v1::ReduceResponse Client::ReduceShared(v1::ReduceHeader header, const SharedRegion& in, size_t bytes) {
  *header.mutable_shared_memory() = Whole(header.shared_memory(), in, bytes);
  return ReduceStream(header, Source{}, {}, 1);
}

v1::CompactResponse Client::CompactShared(v1::CompactHeader header, const SharedRegion& in, size_t bytes,
                                          const SharedRegion* flags, const SharedRegion* values_out,
                                          const SharedRegion* indices_out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Whole(*m, in, bytes);
  if (flags) m->set_flags_region(flags->name());
  if (values_out) m->set_output_region(values_out->name());
  if (indices_out) m->set_indices_region(indices_out->name());
  return CompactStream(header, Source{}, Source{}, Sink{}, Sink{}, {}, 1);
}

}  // namespace gpuscan
