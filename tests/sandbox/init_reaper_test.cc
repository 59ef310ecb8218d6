// The reaper of finished runs' outer inits (sandbox/init_reaper.h): it reaps every process it is
// handed, its destructor waits for those still running, and a Sandbox's runs leave no unreaped
// child behind once their outer inits have exited.
#include "sandbox/init_reaper.h"

#include <dirent.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// A child that exits after `ms` milliseconds.
pid_t ChildExitingAfter(int ms) {
  const pid_t pid = fork();
  if (pid == 0) {
    usleep(static_cast<useconds_t>(ms) * 1000);
    _exit(0);
  }
  return pid;
}

// Whether `pid` is no child of this process any more (reaped by someone): waitpid says ECHILD.
bool Reaped(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

// This process's children that have exited and are not reaped yet.
int ZombieChildren() {
  int zombies = 0;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    const int pid = atoi(entry->d_name);
    if (pid > 0 && testing::ParentPid(entry->d_name) == getpid() && testing::IsExiting(pid)) {
      ++zombies;
    }
  }
  closedir(proc);
  return zombies;
}

TEST(InitReaperTest, ReapsEveryChildItIsHanded) {
  InitReaper reaper;
  const pid_t first = ChildExitingAfter(10);
  const pid_t second = ChildExitingAfter(50);
  reaper.Add(first, std::nullopt, NetNamespaceLease());
  reaper.Add(second, std::nullopt, NetNamespaceLease());
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (reaper.num_pending() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(reaper.num_pending(), 0u);
  EXPECT_TRUE(Reaped(first));
  EXPECT_TRUE(Reaped(second));
}

TEST(InitReaperTest, DestructorWaitsForThoseStillRunning) {
  const Clock::time_point start = Clock::now();
  pid_t child;
  {
    InitReaper reaper;
    child = ChildExitingAfter(200);
    reaper.Add(child, std::nullopt, NetNamespaceLease());
  }
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_TRUE(Reaped(child));
}

TEST(InitReaperTest, RunsLeaveNoUnreapedInitBehind) {
  auto sandbox = testing::CreateSandboxOrAbort(/*use_cgroups=*/true);
  for (int run = 0; run < 4; ++run) {
    absl::StatusOr<ExecResult> result = sandbox->Run(testing::Python("print(1)"));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->stdout_data, "1\n");
  }
  // Each outer init exits a moment after its run's result; the reaper has it soon after.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (ZombieChildren() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ZombieChildren(), 0);
  sandbox.reset();
  EXPECT_EQ(ZombieChildren(), 0);
}

}  // namespace
}  // namespace lockstep::sandbox
