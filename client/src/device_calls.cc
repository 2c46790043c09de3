// Calls on device memory (header.device_memory): the header alone goes out, the server opens the
// handles and computes where the arrays lie, the final response comes back.
#include "gpuscan/client.h"

namespace gpuscan {
namespace {

v1::DeviceMemory Input(const DeviceArray& in) {
  v1::DeviceMemory m;
  m.set_device_uuid(in.device_uuid);
  m.set_handle(in.handle);
  m.set_offset(in.offset);
  m.set_bytes(in.bytes);
  return m;
}

}  // namespace

Timing Client::ScanDevice(v1::ScanHeader header, const DeviceArray& in, const DeviceArray* out) {
  v1::DeviceMemory* m = header.mutable_device_memory();
  *m = Input(in);
  if (out && out != &in) {
    m->set_output_handle(out->handle);
    m->set_output_offset(out->offset);
  }
  return ScanStream(header, Source{}, Sink{}, {}, 1);
}

v1::ReduceResponse Client::ReduceDevice(v1::ReduceHeader header, const DeviceArray& in) {
  *header.mutable_device_memory() = Input(in);
  return ReduceStream(header, Source{}, {}, 1);
}

v1::CompactResponse Client::CompactDevice(v1::CompactHeader header, const DeviceArray& in, const DeviceArray* flags,
                                          const DeviceArray* values_out, const DeviceArray* indices_out) {
  v1::DeviceMemory* m = header.mutable_device_memory();
  *m = Input(in);
  if (flags) {
    m->set_flags_handle(flags->handle);
    m->set_flags_offset(flags->offset);
  }
  if (values_out) {
    m->set_output_handle(values_out->handle);
    m->set_output_offset(values_out->offset);
  }
  if (indices_out) {
    m->set_indices_handle(indices_out->handle);
    m->set_indices_offset(indices_out->offset);
  }
  return CompactStream(header, Source{}, Source{}, Sink{}, Sink{}, {}, 1);
}

}  // namespace gpuscan
