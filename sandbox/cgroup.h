// Per-run cgroups for the sandbox: memory, process-count and CPU limits that hold for the whole
// process tree of a run, where this machine lets us create cgroups.
//
// Probe() looks, in order, for a writable cgroup v2 directory whose parent delegates the memory
// and pids controllers (the cgroup this process is in, then /sys/fs/cgroup), then for writable
// cgroup v1 memory and pids hierarchies (/sys/fs/cgroup/memory, /sys/fs/cgroup/pids). Without
// either, CgroupSupport::kind is kNone and `statement` says why; the rlimits (sandbox.h) are
// then the only limits, and they are per process, not per run.
#ifndef LOCKSTEP_SANDBOX_CGROUP_H_
#define LOCKSTEP_SANDBOX_CGROUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::sandbox {

struct CgroupSupport {
  enum class Kind { kNone, kV2, kV1 };
  Kind kind = Kind::kNone;
  // v2: the parent directory runs are created under. v1: the memory and pids parents.
  std::string v2_parent;
  std::string v1_memory_parent;
  std::string v1_pids_parent;
  bool cpu = false;  // v2 only: cpu.max is available
  // One line for logs and docs, e.g. "cgroup v1 (memory, pids) at /sys/fs/cgroup/{memory,pids}
  // /lockstep-sandbox" or "no cgroup: /sys/fs/cgroup/cgroup.controllers lacks memory".
  std::string statement;
};

// Probes what this process may use (creates and removes a test directory). Never fails: a
// missing or read-only tree yields kind kNone.
CgroupSupport ProbeCgroups();

struct CgroupLimits {
  int64_t memory_bytes = 0;   // the whole run's memory (anonymous + tmpfs + kernel)
  int64_t max_processes = 0;
  double cpu_cores = 0;       // v2 only; 0 = unlimited
};

// One run's cgroup directories. Move-only; the destructor removes them (the run's processes
// have all exited by then, so rmdir succeeds).
class RunCgroup {
 public:
  // Creates the run's directories under `support`'s parents and writes `limits`. Internal
  // naming the file when a write fails.
  static absl::StatusOr<RunCgroup> Create(const CgroupSupport& support, const CgroupLimits& limits);
  // The directories only, unlimited until SetLimits (a warm init joins them before its run's
  // limits are known; nothing of the run starts before they are set).
  static absl::StatusOr<RunCgroup> Create(const CgroupSupport& support);
  // Writes `limits`. Internal naming the file when a write fails.
  absl::Status SetLimits(const CgroupLimits& limits);

  RunCgroup(RunCgroup&& other) noexcept;
  RunCgroup& operator=(RunCgroup&&) = delete;
  ~RunCgroup();

  // The cgroup.procs files a process writes its pid to, to join the run's cgroups.
  const std::vector<std::string>& procs_files() const { return procs_files_; }

  // True if the memory controller killed a process for memory (v2 memory.events oom_kill, v1
  // memory.oom_control oom_kill) or refused a charge (v1 memory.failcnt).
  bool MemoryLimitHit() const;

 private:
  RunCgroup() = default;

  CgroupSupport::Kind kind_ = CgroupSupport::Kind::kNone;
  std::vector<std::string> directories_;
  std::vector<std::string> procs_files_;
  std::string memory_directory_;
  std::string pids_directory_;
  bool cpu_ = false;
};

// Removes run directories ("run-<pid>-<n>") left by processes that have ended (a process that
// exits without destroying its Sandbox leaves its idle warm inits' directories behind). Busy
// ones stay.
void RemoveStaleRunCgroups(const CgroupSupport& support);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_CGROUP_H_
