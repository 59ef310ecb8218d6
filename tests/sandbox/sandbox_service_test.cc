// `lockstep serve sandbox`'s service and client, on a real server on a loopback port with real
// gRPC over the real sandbox (no mocks): the token is required, a full queue answers
// RESOURCE_EXHAUSTED at once, concurrent calls each get their own program's result, and bad
// requests name the field.
#include "sandbox/sandbox_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/free_port.h"
#include "common/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/sandbox.grpc.pb.h"
#include "sandbox/sandbox_client.h"
#include "sandbox/sandbox_convert.h"
#include "tests/sandbox/sandbox_test_util.h"
#include "tests/sandbox/served_sandbox.h"

namespace lockstep::sandbox {
namespace {

using testing::kToken;
using testing::ServedSandbox;

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

ExecRequest Sleeper(int ms) {
  return testing::Python(absl::StrCat("import time\ntime.sleep(", ms / 1000.0, ")\nprint('slept')"));
}

TEST(SandboxServiceTest, RefusesCallsWithoutOrWithAWrongToken) {
  ServedSandbox served({.token = kToken});
  for (const std::string& token : {std::string(), std::string("not-the-token")}) {
    absl::StatusOr<ExecResult> result =
        served.Client(token)->Execute(testing::Python("print('should not run')"));
    ASSERT_FALSE(result.ok()) << "token '" << token << "' was accepted";
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnauthenticated) << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr(served.address()));
  }
  EXPECT_EQ(served.service().stats().accepted, 0) << "a refused call reached the queue";

  absl::StatusOr<ExecResult> result = served.Client(kToken)->Execute(testing::Python("print(6*7)"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verdict, Verdict::kOk);
  EXPECT_EQ(result->stdout_data, "42\n");
  EXPECT_EQ(served.service().num_executed(), 1);
}

TEST(SandboxServiceTest, ResultsRoundTripVerdictsStdinAndBytes) {
  ServedSandbox served({.token = kToken});
  std::unique_ptr<SandboxClient> client = served.Client(kToken);

  ExecRequest echo = testing::Python(
      "import sys\ndata = sys.stdin.buffer.read()\nsys.stdout.buffer.write(data[::-1])\n"
      "sys.stderr.write('err')\nsys.exit(3)");
  echo.stdin_data = std::string("ab\xff\xfe\0c", 6);  // not UTF-8, with a NUL
  absl::StatusOr<ExecResult> result = client->Execute(echo);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->verdict, Verdict::kNonzeroExit);
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->stdout_data, std::string("c\0\xfe\xff" "ba", 6));
  EXPECT_EQ(result->stderr_data, "err");
  EXPECT_GT(result->wall_ms, 0);

  ExecLimits short_wall;
  short_wall.wall_ms = 300;
  absl::StatusOr<ExecResult> timeout =
      client->Execute(testing::Python("while True: pass", short_wall));
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(timeout->verdict, Verdict::kTimeout);

  ExecRequest cpp;
  cpp.language = "cpp";
  cpp.source = "int main() { return oops; }";
  absl::StatusOr<ExecResult> compile = client->Execute(cpp);
  ASSERT_TRUE(compile.ok()) << compile.status();
  EXPECT_EQ(compile->verdict, Verdict::kCompileError);
  EXPECT_THAT(compile->stderr_data, HasSubstr("oops"));
}

TEST(SandboxServiceTest, BadRequestsNameTheField) {
  ServedSandbox served({.token = kToken});
  std::unique_ptr<SandboxClient> client = served.Client(kToken, /*max_attempts=*/3);
  ExecRequest negative = testing::Python("print(1)");
  negative.limits.wall_ms = -5;
  absl::StatusOr<ExecResult> result = client->Execute(negative);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("limits.wall_ms"));
  EXPECT_THAT(result.status().message(), HasSubstr("(after 1 attempt)"));  // never retried

  ExecRequest unknown = testing::Python("print(1)");
  unknown.language = "cobol";
  result = client->Execute(unknown);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("language"));

  // Limits left unset by another client take the defaults instead of 0 (which would be refused).
  v1::ExecuteRequest proto;
  proto.set_language("python3");
  proto.set_source("print('defaults')");
  ExecRequest converted = FromProto(proto);
  EXPECT_EQ(converted.limits.wall_ms, ExecLimits().wall_ms);
  EXPECT_EQ(converted.limits.max_open_files, ExecLimits().max_open_files);
}

TEST(SandboxServiceTest, FullQueueAnswersResourceExhaustedAtOnce) {
  ServedSandbox served({.token = kToken, .max_concurrency = 1, .max_queue = 1});
  // One call runs, one waits: the queue is full.
  std::vector<absl::StatusOr<ExecResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&, i] { results[i] = served.Client(kToken)->Execute(Sleeper(1500)); });
  }
  const Clock::time_point wait_until = Clock::now() + std::chrono::seconds(10);
  while (served.service().stats().accepted < 2 && Clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(served.service().stats().accepted, 2);

  const Clock::time_point start = Clock::now();
  absl::StatusOr<ExecResult> refused = served.Client(kToken)->Execute(testing::Python("print(1)"));
  const double refused_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("max_queue 1"));
  EXPECT_LT(refused_ms, 1000) << "a full queue must answer at once, not after the backlog";
  EXPECT_EQ(served.service().stats().rejected, 1);

  for (std::thread& caller : callers) caller.join();
  for (const absl::StatusOr<ExecResult>& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->verdict, Verdict::kOk);
    EXPECT_EQ(result->stdout_data, "slept\n");
  }
  EXPECT_EQ(served.service().stats().max_queued_seen, 1);

  // Once the queue drains, calls are accepted again; a client with retries rides out a full
  // queue.
  absl::StatusOr<ExecResult> after = served.Client(kToken, /*max_attempts=*/3)->Execute(
      testing::Python("print('after')"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->stdout_data, "after\n");
}

TEST(SandboxServiceTest, ConcurrentCallsEachGetTheirOwnResult) {
  ServedSandbox served({.token = kToken, .max_concurrency = 2, .max_queue = 32});
  std::unique_ptr<SandboxClient> client = served.Client(kToken);  // one client, shared
  constexpr int kCalls = 12;
  std::vector<absl::StatusOr<ExecResult>> results(kCalls, absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      ExecRequest request = testing::Python(
          "import sys\nn = int(sys.stdin.read())\nprint(n * n)\nsys.exit(n % 3)");
      request.stdin_data = absl::StrCat(i, "\n");
      results[i] = client->Execute(request);
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->stdout_data, absl::StrCat(i * i, "\n")) << i;
    EXPECT_EQ(results[i]->exit_code, i % 3) << i;
    EXPECT_EQ(results[i]->verdict, i % 3 == 0 ? Verdict::kOk : Verdict::kNonzeroExit) << i;
  }
  EXPECT_EQ(served.service().num_executed(), kCalls);
  EXPECT_EQ(served.service().stats().rejected, 0);
  EXPECT_TRUE(testing::ForeignNamespaceProcesses(testing::SharedSandbox(true).isolation().outside_uid)
                  .empty());
}

TEST(SandboxServiceTest, UnreachableServiceIsAnErrorNamingTheAddress) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  SandboxClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", *port);  // nothing listens there
  options.max_attempts = 2;
  options.initial_backoff = std::chrono::milliseconds(10);
  absl::StatusOr<std::unique_ptr<SandboxClient>> client = SandboxClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ExecResult> result = (*client)->Execute(testing::Python("print(1)"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr(options.address));
  EXPECT_THAT(result.status().message(), HasSubstr("(after 2 attempts)"));
}

TEST(SandboxServiceTest, BadOptionsAreRefused) {
  std::shared_ptr<Executor> box(&testing::SharedSandbox(true), [](Executor*) {});
  absl::StatusOr<std::unique_ptr<SandboxService>> service =
      SandboxService::Create(box, {.max_concurrency = 0});
  ASSERT_FALSE(service.ok());
  EXPECT_THAT(service.status().message(), HasSubstr("max_concurrency"));
  service = SandboxService::Create(box, {.max_queue = -1});
  ASSERT_FALSE(service.ok());
  EXPECT_THAT(service.status().message(), HasSubstr("max_queue"));
  absl::StatusOr<std::unique_ptr<SandboxClient>> client = SandboxClient::Create({});
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("address"));
}

}  // namespace
}  // namespace lockstep::sandbox
