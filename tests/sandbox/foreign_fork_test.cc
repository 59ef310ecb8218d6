// A run ends when its programs do, even while a process outside it holds a copy of the run's
// pipes. A fork elsewhere in the caller that never execs (a test's helper, a library forking a
// worker) keeps every descriptor open at that moment, close-on-exec or not: the write end of a
// run's output or report pipe while the launcher or the warm pool's spawner holds it. Such a
// copy once kept Collect waiting for end-of-file until the holder exited (a CI hang of
// ContainmentTest.KillAllReachesOnlyTheSandbox, whose neighbour is such a fork).
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// Holders live this long; a run held open by one would take at least as long.
constexpr int kHolderSeconds = 6;
constexpr double kRunBoundSeconds = 4.0;

TEST(ForeignForkTest, ForksHoldingCopiesOfARunsPipesDoNotHoldTheRunOpen) {
  std::atomic<bool> stop{false};
  std::vector<pid_t> holders;
  // Forks a holder every few milliseconds while the runs go on, bounded in count.
  std::thread forker([&] {
    while (!stop.load() && holders.size() < 1500) {
      const pid_t pid = fork();
      if (pid == 0) {
        timespec rest = {kHolderSeconds, 0};
        nanosleep(&rest, nullptr);
        _exit(0);
      }
      if (pid > 0) holders.push_back(pid);
      timespec gap = {0, 2'000'000};
      nanosleep(&gap, nullptr);
    }
  });
  constexpr int kRuns = 40;
  int slow = 0;
  for (int i = 0; i < kRuns; ++i) {
    // The first call of each builds its sandbox, whose checks run programs too.
    const Clock::time_point start = Clock::now();
    Sandbox& sandbox = testing::SharedSandbox(/*use_cgroups=*/i % 2 == 0);
    ExecRequest request = testing::Python("print('run', input())");
    request.stdin_data = absl::StrCat(i, "\n");
    absl::StatusOr<ExecResult> result = sandbox.Run(request);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->verdict, Verdict::kOk) << result->error << result->stderr_data;
    EXPECT_EQ(result->stdout_data, absl::StrCat("run ", i, "\n"));
    EXPECT_LT(seconds, kRunBoundSeconds) << "run " << i;
    if (seconds >= kRunBoundSeconds) ++slow;
  }
  stop = true;
  forker.join();
  for (pid_t pid : holders) kill(pid, SIGKILL);
  for (pid_t pid : holders) waitpid(pid, nullptr, 0);
  std::printf("%zu holders forked, %d of %d runs held open\n", holders.size(), slow, kRuns);
}

}  // namespace
}  // namespace lockstep::sandbox
