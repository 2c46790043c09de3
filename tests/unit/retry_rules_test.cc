// The client's retry rules (client/src/retry.h): which errors are tried again, and the one wait a
// call gives a refused connection over all its tries.
#include <gtest/gtest.h>

#include <chrono>

#include "retry.h"

namespace gpuscan::detail {
namespace {

TEST(RetryRules, TheLinksFaultsAreTriedAgainWhatTheServerAnsweredIsNot) {
  EXPECT_TRUE(Retryable(RpcError(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses")));
  EXPECT_TRUE(Retryable(RpcError(grpc::StatusCode::CANCELLED, "Cancelled")));
  EXPECT_TRUE(Retryable(RpcError(grpc::StatusCode::INTERNAL, "Received RST_STREAM with error code 1")));
  EXPECT_FALSE(Retryable(RpcError(grpc::StatusCode::INTERNAL, "engine failed: out of memory")));
  EXPECT_FALSE(Retryable(RpcError(grpc::StatusCode::INTERNAL, "a reply said Received RST_STREAM")));
  EXPECT_FALSE(Retryable(RpcError(grpc::StatusCode::INVALID_ARGUMENT, "Received RST_STREAM")));
  EXPECT_FALSE(Retryable(RpcError(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded")));
}

TEST(RetryRules, ACallWaitsForARefusedConnectionOnceOverItsTries) {
  using Clock = std::chrono::system_clock;
  const auto t = Clock::now();
  EXPECT_EQ(RefusedWaitEnd(t), t);  // outside a call's tries: each wait its own
  EXPECT_EQ(RefusedWaitEnd(t + std::chrono::seconds(5)), t + std::chrono::seconds(5));
  {
    DeadlineScope call(std::nullopt);
    EXPECT_EQ(RefusedWaitEnd(t), t);  // the first refusal sets the end
    EXPECT_EQ(RefusedWaitEnd(t + std::chrono::seconds(5)), t);  // later tries keep it
    {
      DeadlineScope inner(std::nullopt);  // another call's tries start afresh
      EXPECT_EQ(RefusedWaitEnd(t + std::chrono::seconds(7)), t + std::chrono::seconds(7));
    }
    EXPECT_EQ(RefusedWaitEnd(t + std::chrono::seconds(9)), t);
  }
  {
    DeadlineScope next_call(std::nullopt);
    EXPECT_EQ(RefusedWaitEnd(t + std::chrono::seconds(3)), t + std::chrono::seconds(3));
  }
}

}  // namespace
}  // namespace gpuscan::detail
