// The server's reading of a HistogramHeader (service/validate): the checks the bad-input matrix
// cannot reach over its small receive limit, and the edges it hands the engine.
#include <gtest/gtest.h>

#include <vector>

#include "gpuscan/kernels/histogram_bins.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

TEST(HistogramHeader, EdgesAboveTheBinLimitNameTheField) {
  v1::HistogramHeader h;
  h.set_dtype(v1::DTYPE_FLOAT64);
  for (uint32_t i = 0; i <= engine::kMaxHistogramBins + 1; ++i) h.add_edges(i);
  engine::HistogramSpec spec;
  const grpc::Status s = ToEngine(h, engine::kMaxHistogramBins, &spec);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("header.edges: 65537 bins exceed the server's limit of 65536"), std::string::npos)
      << s.error_message();
  h.mutable_edges()->RemoveLast();  // exactly the limit
  EXPECT_TRUE(ToEngine(h, engine::kMaxHistogramBins, &spec).ok());
  EXPECT_EQ(spec.edges.size(), engine::kMaxHistogramBins + 1);
  EXPECT_FALSE(spec.even);
}

TEST(HistogramHeader, EvenBinsBecomeEdgesRoundedForFloat32) {
  v1::HistogramHeader h;
  h.set_bins(10);
  h.set_lo(0);
  h.set_hi(1);
  engine::HistogramSpec spec;
  h.set_dtype(v1::DTYPE_FLOAT64);
  ASSERT_TRUE(ToEngine(h, 16, &spec).ok());
  EXPECT_TRUE(spec.even);
  EXPECT_EQ(spec.edges, hist::EvenEdges(0, 1, 10, false));
  h.set_dtype(v1::DTYPE_FLOAT32);
  ASSERT_TRUE(ToEngine(h, 16, &spec).ok());
  EXPECT_EQ(spec.edges, hist::EvenEdges(0, 1, 10, true));
  EXPECT_NE(spec.edges[1], 0.1);  // 0.1 rounded to float32
  h.set_bins(17);
  const grpc::Status s = ToEngine(h, 16, &spec);
  EXPECT_NE(s.error_message().find("header.bins: 17 bins exceed the server's limit of 16"), std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace gpuscan::server
