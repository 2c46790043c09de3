// Helpers of the Pipeline tests (pipeline_*_test.cc): one Pipeline call through the raw stub, its
// responses by stage, and the stage inputs of a header.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing::resident {

struct PipelineRun {
  std::vector<v1::PipelineResponse> responses;
  grpc::Status status;
  // Stage i's final response (the last one of that stage).
  const v1::PipelineResponse& Final(uint32_t stage) const {
    const v1::PipelineResponse* last = nullptr;
    for (const auto& r : responses) {
      if (r.stage() == stage) last = &r;
    }
    EXPECT_NE(last, nullptr) << "no response for stage " << stage;
    static const v1::PipelineResponse kNone;
    return last ? *last : kNone;
  }
  // Stage i's returned data, concatenated (scan: data; compact: values; sort: keys).
  std::string Data(uint32_t stage) const {
    std::string out;
    for (const auto& r : responses) {
      if (r.stage() != stage) continue;
      out += r.scan().data();
      out += r.compact().values();
      out += r.sort().keys();
    }
    return out;
  }
  // A sort stage's moved values, concatenated.
  std::string SortValues(uint32_t stage) const {
    std::string out;
    for (const auto& r : responses) {
      if (r.stage() == stage) out += r.sort().values();
    }
    return out;
  }
};

// The header, then `input` (the streamed input) in chunks of kChunk bytes, as `tenant`.
inline PipelineRun RunPipeline(v1::GpuScan::Stub& stub, const v1::PipelineHeader& header, const std::string& input = "",
                               const std::string& tenant = "") {
  grpc::ClientContext ctx;
  Tenant(&ctx, tenant);
  auto stream = stub.Pipeline(&ctx);
  v1::PipelineRequest req;
  *req.mutable_header() = header;
  stream->Write(req);
  for (size_t at = 0; at < input.size(); at += kChunk) {
    v1::PipelineRequest chunk;
    chunk.set_data(input.substr(at, kChunk));
    stream->Write(chunk);
  }
  stream->WritesDone();
  PipelineRun run;
  v1::PipelineResponse resp;
  while (stream->Read(&resp)) run.responses.push_back(resp);
  run.status = stream->Finish();
  return run;
}

inline v1::StageInput FromId(const std::string& id) {
  v1::StageInput in;
  in.set_id(id);
  return in;
}
inline v1::StageInput FromStage(uint32_t stage, v1::StageArray array = v1::STAGE_ARRAY_VALUES) {
  v1::StageInput in;
  in.set_stage(stage);
  in.set_array(array);
  return in;
}
inline v1::StageInput FromStream() {
  v1::StageInput in;
  in.set_streamed(true);
  return in;
}

}  // namespace gpuscan::testing::resident
