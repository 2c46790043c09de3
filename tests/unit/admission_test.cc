// Admission: slots and the byte budget together, arrival order, cancellation of waiters.
#include <gtest/gtest.h>

#include <vector>

#include "service/admission.h"

namespace gpuscan::server {
namespace {

TEST(AdmissionTest, ByteBudgetQueuesCallsThatDoNotFitAndAdmitsThemInOrder) {
  Admission a(/*max_active=*/10, /*max_queued=*/4, /*max_bytes=*/100);
  uint64_t ticket = 0;
  std::vector<int> admitted;
  EXPECT_EQ(a.TryAdmit(60, [] {}, &ticket), Admission::Result::kAdmitted);
  EXPECT_EQ(a.TryAdmit(30, [] {}, &ticket), Admission::Result::kAdmitted);
  EXPECT_EQ(a.bytes_in_use(), 90u);
  // 20 more would pass 100: waits, and a small one behind it waits too (no overtaking).
  EXPECT_EQ(a.TryAdmit(20, [&] { admitted.push_back(1); }, &ticket), Admission::Result::kQueued);
  EXPECT_EQ(a.TryAdmit(5, [&] { admitted.push_back(2); }, &ticket), Admission::Result::kQueued);
  EXPECT_EQ(a.queued(), 2u);
  a.Release(30);  // 60 in use: both waiters fit now, admitted in arrival order
  EXPECT_EQ(admitted, (std::vector<int>{1, 2}));
  EXPECT_EQ(a.bytes_in_use(), 85u);
  EXPECT_EQ(a.active(), 3u);
  a.Release(60);
  a.Release(20);
  a.Release(5);
  EXPECT_EQ(a.bytes_in_use(), 0u);
  EXPECT_EQ(a.active(), 0u);
}

TEST(AdmissionTest, CallLargerThanTheBudgetRunsAlone) {
  Admission a(4, 1, 100);
  uint64_t ticket = 0;
  EXPECT_EQ(a.TryAdmit(1000, [] {}, &ticket), Admission::Result::kAdmitted);  // clamped to 100
  EXPECT_EQ(a.bytes_in_use(), 100u);
  bool second = false;
  EXPECT_EQ(a.TryAdmit(1, [&] { second = true; }, &ticket), Admission::Result::kQueued);
  EXPECT_EQ(a.TryAdmit(1, [] {}, &ticket), Admission::Result::kRejected);  // queue of 1 is full
  a.Release(1000);
  EXPECT_TRUE(second);
  EXPECT_EQ(a.bytes_in_use(), 1u);
}

TEST(AdmissionTest, SlotsStillLimitWithoutByteBudget) {
  Admission a(2, 0);
  uint64_t ticket = 0;
  EXPECT_EQ(a.TryAdmit(uint64_t{1} << 40, [] {}, &ticket), Admission::Result::kAdmitted);
  EXPECT_EQ(a.TryAdmit(uint64_t{1} << 40, [] {}, &ticket), Admission::Result::kAdmitted);
  EXPECT_EQ(a.TryAdmit(1, [] {}, &ticket), Admission::Result::kRejected);
}

TEST(AdmissionTest, CancelledWaiterIsNeverAdmitted) {
  Admission a(1, 2, 0);
  uint64_t first = 0, second = 0;
  bool cancelled_ran = false, kept_ran = false;
  EXPECT_EQ(a.TryAdmit(1, [] {}, &first), Admission::Result::kAdmitted);
  EXPECT_EQ(a.TryAdmit(1, [&] { cancelled_ran = true; }, &first), Admission::Result::kQueued);
  EXPECT_EQ(a.TryAdmit(1, [&] { kept_ran = true; }, &second), Admission::Result::kQueued);
  EXPECT_TRUE(a.CancelQueued(first));
  EXPECT_FALSE(a.CancelQueued(first));
  a.Release(1);
  EXPECT_FALSE(cancelled_ran);
  EXPECT_TRUE(kept_ran);
  EXPECT_EQ(a.active(), 1u);
}

}  // namespace
}  // namespace gpuscan::server
