// `lockstep sandbox exec --language L FILE [--stdin F] [--wall-ms N --memory-mb N ...] [-- ARGS]`
// runs one program in the sandbox and prints its ExecResult as JSON (sandbox/exec_json.h). The
// exit status is 0 whenever the sandbox itself worked, whatever the program did (so graders can
// be tried by hand), 1 for a bad request or a sandbox_error.
// `lockstep sandbox check` prints which isolation features hold on this machine.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "sandbox/exec_json.h"
#include "sandbox/sandbox.h"

namespace lockstep::cli {
namespace {

struct SandboxExecFlags {
  std::string language;
  std::string file;
  std::string stdin_file;
  std::vector<std::string> args;
  sandbox::ExecLimits limits;
  bool no_cgroups = false;
};

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::unique_ptr<sandbox::Sandbox>> MakeSandbox(bool no_cgroups) {
  sandbox::SandboxOptions options;
  options.use_cgroups = !no_cgroups;
  return sandbox::Sandbox::Create(options);
}

absl::Status RunSandboxExec(const SandboxExecFlags& flags) {
  sandbox::ExecRequest request;
  request.language = flags.language;
  request.limits = flags.limits;
  request.argv = flags.args;
  absl::StatusOr<std::string> source = ReadWholeFile(flags.file, "program");
  if (!source.ok()) return source.status();
  if (flags.language.empty()) {
    // No language: FILE is an executable placed in /work and run with ARGS.
    request.files.push_back({"program", *source, /*executable=*/true});
    request.argv.insert(request.argv.begin(), "./program");
  } else {
    request.source = *std::move(source);
  }
  if (!flags.stdin_file.empty()) {
    absl::StatusOr<std::string> input = ReadWholeFile(flags.stdin_file, "stdin file");
    if (!input.ok()) return input.status();
    request.stdin_data = *std::move(input);
  }
  absl::StatusOr<std::unique_ptr<sandbox::Sandbox>> box = MakeSandbox(flags.no_cgroups);
  if (!box.ok()) return box.status();
  absl::StatusOr<sandbox::ExecResult> result = (*box)->Run(request);
  if (!result.ok()) return result.status();
  std::printf("%s\n", sandbox::DumpJson(sandbox::ToJson(*result)).c_str());
  if (result->verdict == sandbox::Verdict::kSandboxError) {
    return absl::InternalError(absl::StrCat("the sandbox failed: ", result->error));
  }
  return absl::OkStatus();
}

absl::Status RunSandboxCheck(bool no_cgroups) {
  absl::StatusOr<std::unique_ptr<sandbox::Sandbox>> box = MakeSandbox(no_cgroups);
  if (!box.ok()) return box.status();
  const sandbox::IsolationReport& isolation = (*box)->isolation();
  std::printf("sandbox init: %s\n", isolation.init_path.c_str());
  for (const std::string& line : isolation.lines) std::printf("%s\n", line.c_str());
  return absl::OkStatus();
}

}  // namespace

void AddSandboxCommand(CLI::App& app) {
  CLI::App* group = app.add_subcommand("sandbox", "Run untrusted programs in the sandbox");
  group->require_subcommand(1);

  auto flags = std::make_shared<SandboxExecFlags>();
  CLI::App* exec = group->add_subcommand(
      "exec", "Run one program in the sandbox and print its result as JSON");
  exec->add_option("--language,-l", flags->language,
                   absl::StrCat("python3, cpp (g++ then run) or bash; omitted: FILE is an "
                                "executable run as is (known: ",
                                absl::StrJoin(sandbox::KnownLanguages(), ", "), ")"));
  exec->add_option("file", flags->file, "The program's source (or executable)")
      ->required()
      ->check(CLI::ExistingFile);
  exec->add_option("--stdin", flags->stdin_file, "File fed to the program's stdin")
      ->check(CLI::ExistingFile);
  exec->add_option("args", flags->args, "Arguments for the program (after --)");
  sandbox::ExecLimits& limits = flags->limits;
  exec->add_option("--wall-ms", limits.wall_ms, "Wall-clock limit")->capture_default_str();
  exec->add_option("--cpu-ms", limits.cpu_ms, "CPU-time limit per process")->capture_default_str();
  exec->add_option("--memory-mb", limits.memory_mb, "Memory (address space) limit per process")
      ->capture_default_str();
  exec->add_option("--max-processes", limits.max_processes, "Processes and threads at once")
      ->capture_default_str();
  exec->add_option("--max-output-bytes", limits.max_output_bytes, "Cap on stdout and on stderr")
      ->capture_default_str();
  exec->add_option("--max-file-bytes", limits.max_file_bytes, "Largest file the program may write")
      ->capture_default_str();
  exec->add_option("--work-dir-mb", limits.work_dir_mb, "Size of the tmpfs at /work")
      ->capture_default_str();
  exec->add_option("--max-open-files", limits.max_open_files, "Open descriptors per process")
      ->capture_default_str();
  exec->add_flag("--no-cgroups", flags->no_cgroups,
                 "Do not use cgroups even where writable (rlimits only)");
  exec->callback([flags] { ExitOnError(RunSandboxExec(*flags)); });

  auto check_no_cgroups = std::make_shared<bool>(false);
  CLI::App* check = group->add_subcommand(
      "check", "Build the sandbox once and print which isolation features hold here");
  check->add_flag("--no-cgroups", *check_no_cgroups, "As the exec flag");
  check->callback([check_no_cgroups] { ExitOnError(RunSandboxCheck(*check_no_cgroups)); });
}

}  // namespace lockstep::cli
