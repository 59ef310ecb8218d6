// Warm starts (sandbox/warm_init_pool.h): inits spawned ahead into their next run's fresh
// cgroups. A warm start is contained exactly as a cold one (the run's limits are set on the
// cgroups before it starts), a warm init that died is replaced by a cold start, and a Sandbox
// that goes away leaves no idle init and no cgroup directory behind.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using testing::ExpectNextRunWorks;
using testing::ProcessesWithArgument;
using testing::Python;

// The host-side process of each idle warm init of this process (its namespace init, a fork of it with the same
// command line, is not counted).
std::set<int> IdleWarmInits() {
  std::set<int> outers;
  for (int pid : ProcessesWithArgument("lockstep-sandbox-init --warm")) {
    // Only this process's: another session's warm inits are none of these tests' business.
    const std::string text = std::to_string(pid);
    if (!testing::IsWarmNamespaceInit(text) && testing::ParentPid(text) == getpid()) {
      outers.insert(pid);
    }
  }
  return outers;
}

// This process's warm inits whose namespace init has been forked (their namespaces are
// entered). Other processes' (another session's sandbox) do not count.
std::set<int> ReadyWarmInits() {
  std::set<int> outers;
  for (int pid : ProcessesWithArgument("lockstep-sandbox-init --warm")) {
    const std::string text = std::to_string(pid);
    if (!testing::IsWarmNamespaceInit(text)) continue;
    const int outer = testing::ParentPid(text);
    if (testing::ParentPid(std::to_string(outer)) == getpid()) outers.insert(outer);
  }
  return outers;
}

// Waits until `sandbox`'s pool holds an idle init (the spawner replaces taken ones at once). A
// warm init counts once its namespace init exists: its process alone shows before the spawner
// thread has put it into the pool (a run taken in between would start cold).
void AwaitWarmInit(const std::set<int>& others, int at_least = 1) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int mine = 0;
    for (int pid : ReadyWarmInits()) mine += others.count(pid) == 0 ? 1 : 0;
    if (mine >= at_least) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "no warm init appeared";
}

std::unique_ptr<Sandbox> MakeSandbox(bool use_cgroups, int warm_inits) {
  SandboxOptions options;
  options.use_cgroups = use_cgroups;
  options.warm_inits = warm_inits;
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
  EXPECT_TRUE(sandbox.ok()) << sandbox.status();
  return sandbox.ok() ? *std::move(sandbox) : nullptr;
}

TEST(WarmInitTest, WarmStartsHoldTheRunsOwnLimits) {
  const std::set<int> before = IdleWarmInits();
  std::unique_ptr<Sandbox> sandbox = MakeSandbox(true, 1);
  ASSERT_NE(sandbox, nullptr);
  for (int i = 0; i < 3; ++i) {
    AwaitWarmInit(before);
    const int64_t warm_before = sandbox->num_warm_starts();
    // A fork bomb against a small process limit: bounded, and timed out or failed.
    ExecLimits limits;
    limits.max_processes = 4;
    limits.wall_ms = 2000;
    absl::StatusOr<ExecResult> bomb = sandbox->Run(Python(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        limits));
    ASSERT_TRUE(bomb.ok()) << bomb.status();
    EXPECT_EQ(sandbox->num_warm_starts(), warm_before + 1) << "the run did not start warm";
    EXPECT_NE(bomb->verdict, Verdict::kOk);
    EXPECT_NE(bomb->verdict, Verdict::kSandboxError) << bomb->error;
    // And a memory limit smaller than what the program takes.
    AwaitWarmInit(before);
    ExecLimits small;
    small.memory_mb = 64;
    absl::StatusOr<ExecResult> hog =
        sandbox->Run(Python("x = bytearray(512 * 1024 * 1024)\nprint(len(x))", small));
    ASSERT_TRUE(hog.ok()) << hog.status();
    EXPECT_EQ(hog->verdict, Verdict::kMemoryLimit) << hog->stderr_data << hog->error;
    ExpectNextRunWorks(*sandbox);
  }
}

TEST(WarmInitTest, DeadWarmInitFallsBackToAColdStart) {
  const std::set<int> before = IdleWarmInits();
  std::unique_ptr<Sandbox> sandbox = MakeSandbox(true, 1);
  ASSERT_NE(sandbox, nullptr);
  AwaitWarmInit(before);
  // Only this sandbox's idle init: its namespace init, which holds the socket the run would come
  // on (its host-side parent reaps it and exits).
  int killed = 0;
  for (int pid : IdleWarmInits()) {
    if (before.count(pid) != 0) continue;
    std::istringstream children(
        testing::ReadHostFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children")));
    for (int child; children >> child; ++killed) kill(child, SIGKILL);
  }
  ASSERT_EQ(killed, 1);
  const int64_t warm_before = sandbox->num_warm_starts();
  absl::StatusOr<ExecResult> result = sandbox->Run(Python("print('cold after all')"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verdict, Verdict::kOk) << result->error;
  EXPECT_EQ(result->stdout_data, "cold after all\n");
  // It tried the dead one (counted), then started cold.
  EXPECT_EQ(sandbox->num_warm_starts(), warm_before + 1);
}

TEST(WarmInitTest, DestroyedSandboxLeavesNoIdleInitOrCgroup) {
  const std::set<int> before = IdleWarmInits();
  std::unique_ptr<Sandbox> sandbox = MakeSandbox(true, 2);
  ASSERT_NE(sandbox, nullptr);
  AwaitWarmInit(before, 2);
  std::set<int> mine;
  for (int pid : IdleWarmInits()) {
    if (before.count(pid) == 0) mine.insert(pid);
  }
  ASSERT_EQ(mine.size(), 2u);
  // Their cgroup directories, from their command lines (the procs files they joined).
  std::vector<std::string> directories;
  for (int pid : mine) {
    std::string cmdline = testing::ReadHostFile(absl::StrCat("/proc/", pid, "/cmdline"));
    for (size_t start = 0, end; (end = cmdline.find('\0', start)) != std::string::npos;
         start = end + 1) {
      const std::string argument = cmdline.substr(start, end - start);
      const size_t slash = argument.rfind("/cgroup.procs");
      if (slash != std::string::npos) directories.push_back(argument.substr(0, slash));
    }
  }
  EXPECT_FALSE(directories.empty()) << "the warm inits joined no cgroup";
  for (const std::string& directory : directories) {
    EXPECT_TRUE(testing::HostPathExists(directory)) << directory;
  }
  sandbox.reset();
  for (int pid : mine) {
    EXPECT_FALSE(testing::HostPathExists(absl::StrCat("/proc/", pid))) << "init " << pid << " left";
  }
  for (const std::string& directory : directories) {
    EXPECT_FALSE(testing::HostPathExists(directory)) << directory << " left behind";
  }
}

TEST(WarmInitTest, WithoutCgroupsWarmStartsWorkToo) {
  const std::set<int> before = IdleWarmInits();
  std::unique_ptr<Sandbox> sandbox = MakeSandbox(false, 1);
  ASSERT_NE(sandbox, nullptr);
  AwaitWarmInit(before);
  const int64_t warm_before = sandbox->num_warm_starts();
  ExecRequest request = Python("import sys\nprint(sys.stdin.read()[::-1])");
  request.stdin_data = "olleh";
  absl::StatusOr<ExecResult> result = sandbox->Run(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stdout_data, "hello\n");
  EXPECT_EQ(sandbox->num_warm_starts(), warm_before + 1);
}

TEST(WarmInitTest, NoWarmInitsMeansColdStartsOnly) {
  std::unique_ptr<Sandbox> sandbox = MakeSandbox(true, 0);
  ASSERT_NE(sandbox, nullptr);
  ExpectNextRunWorks(*sandbox);
  EXPECT_EQ(sandbox->num_warm_starts(), 0);
}

}  // namespace
}  // namespace lockstep::sandbox
