// The OpenMP wait policy a training process starts with: PASSIVE unless the environment chose.
#include "common/openmp_wait.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/scoped_env.h"

namespace lockstep {
namespace {

using test_support::ScopedEnv;
using Environment = std::vector<std::pair<std::string, std::string>>;

TEST(OpenMpWaitTest, PassiveWhenNothingWasChosen) {
  ScopedEnv policy("OMP_WAIT_POLICY", nullptr), spin("GOMP_SPINCOUNT", nullptr);
  EXPECT_EQ(TrainingOpenMpEnvironment(), (Environment{{"OMP_WAIT_POLICY", "PASSIVE"}}));
  EXPECT_EQ(OpenMpWaitPolicy(), "default (spin, then sleep)");
}

TEST(OpenMpWaitTest, TheUsersChoicePassesOn) {
  {
    ScopedEnv policy("OMP_WAIT_POLICY", "ACTIVE"), spin("GOMP_SPINCOUNT", nullptr);
    EXPECT_TRUE(TrainingOpenMpEnvironment().empty());
    EXPECT_EQ(OpenMpWaitPolicy(), "OMP_WAIT_POLICY=ACTIVE");
  }
  {
    ScopedEnv policy("OMP_WAIT_POLICY", nullptr), spin("GOMP_SPINCOUNT", "300000");
    EXPECT_TRUE(TrainingOpenMpEnvironment().empty());
    EXPECT_EQ(OpenMpWaitPolicy(), "GOMP_SPINCOUNT=300000");
  }
  ScopedEnv policy("OMP_WAIT_POLICY", "PASSIVE"), spin("GOMP_SPINCOUNT", "10");
  EXPECT_EQ(OpenMpWaitPolicy(), "OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10");
}

}  // namespace
}  // namespace lockstep
