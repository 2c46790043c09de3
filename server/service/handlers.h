// Entry points of the RPC handler families, one .cc file each; GpuScanService (server.cc)
// routes each gRPC method to one of these.
#pragma once

#include <grpcpp/grpcpp.h>

#include "gpuscan/v1/gpuscan.grpc.pb.h"
#include "service/call_context.h"

namespace gpuscan::server {

// Scan is raw: ScanRequest / ScanResponse bytes in and out (wire.h), so its data is never copied
// into or out of a protobuf string.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartScan(CallContext ctx,
                                                                       grpc::CallbackServerContext* rpc);
// Reduce is raw too (its response is encoded into `response` when the call completes).
grpc::ServerReadReactor<grpc::ByteBuffer>* StartReduce(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                       grpc::ByteBuffer* response);
// Histogram reads raw too (its response is encoded into `response` when the call completes).
grpc::ServerReadReactor<grpc::ByteBuffer>* StartHistogram(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                          grpc::ByteBuffer* response);
// Compact is raw too (values and flags in, kept values and indices out, each in a payload).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartCompact(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc);
// SegmentedScan is raw in and out (values and keys in, the scanned values out, in payloads).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartSegmentedScan(CallContext ctx,
                                                                                grpc::CallbackServerContext* rpc);
// ReduceByKey reads raw (its inputs gathered into payloads); its responses are plain messages,
// encoded.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartReduceByKey(CallContext ctx,
                                                                              grpc::CallbackServerContext* rpc);
grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* StartSort(CallContext ctx,
                                                                      grpc::CallbackServerContext* rpc);
grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>* StartScan2D(CallContext ctx,
                                                                          grpc::CallbackServerContext* rpc);
// Benchmark: the kernel suite on the server's device, rows streamed as measured.
grpc::ServerWriteReactor<v1::BenchmarkRow>* StartBenchmark(CallContext ctx, const v1::BenchmarkRequest* request);
// Transport: the diagnostic transport ceiling (bytes in and, with echo, straight back out). Raw,
// like Scan.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartTransport(
    CallContext ctx, grpc::CallbackServerContext* rpc);
void FillServerInfo(const CallContext& ctx, v1::ServerInfo* info);
// Resident arrays (resident_handler.cc): PutArray is raw like Reduce; the others typed.
grpc::ServerReadReactor<grpc::ByteBuffer>* StartPutArray(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                         grpc::ByteBuffer* response);
grpc::ServerWriteReactor<v1::GetArrayResponse>* StartGetArray(const CallContext& ctx, grpc::CallbackServerContext* rpc,
                                                              const v1::GetArrayRequest* request);
grpc::Status DropArray(const CallContext& ctx, const grpc::CallbackServerContext& rpc,
                       const v1::DropArrayRequest& request, v1::DropArrayResponse* response);
grpc::Status ListArrays(const CallContext& ctx, const grpc::CallbackServerContext& rpc, const v1::ListArraysRequest& request,
                        v1::ListArraysResponse* response);
// Pipeline (pipeline_handler.cc): stages on resident arrays, typed.
grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>* StartPipeline(CallContext ctx,
                                                                                  grpc::CallbackServerContext* rpc);

}  // namespace gpuscan::server
