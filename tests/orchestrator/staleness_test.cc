// Admission control keeps every sample within max_staleness of the version it trains at.
#include "orchestrator/staleness.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::orchestrator {
namespace {

TEST(AdmissionControlTest, OnPolicyAdmitsOneStepOfPromptsPerSync) {
  AdmissionControl admission(/*max_staleness=*/0, /*prompts_per_step=*/4);
  EXPECT_EQ(admission.max_in_flight(), 4);
  int admitted = 0;
  while (admission.CanAdmit()) {
    admission.Admit();
    ++admitted;
  }
  EXPECT_EQ(admitted, 4);
  admission.StepSynced();
  EXPECT_TRUE(admission.CanAdmit());
}

// Simulates the loop: prompts admitted at the generators' version, trained FIFO P per step,
// then synced. The age of every trained prompt stays within S, and reaches S when S > 0.
TEST(AdmissionControlTest, SimulatedLoopNeverExceedsTheBound) {
  for (int64_t staleness : {0, 1, 2, 5}) {
    const int64_t prompts_per_step = 3;
    AdmissionControl admission(staleness, prompts_per_step);
    std::deque<int64_t> in_flight;  // generator version at admission
    int64_t version = 0, max_age = 0;
    for (int step = 0; step < 20; ++step) {
      while (admission.CanAdmit()) {
        admission.Admit();
        in_flight.push_back(version);
      }
      ASSERT_LE(static_cast<int64_t>(in_flight.size()), admission.max_in_flight());
      ASSERT_GE(static_cast<int64_t>(in_flight.size()), prompts_per_step);
      for (int64_t i = 0; i < prompts_per_step; ++i) {
        const int64_t age = version - in_flight.front();
        in_flight.pop_front();
        ASSERT_LE(age, staleness) << "S=" << staleness << " step " << step;
        max_age = std::max(max_age, age);
      }
      ++version;  // train step, then sync
      admission.StepSynced();
    }
    EXPECT_EQ(max_age, staleness) << "the bound is used, not just respected";
  }
}

TEST(CheckSampleAgeTest, NamesTheTokenAndVersionsOfAViolation) {
  EXPECT_TRUE(CheckSampleAge(5, {5, 5, 4}, 1, 0).ok());
  absl::Status status = CheckSampleAge(5, {5, 3, 4}, 1, 7);
  ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("rollout 7 token 1"), std::string::npos) << status;
  EXPECT_NE(status.message().find("version 3"), std::string::npos) << status;
  EXPECT_NE(status.message().find("age 2"), std::string::npos) << status;
  // A token from the future (a version the trainer has not reached) is a violation too.
  EXPECT_FALSE(CheckSampleAge(5, {6}, 2, 0).ok());
  EXPECT_EQ(SampleAge(5, {5, 3, 4}), 2);
  EXPECT_EQ(SampleAge(5, {}), 0);
}

}  // namespace
}  // namespace lockstep::orchestrator
