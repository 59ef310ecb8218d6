// `lockstep serve sandbox` as a process, as a user or a job starts it: it serves on the port it
// prints, answers the health check, runs programs for callers with the token and refuses the
// rest, answers RESOURCE_EXHAUSTED past its queue, and on SIGTERM exits 0 leaving no sandbox
// process behind (its warm inits included).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "sandbox/sandbox_client.h"
#include "tests/rewards/child_process.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using ::testing::HasSubstr;
using rewards::testing::ChildProcess;

// Pids of processes whose parent is `parent`.
std::vector<int> ChildrenOf(int parent) {
  std::vector<int> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::string status = testing::ReadHostFile(absl::StrCat("/proc/", pid, "/status"));
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      int ppid = 0;
      if (absl::ConsumePrefix(&line, "PPid:") &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &ppid) && ppid == parent) {
        children.push_back(pid);
      }
    }
  }
  return children;
}

TEST(ServeSandboxCommandTest, ServesWithTokenBoundedQueueAndStopsCleanly) {
  const std::string token_file =
      (std::filesystem::temp_directory_path() / absl::StrCat("lockstep_sandbox_token_", getpid()))
          .string();
  std::ofstream(token_file) << "sandbox-token\n";
  absl::StatusOr<ChildProcess> server = ChildProcess::Start(
      {LOCKSTEP_BINARY, "serve", "sandbox", "--port", "0", "--auth-token-file", token_file,
       "--max-concurrency", "1", "--max-queue", "0"});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> port = server->WaitForServingPort(std::chrono::seconds(20));
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);

  grpc::ClientContext health_context;
  grpc::health::v1::HealthCheckResponse health;
  ASSERT_TRUE(grpc::health::v1::Health::NewStub(MakeChannel(address))
                  ->Check(&health_context, {}, &health)
                  .ok());
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto client = [&](std::string token) {
    return *SandboxClient::Create(
        {.address = address, .auth_token = std::move(token), .max_attempts = 1});
  };
  ExecRequest sum = testing::Python("import sys\nprint(sum(map(int, sys.stdin.read().split())))");
  sum.stdin_data = "1 2 3 4\n";
  absl::StatusOr<ExecResult> result = client("sandbox-token")->Execute(sum);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verdict, Verdict::kOk);
  EXPECT_EQ(result->stdout_data, "10\n");

  absl::StatusOr<ExecResult> refused = client("")->Execute(sum);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);

  // One slot, no queue: a second call while one runs is refused at once.
  absl::StatusOr<ExecResult> slow = absl::UnknownError("not run");
  std::thread caller([&] {
    slow = client("sandbox-token")->Execute(testing::Python("import time\ntime.sleep(1.5)"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  absl::StatusOr<ExecResult> busy = client("sandbox-token")->Execute(sum);
  caller.join();
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kResourceExhausted) << busy.status();
  EXPECT_THAT(busy.status().message(), HasSubstr("max_queue 0"));
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->verdict, Verdict::kOk);

  const std::vector<int> children = ChildrenOf(server->pid());  // its idle warm inits
  EXPECT_FALSE(children.empty()) << "the server keeps no warm init";
  const int status = server->KillAndWait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int pid : children) {
    while (testing::HostPathExists(absl::StrCat("/proc/", pid, "/status")) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(testing::HostPathExists(absl::StrCat("/proc/", pid, "/status")))
        << "warm init " << pid << " outlived the server";
  }
  std::filesystem::remove(token_file);
}

}  // namespace
}  // namespace lockstep::sandbox
