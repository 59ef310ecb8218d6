// Process supervisor with real child processes (checked in /proc): start, wait for serving and
// health, stop with nothing left; early exit and port in use are clear errors quoting the log;
// children die when the parent is killed with SIGKILL; the stop-signal flag.
#include "orchestrator/process_supervisor.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "orchestrator/service_health.h"
#include "orchestrator/stop_signal.h"

#ifndef SUPERVISOR_TEST_CHILD
#error "SUPERVISOR_TEST_CHILD must name the helper binary"
#endif

namespace lockstep::orchestrator {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/supervisor_test_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// True when `pid` no longer runs: no /proc entry, or a zombie waiting for its (new) parent.
bool ProcessGone(pid_t pid) {
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat_file) return true;
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

bool WaitGone(pid_t pid, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!ProcessGone(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

ChildSpec Helper(const std::string& name, std::vector<std::string> args, const std::string& dir) {
  std::vector<std::string> argv = {SUPERVISOR_TEST_CHILD};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildSpec{.name = name, .argv = argv, .log_path = dir + "/" + name + ".log"};
}

TEST(ProcessSupervisorTest, StartsWaitsForHealthAndStopsWithNothingLeft) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  absl::StatusOr<pid_t> server = supervisor.Start(Helper("server", {"serve", "0"}, dir));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<pid_t> sleeper =
      supervisor.Start({.name = "sleeper", .argv = {"sleep", "1000"}, .log_path = dir + "/s.log"});
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  EXPECT_EQ(supervisor.pid("server"), *server);
  EXPECT_EQ(supervisor.names(), (std::vector<std::string>{"server", "sleeper"}));

  absl::StatusOr<std::string> address =
      supervisor.WaitUntilServing("server", {.timeout = absl::Seconds(30)});
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_THAT(*address, HasSubstr("127.0.0.1:"));
  EXPECT_TRUE(CheckServing(*address, absl::Seconds(5)).ok());
  EXPECT_TRUE(supervisor.CheckAlive().ok());
  EXPECT_FALSE(ProcessGone(*server));
  EXPECT_FALSE(ProcessGone(*sleeper));

  // Each child leads its own process group.
  EXPECT_EQ(getpgid(*server), *server);

  supervisor.StopAll(absl::Seconds(5));
  EXPECT_TRUE(ProcessGone(*server));
  EXPECT_TRUE(ProcessGone(*sleeper));
  EXPECT_FALSE(CheckServing(*address, absl::Milliseconds(200)).ok());
}

TEST(ProcessSupervisorTest, ChildThatExitsEarlyIsAClearErrorWithItsLogTail) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor.Start(Helper("trainer", {"exit", "3"}, dir)).ok());
  absl::StatusOr<std::string> address =
      supervisor.WaitUntilServing("trainer", {.timeout = absl::Seconds(30)});
  ASSERT_FALSE(address.ok());
  EXPECT_EQ(address.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(address.status().message(), HasSubstr("service trainer stopped before serving"));
  EXPECT_THAT(address.status().message(), HasSubstr("exited with status 3"));
  EXPECT_THAT(address.status().message(), HasSubstr(dir + "/trainer.log"));
  EXPECT_THAT(address.status().message(), HasSubstr("fatal: model file missing"));

  absl::Status alive = supervisor.CheckAlive();
  EXPECT_EQ(alive.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(alive.message(), HasSubstr("service trainer exited with status 3"));
}

TEST(ProcessSupervisorTest, DeadServiceIsNamedByCheckAlive) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  absl::StatusOr<pid_t> pid = supervisor.Start(Helper("generator0", {"serve", "0"}, dir));
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(supervisor.WaitUntilServing("generator0", {.timeout = absl::Seconds(30)}).ok());
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status alive;
  while ((alive = supervisor.CheckAlive()).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(alive.message(), HasSubstr("service generator0 was killed by signal 9"));
  EXPECT_THAT(alive.message(), HasSubstr("generator0.log"));
}

// WaitForExit returns only once the observer has returned: a caller that saw the exit may rely
// on the observer's work (the job's "service … was killed" line) being done.
TEST(ProcessSupervisorTest, WaitForExitReturnsAfterTheObserverHasRun) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  std::atomic<bool> observer_done{false};
  supervisor.SetExitObserver([&](const ChildExit&) {
    absl::SleepFor(absl::Milliseconds(300));
    observer_done = true;
  });
  absl::StatusOr<pid_t> pid =
      supervisor.Start({.name = "sleeper", .argv = {"sleep", "1000"}, .log_path = dir + "/s.log"});
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  std::optional<ChildExit> exit = supervisor.WaitForExit("sleeper", absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(observer_done);
  EXPECT_EQ(exit->how, "was killed by signal 9 (Killed)");
}

TEST(ProcessSupervisorTest, DeadChildIsReapedAndReportedAtOnce) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  absl::Mutex mu;
  std::vector<ChildExit> observed;
  supervisor.SetExitObserver([&](const ChildExit& exit) {
    absl::MutexLock lock(&mu);
    observed.push_back(exit);
  });
  absl::StatusOr<pid_t> pid = supervisor.Start(Helper("generator1", {"serve", "0"}, dir));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(supervisor.WaitUntilServing("generator1", {.timeout = absl::Seconds(30)}).ok());
  EXPECT_FALSE(supervisor.WaitForExit("generator1", absl::Milliseconds(50)).has_value());

  const absl::Time killed = absl::Now();
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  std::optional<ChildExit> exit = supervisor.WaitForExit("generator1", absl::Seconds(5));
  ASSERT_TRUE(exit.has_value());
  EXPECT_LT(exit->time - killed, absl::Seconds(1));
  EXPECT_EQ(exit->name, "generator1");
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_EQ(exit->how, "was killed by signal 9 (Killed)");
  // Reaped: no zombie left in /proc.
  EXPECT_FALSE(std::ifstream(absl::StrCat("/proc/", *pid, "/stat")).good());
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(observed.size(), 1u);
    EXPECT_EQ(observed[0].name, "generator1");
  }
  std::vector<ChildExit> exits = supervisor.TakeExits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].how, "was killed by signal 9 (Killed)");
  EXPECT_TRUE(supervisor.TakeExits().empty());  // each exit is reported once

  // Started again under its name: a new process that serves again; its log is appended to.
  absl::StatusOr<pid_t> again = supervisor.Restart("generator1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(*again, *pid);
  EXPECT_EQ(supervisor.pid("generator1"), *again);
  EXPECT_EQ(supervisor.Restart("generator1").status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::string> address =
      supervisor.WaitUntilServing("generator1", {.timeout = absl::Seconds(30)});
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_TRUE(supervisor.CheckAlive().ok());
  EXPECT_EQ(supervisor.Restart("nobody").status().code(), absl::StatusCode::kNotFound);

  // Exits of a stop are neither queued nor observed.
  supervisor.StopAll(absl::Seconds(5));
  EXPECT_TRUE(supervisor.TakeExits().empty());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(observed.size(), 1u);
}

TEST(ProcessSupervisorTest, ExitCodeIsReportedWithTheName) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor.Start(Helper("reward0", {"exit", "7"}, dir)).ok());
  std::optional<ChildExit> exit = supervisor.WaitForExit("reward0", absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->how, "exited with status 7");
  std::vector<ChildExit> exits = supervisor.TakeExits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].name, "reward0");
}

TEST(ProcessSupervisorTest, ServiceOnAnOccupiedPortFailsClearly) {
  // Hold a port with a plain listening socket.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  int port = ntohs(address.sin_port);

  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor.Start(Helper("reward", {"serve", std::to_string(port)}, dir)).ok());
  absl::StatusOr<std::string> serving =
      supervisor.WaitUntilServing("reward", {.timeout = absl::Seconds(30)});
  close(fd);
  ASSERT_FALSE(serving.ok());
  EXPECT_THAT(serving.status().message(), HasSubstr("service reward stopped before serving"));
  EXPECT_THAT(serving.status().message(),
              HasSubstr(absl::StrCat("cannot bind 127.0.0.1:", port, " (address in use?)")));
}

TEST(ProcessSupervisorTest, ExecFailureIsReportedAtStart) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  absl::StatusOr<pid_t> pid = supervisor.Start(
      {.name = "ghost", .argv = {"/nonexistent/lockstep"}, .log_path = dir + "/ghost.log"});
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(),
              HasSubstr("cannot start ghost: exec /nonexistent/lockstep: No such file"));
  EXPECT_TRUE(supervisor.names().empty());

  EXPECT_FALSE(supervisor.Start({.name = "", .argv = {"sleep"}, .log_path = "x"}).ok());
  EXPECT_FALSE(supervisor.Start({.name = "a", .argv = {}, .log_path = "x"}).ok());
  EXPECT_FALSE(
      supervisor.Start({.name = "a", .argv = {"sleep"}, .log_path = "/nonexistent/a.log"}).ok());
}

TEST(ProcessSupervisorTest, ChildIgnoringSigtermIsKilledAfterTheGracePeriod) {
  std::string dir = TempDir();
  ProcessSupervisor supervisor;
  absl::StatusOr<pid_t> pid = supervisor.Start(Helper("stubborn", {"ignore-term"}, dir));
  ASSERT_TRUE(pid.ok());
  // Its line comes after it ignores SIGTERM.
  ASSERT_TRUE(
      supervisor.WaitUntilServing("stubborn", {.timeout = absl::Seconds(30), .check_health = false})
          .ok());
  absl::Time start = absl::Now();
  supervisor.StopAll(absl::Milliseconds(300));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(ProcessGone(*pid));
}

TEST(ProcessSupervisorTest, ChildrenDieWhenTheParentIsKilledWithSigkill) {
  std::string dir = TempDir();
  ProcessSupervisor outer;
  absl::StatusOr<pid_t> orchestrator =
      outer.Start(Helper("orchestrator", {"orchestrate", dir, "3"}, dir));
  ASSERT_TRUE(orchestrator.ok());

  // Wait for its "started" line, then read its children's pids.
  std::vector<pid_t> children;
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (true) {
    std::ifstream log(dir + "/orchestrator.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    if (text.find("started") != std::string::npos) {
      std::istringstream lines(text);
      for (std::string word; lines >> word;) {
        if (word == "child") {
          int pid = 0;
          lines >> pid;
          children.push_back(pid);
        }
      }
      break;
    }
    ASSERT_LT(absl::Now(), deadline) << text;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(children.size(), 3u);
  for (pid_t child : children) ASSERT_FALSE(ProcessGone(child)) << child;

  ASSERT_EQ(kill(*orchestrator, SIGKILL), 0);
  for (pid_t child : children) {
    EXPECT_TRUE(WaitGone(child, absl::Seconds(5))) << "orphan " << child << " still running";
  }
}

TEST(StopSignalTest, SigintSetsTheFlagOnce) {
  ResetStopRequest();
  EXPECT_FALSE(StopRequested());
  ASSERT_EQ(raise(SIGINT), 0);
  EXPECT_TRUE(StopRequested());
  EXPECT_EQ(StopSignalNumber(), SIGINT);
  ResetStopRequest();
  EXPECT_FALSE(StopRequested());
  RequestStop();
  EXPECT_TRUE(StopRequested());
  ResetStopRequest();
}

}  // namespace
}  // namespace lockstep::orchestrator
