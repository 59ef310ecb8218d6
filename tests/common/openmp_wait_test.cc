// The OpenMP wait policy a training process starts with: PASSIVE unless the environment chose.
#include "common/openmp_wait.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Sets (or, with nullopt, unsets) a variable for the scope, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

using Environment = std::vector<std::pair<std::string, std::string>>;

TEST(OpenMpWaitTest, PassiveWhenNothingWasChosen) {
  ScopedEnv policy("OMP_WAIT_POLICY", std::nullopt), spin("GOMP_SPINCOUNT", std::nullopt);
  EXPECT_EQ(TrainingOpenMpEnvironment(), (Environment{{"OMP_WAIT_POLICY", "PASSIVE"}}));
  EXPECT_EQ(OpenMpWaitPolicy(), "default (spin, then sleep)");
}

TEST(OpenMpWaitTest, TheUsersChoicePassesOn) {
  {
    ScopedEnv policy("OMP_WAIT_POLICY", "ACTIVE"), spin("GOMP_SPINCOUNT", std::nullopt);
    EXPECT_TRUE(TrainingOpenMpEnvironment().empty());
    EXPECT_EQ(OpenMpWaitPolicy(), "OMP_WAIT_POLICY=ACTIVE");
  }
  {
    ScopedEnv policy("OMP_WAIT_POLICY", std::nullopt), spin("GOMP_SPINCOUNT", "300000");
    EXPECT_TRUE(TrainingOpenMpEnvironment().empty());
    EXPECT_EQ(OpenMpWaitPolicy(), "GOMP_SPINCOUNT=300000");
  }
  ScopedEnv policy("OMP_WAIT_POLICY", "PASSIVE"), spin("GOMP_SPINCOUNT", "10");
  EXPECT_EQ(OpenMpWaitPolicy(), "OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10");
}

}  // namespace
}  // namespace lockstep
