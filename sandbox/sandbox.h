// The sandbox: runs an untrusted program (python3, g++-compiled C++, bash, or any argv) and
// returns its ExecResult (exec.h).
//
// Each run gets, by default and all at once: new user (root inside = an unprivileged uid
// outside), PID, mount, network (empty: no interface up, not even loopback), IPC, UTS and cgroup
// namespaces; a read-only root holding only bind mounts of SandboxOptions::read_only_paths and
// /dev/{null,zero,full,random,urandom}; a private size-capped tmpfs at /work (also /tmp) as the
// working directory; a fresh /proc of the PID namespace; no descriptors but stdin, stdout and
// stderr; no capabilities; the seccomp allowlist (seccomp_policy.h); rlimits (AS, CPU, NPROC,
// FSIZE, NOFILE, CORE=0, MEMLOCK=0); per-run cgroup memory and pids limits where the machine
// allows (cgroup.h; isolation().cgroup says which); and a wall-clock limit after which every
// process of the run's PID namespace is killed. When Run returns, no process of the run is left.
//
// The work happens in lockstep-sandbox-init (init_main.cc), a small static binary spawned per
// run with posix_spawn, so that Run is safe in a multithreaded process and costs no copy of the
// caller's address space. docs/sandbox.md states the guarantees and their limits.
#ifndef LOCKSTEP_SANDBOX_SANDBOX_H_
#define LOCKSTEP_SANDBOX_SANDBOX_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/cgroup.h"
#include "sandbox/exec.h"
#include "sandbox/executor.h"
#include "sandbox/init_reaper.h"
#include "sandbox/net_namespace_pool.h"
#include "sandbox/warm_init_pool.h"

namespace lockstep::sandbox {

struct SandboxOptions {
  // The init binary; "" = $LOCKSTEP_SANDBOX_INIT, else lockstep-sandbox-init next to the running
  // executable, else the one this library was built with.
  std::string init_path;
  // Host paths bound read-only at the same place inside (missing ones are skipped; symlinks,
  // such as Debian's /bin -> usr/bin, are recreated as symlinks). None may lie under /tmp.
  std::vector<std::string> read_only_paths = {"/usr", "/lib", "/lib64", "/bin", "/sbin",
                                              "/etc/alternatives", "/etc/ld.so.cache"};
  std::string python3_path = "/usr/bin/python3";
  std::string bash_path = "/bin/bash";
  std::string cpp_compiler = "/usr/bin/g++";
  std::vector<std::string> cpp_flags = {"-std=gnu++17", "-O2", "-pipe"};
  // Limits of the compiler (cpp): it needs more memory and time than most programs.
  ExecLimits compile_limits = {.wall_ms = 60000, .cpu_ms = 60000, .memory_mb = 2048,
                               .max_processes = 16, .max_output_bytes = 64 << 10,
                               .max_file_bytes = 256 << 20, .work_dir_mb = 256,
                               .max_open_files = 256};
  // false: never use cgroups (limits are per-process rlimits only).
  bool use_cgroups = true;
  // Inits kept spawned ahead, each inside its next run's fresh cgroups (warm_init_pool.h), so a
  // run does not wait for the cgroup attach; 0 = every run spawns its own init.
  int warm_inits = 2;
  RequestBounds bounds;
};

// Which isolation features hold for runs of this Sandbox, probed at Create.
struct IsolationReport {
  std::string init_path;
  CgroupSupport cgroup;
  uint32_t outside_uid = 0;  // the host uid sandboxed processes run as
  // Human-readable lines, one per feature: "namespaces: user, pid, mount, net, ipc, uts, cgroup",
  // "cgroup: ...", "rlimits: ...", "seccomp: allowlist of N rules".
  std::vector<std::string> lines;
};

class Sandbox final : public Executor {
 public:
  // Finds the init binary, builds the seccomp filter, probes cgroups, and runs `true` once in
  // the sandbox to prove the kernel allows it. FailedPrecondition naming what is missing (no
  // init binary, user namespaces disabled, ...).
  static absl::StatusOr<std::unique_ptr<Sandbox>> Create(SandboxOptions options = {});

  // Runs `request` (see Executor::Execute for the error contract).
  // Thread safety: safe to call concurrently; each run is independent.
  absl::StatusOr<ExecResult> Run(const ExecRequest& request) const;
  absl::StatusOr<ExecResult> Execute(const ExecRequest& request) override { return Run(request); }

  const IsolationReport& isolation() const { return isolation_; }
  // Runs that started on a warm init (the rest spawned their own: none was ready, or it had
  // died). Counts attempts: a warm init found dead falls back to a cold start.
  int64_t num_warm_starts() const { return pool_ != nullptr ? pool_->num_taken() : 0; }
  const SandboxOptions& options() const { return options_; }

 private:
  Sandbox(SandboxOptions options, std::string seccomp_filter, IsolationReport isolation,
          LaunchSpec root_spec)
      : options_(std::move(options)),
        seccomp_filter_(std::move(seccomp_filter)),
        isolation_(std::move(isolation)),
        root_spec_(std::move(root_spec)) {}

  SandboxOptions options_;
  std::string seccomp_filter_;
  IsolationReport isolation_;
  LaunchSpec root_spec_;  // identity, binds and symlinks of every run (a warm init builds them)
  // Network namespaces of the host's root, reused run after run; null unless the caller is root.
  std::unique_ptr<NetNamespacePool> net_namespaces_;
  // Reaps the runs' outer inits, then releases their cgroups and namespaces (leases of the pool
  // above, so destroyed before it).
  std::unique_ptr<InitReaper> reaper_ = std::make_unique<InitReaper>();
  // Last: destroyed first, ending the idle inits while the rest is alive. Null with warm_inits 0.
  std::unique_ptr<WarmInitPool> pool_;
};

// The process-wide sandbox with default options, created on first use (thread-safe); an error
// if it cannot be created (then every call returns that error).
absl::StatusOr<Sandbox*> DefaultSandbox();

// DefaultSandbox()->Run(request).
absl::StatusOr<ExecResult> Run(const ExecRequest& request);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_SANDBOX_H_
