// Calls on shared memory (header.shared_memory): the header alone goes out, the server reads
// and writes the regions, the final response comes back.
#include "gpuscan/client.h"

namespace gpuscan {
namespace {

// The header's shared_memory for `in`, with the caller's arena bit or the span's.
v1::SharedMemory Input(const v1::SharedMemory& given, const SharedSpan& in) {
  v1::SharedMemory m;
  m.set_region(in.region);
  m.set_offset(in.offset);
  m.set_bytes(in.bytes);
  m.set_arena(given.arena() || in.arena);
  return m;
}

// The first `bytes` of `in`, unchecked: the server judges a length past the region's end.
SharedSpan Whole(const SharedRegion& in, size_t bytes) {
  SharedSpan s;
  s.region = in.name();
  s.bytes = bytes;
  s.data = in.data();
  return s;
}

const SharedSpan* SpanOf(const SharedRegion* r, SharedSpan* holder) {
  if (r == nullptr) return nullptr;
  *holder = Whole(*r, r->bytes());
  return holder;
}

}  // namespace

Timing Client::ScanShared(v1::ScanHeader header, const SharedSpan& in, const SharedSpan* out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Input(*m, in);
  if (out && !(out->region == in.region && out->offset == in.offset)) {  // else in place
    m->set_output_region(out->region);
    m->set_output_offset(out->offset);
  }
  return ScanStream(header, Source{}, Sink{}, {}, 1);
}

v1::ReduceResponse Client::ReduceShared(v1::ReduceHeader header, const SharedSpan& in) {
  *header.mutable_shared_memory() = Input(header.shared_memory(), in);
  return ReduceStream(header, Source{}, {}, 1);
}

v1::CompactResponse Client::CompactShared(v1::CompactHeader header, const SharedSpan& in, const SharedSpan* flags,
                                          const SharedSpan* values_out, const SharedSpan* indices_out) {
  v1::SharedMemory* m = header.mutable_shared_memory();
  *m = Input(*m, in);
  if (flags) {
    m->set_flags_region(flags->region);
    m->set_flags_offset(flags->offset);
  }
  if (values_out) {
    m->set_output_region(values_out->region);
    m->set_output_offset(values_out->offset);
  }
  if (indices_out) {
    m->set_indices_region(indices_out->region);
    m->set_indices_offset(indices_out->offset);
  }
  return CompactStream(header, Source{}, Source{}, Sink{}, Sink{}, {}, 1);
}

Timing Client::ScanShared(v1::ScanHeader header, const SharedRegion& in, size_t bytes, const SharedRegion* out) {
  SharedSpan o;
  return ScanShared(std::move(header), Whole(in, bytes), out == &in ? nullptr : SpanOf(out, &o));
}

v1::ReduceResponse Client::ReduceShared(v1::ReduceHeader header, const SharedRegion& in, size_t bytes) {
  return ReduceShared(std::move(header), Whole(in, bytes));
}

v1::CompactResponse Client::CompactShared(v1::CompactHeader header, const SharedRegion& in, size_t bytes,
                                          const SharedRegion* flags, const SharedRegion* values_out,
                                          const SharedRegion* indices_out) {
  SharedSpan f, v, i;
  return CompactShared(std::move(header), Whole(in, bytes), SpanOf(flags, &f), SpanOf(values_out, &v),
                       SpanOf(indices_out, &i));
}

}  // namespace gpuscan
