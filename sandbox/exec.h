// What the sandbox runs and what comes back: ExecRequest -> ExecResult (see sandbox.h for Run).
// Plain structs, no behaviour beyond validation and names; shared by the library, the CLI,
// the gRPC service (sandbox_convert.h) and the code rewards.
#ifndef LOCKSTEP_SANDBOX_EXEC_H_
#define LOCKSTEP_SANDBOX_EXEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep::sandbox {

// Limits of one run. Every field must be positive. For `cpp` they apply to the compiled
// program; the compiler runs under SandboxOptions::compile_limits.
struct ExecLimits {
  int64_t wall_ms = 10000;          // wall clock from the step's fork; the whole namespace dies
  int64_t cpu_ms = 10000;           // CPU time per process (RLIMIT_CPU, whole seconds, rounded up)
  int64_t memory_mb = 512;          // address space per process (RLIMIT_AS); cgroup memory where held
  int64_t max_processes = 64;       // processes and threads alive at once (RLIMIT_NPROC; pids.max)
  int64_t max_output_bytes = 1 << 20;  // stdout and stderr each; beyond it the run is killed
  int64_t max_file_bytes = 16 << 20;   // largest file a process may write (RLIMIT_FSIZE)
  int64_t work_dir_mb = 64;         // size of the private tmpfs at /work (= /tmp)
  int64_t max_open_files = 64;      // RLIMIT_NOFILE
};

// A file placed in /work before the program starts. `path` is relative, without "..".
struct SourceFile {
  std::string path;
  std::string content;
  bool executable = false;
};

struct ExecRequest {
  // "python3" (source -> main.py), "cpp" (source -> main.cc, g++ then ./main), "bash"
  // (source -> main.sh), or "" to run `argv` as given (argv[0] an absolute path inside the
  // sandbox, e.g. /usr/bin/python3, or a path relative to /work).
  std::string language;
  std::string source;
  std::vector<std::string> argv;   // with a language: extra arguments for the program
  std::vector<SourceFile> files;
  std::string stdin_data;
  ExecLimits limits;
};

enum class Verdict {
  kOk,            // exited with status 0
  kNonzeroExit,   // exited with another status
  kTimeout,       // past the wall-clock or the CPU limit
  kMemoryLimit,   // an allocation failed at the memory limit, or the cgroup OOM-killed it
  kOutputLimit,   // stdout/stderr past max_output_bytes, or a file past max_file_bytes
  kKilled,        // ended by a signal that no limit explains (SIGSEGV, SIGABRT, ...)
  kCompileError,  // cpp: the compiler failed (its output is in stderr)
  kSandboxError,  // the sandbox itself failed (ExecResult::error says how); not the program's fault
};

// "ok", "nonzero_exit", "timeout", "memory_limit", "output_limit", "killed", "compile_error",
// "sandbox_error".
absl::string_view VerdictName(Verdict verdict);
std::optional<Verdict> ParseVerdict(absl::string_view name);
// Every verdict, in enum order.
const std::vector<Verdict>& AllVerdicts();

struct ExecResult {
  Verdict verdict = Verdict::kSandboxError;
  int exit_code = -1;       // -1 when ended by a signal or never started
  int signal = 0;           // the terminating signal, 0 if none
  std::string stdout_data;  // at most limits.max_output_bytes
  std::string stderr_data;  // same; for kCompileError, the compiler's output
  bool truncated = false;   // stdout or stderr was cut at the limit
  double wall_ms = 0;       // of the program (not the compiler)
  double cpu_ms = 0;        // user + system of the program and its waited-for children
  double peak_memory_mb = 0;  // largest resident set of any one process of the program
  std::string error;        // for kSandboxError: what failed
};

// Limits on a request's size (the sandbox refuses larger ones before starting anything).
struct RequestBounds {
  int64_t max_source_bytes = 1 << 20;   // source + every file, together
  int64_t max_stdin_bytes = 16 << 20;
  int64_t max_files = 64;
  int64_t max_args = 64;
};

// OK, or InvalidArgument naming the field: unknown language, missing source or argv, a
// non-positive limit, a bad file path, a request beyond `bounds`.
absl::Status ValidateRequest(const ExecRequest& request, const RequestBounds& bounds = {});

// The known languages, sorted: bash, cpp, python3.
const std::vector<std::string>& KnownLanguages();

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_EXEC_H_
