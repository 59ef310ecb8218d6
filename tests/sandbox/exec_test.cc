// Correctness of the real sandbox: python3, cpp and bash programs with stdin, exit codes,
// stderr and compile errors; argv mode and extra files; bad requests rejected with the field
// named; the statement of which limits hold.
#include <signal.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/cgroup.h"
#include "tests/sandbox/sandbox_test_util.h"

namespace lockstep::sandbox {
namespace {

using testing::Python;
using ::testing::HasSubstr;

Sandbox& TheSandbox() { return testing::SharedSandbox(/*use_cgroups=*/true); }

ExecResult MustRun(const ExecRequest& request) {
  absl::StatusOr<ExecResult> result = TheSandbox().Run(request);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : ExecResult{};
}

TEST(SandboxExecTest, PythonReadsStdinAndWritesStdoutAndStderr) {
  ExecRequest request = Python(
      "import sys\nline = input()\nprint(line.upper())\nprint('warn', file=sys.stderr)\n");
  request.stdin_data = "hello sandbox\n";
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kOk) << result.stderr_data;
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.signal, 0);
  EXPECT_EQ(result.stdout_data, "HELLO SANDBOX\n");
  EXPECT_EQ(result.stderr_data, "warn\n");
  EXPECT_FALSE(result.truncated);
  EXPECT_GT(result.wall_ms, 0);
  EXPECT_GT(result.cpu_ms, 0);
  EXPECT_GT(result.peak_memory_mb, 1);
  EXPECT_LT(result.peak_memory_mb, 200);  // the program's own, not the caller's memory
}

TEST(SandboxExecTest, PythonExitCodeAndException) {
  ExecResult exited = MustRun(Python("raise SystemExit(7)"));
  EXPECT_EQ(exited.verdict, Verdict::kNonzeroExit);
  EXPECT_EQ(exited.exit_code, 7);
  ExecResult raised = MustRun(Python("def f():\n    return 1 / 0\nf()\n"));
  EXPECT_EQ(raised.verdict, Verdict::kNonzeroExit);
  EXPECT_EQ(raised.exit_code, 1);
  EXPECT_THAT(raised.stderr_data, HasSubstr("ZeroDivisionError"));
}

TEST(SandboxExecTest, SignalIsKilled) {
  ExecResult result = MustRun(Python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"));
  EXPECT_EQ(result.verdict, Verdict::kKilled);
  EXPECT_EQ(result.signal, SIGSEGV);
  EXPECT_EQ(result.exit_code, -1);
}

TEST(SandboxExecTest, CppCompilesAndRunsWithStdin) {
  ExecRequest request;
  request.language = "cpp";
  request.source = R"(#include <iostream>
int main() { long a, b; std::cin >> a >> b; std::cout << a + b << "\n"; std::cerr << "e"; return a > 100 ? 4 : 0; })";
  request.stdin_data = "20 22\n";
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kOk) << result.stderr_data;
  EXPECT_EQ(result.stdout_data, "42\n");
  EXPECT_EQ(result.stderr_data, "e");
  request.stdin_data = "200 1";
  ExecResult failed = MustRun(request);
  EXPECT_EQ(failed.verdict, Verdict::kNonzeroExit);
  EXPECT_EQ(failed.exit_code, 4);
  EXPECT_EQ(failed.stdout_data, "201\n");
}

TEST(SandboxExecTest, CppCompileErrorCarriesTheCompilerOutput) {
  ExecRequest request;
  request.language = "cpp";
  request.source = "int main() { return undeclared_name; }\n";
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kCompileError);
  EXPECT_THAT(result.stderr_data, HasSubstr("undeclared_name"));
  EXPECT_THAT(result.stderr_data, HasSubstr("error"));
  EXPECT_TRUE(result.stdout_data.empty());
}

TEST(SandboxExecTest, BashWithStdinAndExitCode) {
  ExecRequest request;
  request.language = "bash";
  request.source = "read a b\necho $((a * b))\necho oops >&2\nexit 5\n";
  request.stdin_data = "6 7\n";
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kNonzeroExit);
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.stdout_data, "42\n");
  EXPECT_EQ(result.stderr_data, "oops\n");
}

TEST(SandboxExecTest, ArgvModeWithFiles) {
  ExecRequest request;
  request.argv = {"/usr/bin/python3", "lib/tool.py", "x", "y"};
  request.files = {{"lib/tool.py", "import sys, data\nprint(sys.argv[1:], data.VALUE)\n", false},
                   {"lib/data.py", "VALUE = 17\n", false}};
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kOk) << result.stderr_data << result.error;
  EXPECT_EQ(result.stdout_data, "['x', 'y'] 17\n");
}

TEST(SandboxExecTest, MissingProgramIsASandboxError) {
  ExecRequest request;
  request.argv = {"/usr/bin/no-such-program"};
  ExecResult result = MustRun(request);
  EXPECT_EQ(result.verdict, Verdict::kSandboxError);
  EXPECT_THAT(result.error, HasSubstr("no-such-program"));
}

TEST(SandboxExecTest, ConcurrentRunsAreIndependent) {
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(kThreads);
  std::vector<std::string> failures(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i, &outputs, &failures] {
      ExecRequest request = Python("import os\nprint(input(), sorted(os.listdir('.')))\n");
      request.stdin_data = absl::StrCat("run", i);
      request.files = {{absl::StrCat("only", i), "", false}};
      absl::StatusOr<ExecResult> result = TheSandbox().Run(request);
      if (!result.ok()) {
        failures[i] = result.status().ToString();
        return;
      }
      outputs[i] = result->stdout_data;
      failures[i] = absl::StrCat("verdict ", VerdictName(result->verdict), ", error '",
                                 result->error, "', stderr '", result->stderr_data, "'");
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(outputs[i], absl::StrCat("run", i, " ['main.py', 'only", i, "']\n"))
        << failures[i];
  }
}

absl::Status ValidationOf(ExecRequest request) {
  absl::StatusOr<ExecResult> result = TheSandbox().Run(request);
  return result.status();
}

TEST(SandboxExecTest, BadRequestsNameTheField) {
  ExecRequest unknown = Python("print(1)");
  unknown.language = "cobol";
  EXPECT_THAT(ValidationOf(unknown).message(), HasSubstr("language \"cobol\" is unknown"));
  EXPECT_EQ(ValidationOf(unknown).code(), absl::StatusCode::kInvalidArgument);

  ExecRequest negative = Python("print(1)");
  negative.limits.wall_ms = -5;
  EXPECT_THAT(ValidationOf(negative).message(), HasSubstr("limits.wall_ms must be positive"));
  negative = Python("print(1)");
  negative.limits.memory_mb = 0;
  EXPECT_THAT(ValidationOf(negative).message(), HasSubstr("limits.memory_mb must be positive"));

  ExecRequest oversize = Python(std::string(2 << 20, '#'));
  EXPECT_THAT(ValidationOf(oversize).message(), HasSubstr("source"));
  EXPECT_THAT(ValidationOf(oversize).message(), HasSubstr("more than 1048576"));

  ExecRequest empty;
  EXPECT_THAT(ValidationOf(empty).message(), HasSubstr("argv is empty"));

  ExecRequest escape = Python("print(1)");
  escape.files = {{"../etc/passwd", "x", false}};
  EXPECT_THAT(ValidationOf(escape).message(), HasSubstr("files[0].path"));
  escape.files = {{"/abs", "x", false}};
  EXPECT_THAT(ValidationOf(escape).message(), HasSubstr("must be relative"));

  ExecRequest big_stdin = Python("print(1)");
  big_stdin.stdin_data.assign(17 << 20, 'x');
  EXPECT_THAT(ValidationOf(big_stdin).message(), HasSubstr("stdin"));
}

TEST(SandboxExecTest, VerdictNamesRoundTrip) {
  for (Verdict verdict : AllVerdicts()) {
    EXPECT_EQ(ParseVerdict(VerdictName(verdict)), verdict);
  }
  EXPECT_EQ(VerdictName(Verdict::kNonzeroExit), "nonzero_exit");
  EXPECT_FALSE(ParseVerdict("fine").has_value());
}

TEST(SandboxIsolationTest, StatesWhichLimitsHold) {
  const IsolationReport& with = testing::SharedSandbox(true).isolation();
  const IsolationReport& without = testing::SharedSandbox(false).isolation();
  // The statement matches what the probe found on this machine.
  const CgroupSupport probed = ProbeCgroups();
  EXPECT_EQ(with.cgroup.kind, probed.kind);
  switch (probed.kind) {
    case CgroupSupport::Kind::kV2:
      EXPECT_THAT(with.cgroup.statement, HasSubstr("cgroup v2 (memory, pids"));
      break;
    case CgroupSupport::Kind::kV1:
      EXPECT_THAT(with.cgroup.statement, HasSubstr("cgroup v1 (memory, pids)"));
      break;
    case CgroupSupport::Kind::kNone:
      EXPECT_THAT(with.cgroup.statement, HasSubstr("per-process rlimits only"));
      break;
  }
  EXPECT_EQ(without.cgroup.kind, CgroupSupport::Kind::kNone);
  EXPECT_THAT(without.cgroup.statement, HasSubstr("per-process rlimits only"));
  bool states_cgroup = false;
  for (const std::string& line : with.lines) {
    if (absl::StartsWith(line, "cgroup: ")) states_cgroup = true;
  }
  EXPECT_TRUE(states_cgroup);
}

TEST(SandboxIsolationTest, MissingInitBinaryIsAClearError) {
  SandboxOptions options;
  options.init_path = "/nonexistent/lockstep-sandbox-init";
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
  EXPECT_EQ(sandbox.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sandbox.status().message(), HasSubstr("/nonexistent/lockstep-sandbox-init"));
}

}  // namespace
}  // namespace lockstep::sandbox
