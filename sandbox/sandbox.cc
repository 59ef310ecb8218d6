#include "sandbox/sandbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sandbox/launcher.h"
#include "sandbox/seccomp_policy.h"

#ifndef LOCKSTEP_SANDBOX_INIT_BUILD_PATH
#define LOCKSTEP_SANDBOX_INIT_BUILD_PATH ""
#endif

namespace lockstep::sandbox {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr uint32_t kNobody = 65534;
// Time the launcher allows beyond the steps' own wall limits (namespace and mount set-up,
// compiler start) before it kills the run itself.
constexpr int64_t kBackstopSlackMs = 5000;

bool IsExecutable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string FindInit(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("LOCKSTEP_SANDBOX_INIT"); env != nullptr && env[0] != '\0') {
    return env;
  }
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.erase(dir.rfind('/'));
    const std::string beside = absl::StrCat(dir, "/lockstep-sandbox-init");
    if (IsExecutable(beside)) return beside;
  }
  return LOCKSTEP_SANDBOX_INIT_BUILD_PATH;
}

// Words with which interpreters and runtimes report a failed allocation: under RLIMIT_AS a
// program that runs out of memory fails an allocation instead of being killed.
bool ReportsAllocationFailure(const std::string& stderr_data) {
  for (absl::string_view marker : {"MemoryError", "std::bad_alloc", "Cannot allocate memory",
                                   "cannot allocate memory", "out of memory", "Out of memory"}) {
    if (absl::StrContains(stderr_data, marker)) return true;
  }
  return false;
}

protocol::StepRecord StepLimits(const ExecLimits& limits) {
  protocol::StepRecord step = {};
  step.wall_ms = static_cast<uint64_t>(limits.wall_ms);
  step.cpu_ms = static_cast<uint64_t>(limits.cpu_ms);
  step.address_space_bytes = static_cast<uint64_t>(limits.memory_mb * kMiB);
  step.max_processes = static_cast<uint64_t>(limits.max_processes);
  step.max_file_bytes = static_cast<uint64_t>(limits.max_file_bytes);
  step.max_open_files = static_cast<uint64_t>(limits.max_open_files);
  return step;
}

std::vector<std::string> SandboxEnvironment() {
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work", "TMPDIR=/tmp", "LANG=C.UTF-8",
          "PYTHONDONTWRITEBYTECODE=1"};
}

// The records every run of a sandbox shares (its identity, binds, symlinks): what a warm init
// builds before its run is known.
LaunchSpec RootSpec(const SandboxOptions& options, uint32_t outside_uid) {
  LaunchSpec spec;
  spec.sandbox.outside_uid = outside_uid;
  spec.sandbox.outside_gid = geteuid() == 0 ? kNobody : getegid();
  spec.sandbox.mount_proc = 1;
  for (const std::string& path : options.read_only_paths) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      if (n > 0) spec.symlinks.emplace_back(std::string(target, static_cast<size_t>(n)), path);
    } else {
      spec.read_only_binds.emplace_back(path, path);
    }
  }
  for (const char* device : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
    spec.device_binds.emplace_back(device, device);
  }
  spec.symlinks.emplace_back("/proc/self/fd", "/dev/fd");
  spec.symlinks.emplace_back("/proc/self/fd/0", "/dev/stdin");
  spec.symlinks.emplace_back("/proc/self/fd/1", "/dev/stdout");
  spec.symlinks.emplace_back("/proc/self/fd/2", "/dev/stderr");
  return spec;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(SandboxOptions options) {
  IsolationReport isolation;
  isolation.init_path = FindInit(options.init_path);
  if (!IsExecutable(isolation.init_path)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox: no lockstep-sandbox-init binary (looked at \"", isolation.init_path,
        "\"; set SandboxOptions::init_path or LOCKSTEP_SANDBOX_INIT)"));
  }
  for (const std::string& path : options.read_only_paths) {
    if (path.empty() || path[0] != '/' || path == "/tmp" || absl::StartsWith(path, "/tmp/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sandbox: read_only_paths entry \"", path, "\" must be absolute and not under /tmp"));
    }
  }
  absl::StatusOr<std::string> filter = BuildSeccompFilter();
  if (!filter.ok()) return filter.status();
  isolation.cgroup = options.use_cgroups
                         ? ProbeCgroups()
                         : CgroupSupport{.statement = "no cgroup (turned off by the options): "
                                                      "memory and process limits are per-process "
                                                      "rlimits only"};
  isolation.outside_uid = geteuid() == 0 ? kNobody : geteuid();
  std::unique_ptr<NetNamespacePool> net_namespaces =
      NetNamespacePool::CreateIfRoot(isolation.outside_uid);
  isolation.lines = {
      net_namespaces != nullptr
          ? "namespaces: user, pid, mount, network (no interfaces; owned by the host's root, "
            "reused by later runs once empty), ipc, uts, cgroup"
          : "namespaces: user, pid, mount, network (no interfaces), ipc, uts, cgroup",
      absl::StrCat("identity: root inside, uid ", isolation.outside_uid,
                   " outside; no capabilities after execve"),
      "filesystem: read-only root of bind mounts, tmpfs /work (= /tmp) capped by work_dir_mb",
      absl::StrCat("seccomp: allowlist, ", filter->size() / 8, " BPF instructions, EPERM otherwise"),
      "rlimits: AS, CPU, NPROC, FSIZE, NOFILE, CORE=0, MEMLOCK=0 per process",
      absl::StrCat("cgroup: ", isolation.cgroup.statement),
      "wall clock: every process of the run's PID namespace is killed at wall_ms"};
  RemoveStaleRunCgroups(isolation.cgroup);
  const int warm_inits = options.warm_inits;
  LaunchSpec root = RootSpec(options, isolation.outside_uid);
  auto sandbox = std::unique_ptr<Sandbox>(
      new Sandbox(std::move(options), *std::move(filter), std::move(isolation), root));
  sandbox->net_namespaces_ = std::move(net_namespaces);
  if (warm_inits > 0) {
    sandbox->pool_ = std::make_unique<WarmInitPool>(sandbox->isolation_.init_path,
                                                    sandbox->isolation_.cgroup, warm_inits,
                                                    std::move(root), sandbox->net_namespaces_.get());
  }

  // Prove that this kernel lets us build the sandbox at all (user namespaces may be disabled).
  ExecRequest probe;
  probe.argv = {"/usr/bin/true"};
  probe.limits.wall_ms = 10000;
  absl::StatusOr<ExecResult> result = sandbox->Run(probe);
  if (!result.ok()) return result.status();
  if (result->verdict != Verdict::kOk) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox: a trial run of /usr/bin/true failed (", VerdictName(result->verdict), "): ",
        result->error.empty() ? result->stderr_data : result->error));
  }
  return sandbox;
}

absl::StatusOr<ExecResult> Sandbox::Run(const ExecRequest& request) const {
  if (absl::Status status = ValidateRequest(request, options_.bounds); !status.ok()) return status;
  const ExecLimits& limits = request.limits;
  const bool compiled = request.language == "cpp";

  LaunchSpec spec = root_spec_;
  const int64_t work_dir_mb =
      compiled ? std::max(limits.work_dir_mb, options_.compile_limits.work_dir_mb) : limits.work_dir_mb;
  spec.sandbox.work_dir_bytes = static_cast<uint64_t>(work_dir_mb * kMiB);
  spec.sandbox.work_dir_inodes = 4096;
  spec.seccomp_filter = seccomp_filter_;
  spec.stdin_data = request.stdin_data;
  spec.max_output_bytes = limits.max_output_bytes;

  for (const SourceFile& file : request.files) {
    spec.files.push_back({file.path, file.content, file.executable ? 0755u : 0644u});
  }
  std::vector<std::string> program;
  if (request.language == "python3") {
    spec.files.push_back({"main.py", request.source, 0644});
    program = {options_.python3_path, "main.py"};
  } else if (request.language == "bash") {
    spec.files.push_back({"main.sh", request.source, 0644});
    program = {options_.bash_path, "main.sh"};
  } else if (compiled) {
    spec.files.push_back({"main.cc", request.source, 0644});
    LaunchStep compile;
    compile.limits = StepLimits(options_.compile_limits);
    compile.limits.capture_output = 1;
    compile.limits.stop_on_failure = 1;
    compile.argv.push_back(options_.cpp_compiler);
    compile.argv.insert(compile.argv.end(), options_.cpp_flags.begin(), options_.cpp_flags.end());
    compile.argv.insert(compile.argv.end(), {"-o", "main", "main.cc"});
    compile.env = SandboxEnvironment();
    spec.steps.push_back(std::move(compile));
    program = {"./main"};
  }
  program.insert(program.end(), request.argv.begin(), request.argv.end());
  LaunchStep run;
  run.limits = StepLimits(limits);
  run.limits.use_stdin = 1;
  run.argv = std::move(program);
  run.env = SandboxEnvironment();
  spec.steps.push_back(std::move(run));
  spec.deadline_ms = kBackstopSlackMs;
  int64_t cgroup_memory_mb = 0, cgroup_processes = 0;
  for (const LaunchStep& step : spec.steps) {
    spec.deadline_ms += static_cast<int64_t>(step.limits.wall_ms);
    cgroup_memory_mb = std::max<int64_t>(cgroup_memory_mb, step.limits.address_space_bytes / kMiB);
    cgroup_processes = std::max<int64_t>(cgroup_processes, step.limits.max_processes);
  }

  // The tmpfs's pages are charged to the run too; 64 MiB covers page tables and pipes.
  const CgroupLimits cgroup_limits = {.memory_bytes = (cgroup_memory_mb + work_dir_mb + 64) * kMiB,
                                      .max_processes = cgroup_processes + 2};
  std::optional<RunCgroup> cgroup;
  // The run's network namespace: back to the pool after the outer init's reap.
  NetNamespaceLease net_namespace;
  absl::StatusOr<LaunchOutcome> launched = absl::UnavailableError("no warm init");
  // The outer init goes to the reaper when this returns, with the cgroups and the namespace.
  struct HandOff {
    InitReaper& reaper;
    std::optional<RunCgroup>& cgroup;
    NetNamespaceLease& net_namespace;
    pid_t init = -1;
    ~HandOff() {
      if (init > 0) reaper.Add(init, std::move(cgroup), std::move(net_namespace));
    }
  } hand_off{*reaper_, cgroup, net_namespace};
  // A warm init (already in its fresh cgroups) if one is ready, else a cold start.
  if (std::optional<PooledInit> warm = pool_ != nullptr ? pool_->Take() : std::nullopt) {
    if (warm->cgroup.has_value()) {
      if (absl::Status limited = warm->cgroup->SetLimits(cgroup_limits); !limited.ok()) {
        DiscardWarmInit(&warm->init);
        return ExecResult{.verdict = Verdict::kSandboxError, .error = limited.ToString()};
      }
      cgroup.emplace(std::move(*warm->cgroup));
    }
    launched = LaunchWarm(warm->init, spec);
    if (launched.ok()) {
      net_namespace = std::move(warm->net_namespace);
    } else {
      cgroup.reset();  // the init is gone (reaped): its cgroups and namespace go too
    }
  }
  if (!launched.ok() && absl::IsUnavailable(launched.status())) {
    if (net_namespaces_ != nullptr) {
      absl::StatusOr<NetNamespaceLease> lease = net_namespaces_->Take();
      if (!lease.ok()) {
        return ExecResult{.verdict = Verdict::kSandboxError, .error = lease.status().ToString()};
      }
      net_namespace = *std::move(lease);
    }
    if (isolation_.cgroup.kind != CgroupSupport::Kind::kNone) {
      absl::StatusOr<RunCgroup> created = RunCgroup::Create(isolation_.cgroup, cgroup_limits);
      if (!created.ok()) {
        return ExecResult{.verdict = Verdict::kSandboxError, .error = created.status().ToString()};
      }
      cgroup.emplace(*std::move(created));
      spec.cgroup_procs = cgroup->procs_files();
    }
    launched = Launch(isolation_.init_path, spec, net_namespace.fd());
  }
  if (!launched.ok()) {
    return ExecResult{.verdict = Verdict::kSandboxError, .error = launched.status().ToString()};
  }
  LaunchOutcome& outcome = *launched;
  hand_off.init = outcome.unreaped_init;
  ExecResult result;
  result.stdout_data = std::move(outcome.stdout_data);
  result.stderr_data = std::move(outcome.stderr_data);
  result.truncated = outcome.output_limit;
  if (!outcome.error.empty()) {
    result.verdict = Verdict::kSandboxError;
    result.error = outcome.error;
    return result;
  }
  if (compiled && !outcome.steps.empty() && outcome.steps[0].done.step_index == 0) {
    const protocol::StepDoneRecord& done = outcome.steps[0].done;
    const bool compile_ok = !done.timed_out && WIFEXITED(done.wait_status) &&
                            WEXITSTATUS(done.wait_status) == 0;
    if (!compile_ok) {
      result.verdict = Verdict::kCompileError;
      result.stderr_data = outcome.steps[0].captured_output;
      if (done.timed_out) absl::StrAppend(&result.stderr_data, "\n[compiler timed out]");
      return result;
    }
  }
  const size_t program_index = spec.steps.size() - 1;
  if (outcome.steps.size() != spec.steps.size()) {
    // The program's step never reported: the launcher killed the run first.
    if (outcome.output_limit) {
      result.verdict = Verdict::kOutputLimit;
    } else if (outcome.deadline_killed) {
      result.verdict = compiled && outcome.steps.empty() ? Verdict::kCompileError : Verdict::kTimeout;
    } else {
      result.verdict = Verdict::kSandboxError;
      result.error = "the sandbox init ended without reporting the program's end";
    }
    result.wall_ms = outcome.total_wall_ms;
    return result;
  }
  const protocol::StepDoneRecord& done = outcome.steps[program_index].done;
  result.wall_ms = static_cast<double>(done.wall_us) / 1000.0;
  result.cpu_ms = static_cast<double>(done.user_cpu_us + done.system_cpu_us) / 1000.0;
  result.peak_memory_mb = static_cast<double>(done.max_rss_kb) / 1024.0;
  const int status = done.wait_status;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  const bool failed = result.exit_code != 0;
  const bool cpu_exhausted =
      result.signal == SIGXCPU ||
      (result.signal == SIGKILL && result.cpu_ms >= static_cast<double>(limits.cpu_ms));

  if (outcome.output_limit) {
    result.verdict = Verdict::kOutputLimit;
  } else if (done.timed_out || outcome.deadline_killed || cpu_exhausted) {
    result.verdict = Verdict::kTimeout;
  } else if (result.signal == SIGXFSZ) {
    result.verdict = Verdict::kOutputLimit;
  } else if (failed && ((cgroup.has_value() && cgroup->MemoryLimitHit()) ||
                        ReportsAllocationFailure(result.stderr_data))) {
    result.verdict = Verdict::kMemoryLimit;
  } else if (result.signal != 0) {
    result.verdict = Verdict::kKilled;
  } else if (failed) {
    result.verdict = Verdict::kNonzeroExit;
  } else {
    result.verdict = Verdict::kOk;
  }
  return result;
}

absl::StatusOr<Sandbox*> DefaultSandbox() {
  static const absl::StatusOr<std::unique_ptr<Sandbox>>* sandbox =
      new absl::StatusOr<std::unique_ptr<Sandbox>>(Sandbox::Create());
  if (!sandbox->ok()) return sandbox->status();
  return sandbox->value().get();
}

absl::StatusOr<ExecResult> Run(const ExecRequest& request) {
  absl::StatusOr<Sandbox*> sandbox = DefaultSandbox();
  if (!sandbox.ok()) return sandbox.status();
  return (*sandbox)->Run(request);
}

}  // namespace lockstep::sandbox
