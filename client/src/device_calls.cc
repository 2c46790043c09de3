// Calls on device memory (header.device_memory): the header alone goes out, the server opens the
// handles and computes where the arrays lie, the final response comes back.
#include "gpuscan/client.h"

#include <string>

#include "gpuscan/rpc_error.h"

namespace gpuscan {
v1::DeviceMemory Client::DeviceMemoryOf(const DeviceArray& in) {
  v1::DeviceMemory m;
  m.set_device_uuid(in.device_uuid);
  m.set_handle(in.handle);
  m.set_offset(in.offset);
  m.set_bytes(in.bytes);
  return m;
}

Timing Client::ScanDevice(v1::ScanHeader header, const DeviceArray& in, const DeviceArray* out) {
  v1::DeviceMemory* m = header.mutable_device_memory();
  *m = DeviceMemoryOf(in);
  if (out && out != &in) {
    m->set_output_handle(out->handle);
    m->set_output_offset(out->offset);
  }
  return FromProto(ScanHeaderOnly(header).timing());
}

v1::ReduceResponse Client::ReduceDevice(v1::ReduceHeader header, const DeviceArray& in) {
  *header.mutable_device_memory() = DeviceMemoryOf(in);
  return ReduceHeaderOnly(header);
}

v1::CompactResponse Client::CompactDevice(v1::CompactHeader header, const DeviceArray& in, const DeviceArray* flags,
                                          const DeviceArray* values_out, const DeviceArray* indices_out) {
  v1::DeviceMemory* m = header.mutable_device_memory();
  *m = DeviceMemoryOf(in);
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
  return CompactHeaderOnly(header);
}

// The generated stub's synchronous calls: one write with the half-close, the responses read on
// this thread (no data comes back: the final response alone, or an error).
namespace {

template <class Request, class Response, class Header, class Open>
Response BidiHeaderOnly(const Header& header, Open open, const char* rpc) {
  Request request;
  *request.mutable_header() = header;
  auto stream = open();
  stream->WriteLast(request, grpc::WriteOptions());
  Response response, last;
  bool any = false;
  while (stream->Read(&response)) {
    last = std::move(response);
    any = true;
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) throw RpcError(status);
  if (!any) throw RpcError(grpc::StatusCode::INTERNAL, std::string("gpuscan: ") + rpc + " ended with no final response");
  return last;
}

}  // namespace

v1::ScanResponse Client::ScanHeaderOnly(const v1::ScanHeader& header) {
  auto ctx = NewContext();
  return BidiHeaderOnly<v1::ScanRequest, v1::ScanResponse>(header, [&] { return stub_->Scan(ctx.get()); }, "Scan");
}

v1::CompactResponse Client::CompactHeaderOnly(const v1::CompactHeader& header) {
  auto ctx = NewContext();
  return BidiHeaderOnly<v1::CompactRequest, v1::CompactResponse>(header, [&] { return stub_->Compact(ctx.get()); },
                                                                 "Compact");
}

namespace {

// Client-streaming calls (Reduce, Histogram): one write with the half-close, one response.
template <class Request, class Response, class Header, class Open>
Response UnaryHeaderOnly(const Header& header, Open open) {
  Request request;
  *request.mutable_header() = header;
  Response response;
  auto writer = open(&response);
  writer->WriteLast(request, grpc::WriteOptions());
  const grpc::Status status = writer->Finish();
  if (!status.ok()) throw RpcError(status);
  return response;
}

}  // namespace

v1::ReduceResponse Client::ReduceHeaderOnly(const v1::ReduceHeader& header) {
  auto ctx = NewContext();
  return UnaryHeaderOnly<v1::ReduceRequest, v1::ReduceResponse>(
      header, [&](v1::ReduceResponse* r) { return stub_->Reduce(ctx.get(), r); });
}

v1::HistogramResponse Client::HistogramHeaderOnly(const v1::HistogramHeader& header) {
  auto ctx = NewContext();
  return UnaryHeaderOnly<v1::HistogramRequest, v1::HistogramResponse>(
      header, [&](v1::HistogramResponse* r) { return stub_->Histogram(ctx.get(), r); });
}

v1::ScanResponse Client::SegmentedScanHeaderOnly(const v1::SegmentedScanHeader& header) {
  auto ctx = NewContext();
  return BidiHeaderOnly<v1::SegmentedScanRequest, v1::ScanResponse>(
      header, [&] { return stub_->SegmentedScan(ctx.get()); }, "SegmentedScan");
}

v1::SortResponse Client::SortHeaderOnly(const v1::SortHeader& header) {
  auto ctx = NewContext();
  return BidiHeaderOnly<v1::SortRequest, v1::SortResponse>(header, [&] { return stub_->Sort(ctx.get()); }, "Sort");
}

}  // namespace gpuscan
