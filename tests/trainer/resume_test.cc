// Resume exactness on CPU: 6 steps straight vs 3 steps + checkpoint + a NEW PROCESS that loads
// it + 3 steps. The saved weights and optimizer state must be byte-identical.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Runs the driver as a child process; returns its exit status.
int RunDriver(const std::vector<std::string>& args) {
  std::string command = TRAINER_RESUME_DRIVER;
  for (const std::string& a : args) command += " '" + a + "'";
  command += " > /dev/null";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ResumeTest, SixStepsEqualThreePlusCheckpointPlusThreeInANewProcess) {
  const fs::path base = fs::temp_directory_path() / ("lockstep_resume_" + std::to_string(getpid()));
  fs::remove_all(base);
  const fs::path straight = base / "straight", resumed = base / "resumed";
  ASSERT_EQ(RunDriver({straight.string(), "6"}), 0);
  ASSERT_EQ(RunDriver({resumed.string(), "3"}), 0);
  ASSERT_EQ(RunDriver({resumed.string(), "3", (resumed / "step_000003").string()}), 0);
  const fs::path a = straight / "step_000006", b = resumed / "step_000006";
  ASSERT_TRUE(fs::exists(a / "model.safetensors"));
  ASSERT_TRUE(fs::exists(b / "model.safetensors"));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "extra.safetensors"}) {
    const std::string x = ReadBytes(a / file), y = ReadBytes(b / file);
    EXPECT_GT(x.size(), 1000u) << file;
    EXPECT_TRUE(x == y) << file << " differs after resume";
  }
  nlohmann::json sa = nlohmann::json::parse(ReadBytes(a / "trainer_state.json"));
  nlohmann::json sb = nlohmann::json::parse(ReadBytes(b / "trainer_state.json"));
  EXPECT_EQ(sa["step"], 6);
  EXPECT_EQ(sa["step"], sb["step"]);
  EXPECT_EQ(sa["weight_version"], sb["weight_version"]);
  EXPECT_EQ(sa["rng_state"], sb["rng_state"]);
  EXPECT_EQ(sb["data_cursor"], "after=6");
  // Sanity: training moved the weights (the comparison is not between two untouched models).
  EXPECT_FALSE(ReadBytes(resumed / "step_000003" / "model.safetensors") ==
               ReadBytes(b / "model.safetensors"));
  fs::remove_all(base);
}

}  // namespace
