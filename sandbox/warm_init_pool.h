// Inits spawned ahead of their runs, each already inside its own fresh run cgroups and its own
// fresh namespaces with the read-only root built, so that a run waits neither for the cgroup
// attach (with cgroup v1: ~10 ms of waiting for an RCU grace period) nor for the namespaces and
// mounts (~3 ms); bench/sandbox measures it. One spawner thread keeps
// `num_idle` warm inits ready; Take hands one out and wakes the spawner to replace it.
//
// The spawner thread is the warm inits' parent thread: they die with it (PR_SET_PDEATHSIG), and
// it lives as long as the pool. Thread safety: Take may be called from any thread.
#ifndef LOCKSTEP_SANDBOX_WARM_INIT_POOL_H_
#define LOCKSTEP_SANDBOX_WARM_INIT_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "sandbox/cgroup.h"
#include "sandbox/launcher.h"
#include "sandbox/net_namespace_pool.h"

namespace lockstep::sandbox {

// A warm init, the run cgroups it joined (none without cgroup support) and the network namespace
// it entered (a root caller's only; empty otherwise). The cgroups have no limits yet: set them
// before LaunchWarm hands the init its run. Its cgroups and namespace are released only once
// the init is reaped: by DiscardWarmInit or a failed LaunchWarm at once, after a run by the
// Sandbox's InitReaper (they move there with the init).
struct PooledInit {
  WarmInit init;
  std::optional<RunCgroup> cgroup;
  NetNamespaceLease net_namespace;
};

class WarmInitPool {
 public:
  // Starts the spawner thread, which spawns `num_idle` (>= 1) inits of `init_path` at once, each
  // building the read-only root of `root` (launcher.h: SpawnWarmInit) in its namespaces, its
  // network namespace lent by `net_namespaces` (null: each init makes its own). `net_namespaces`
  // must outlive the pool.
  WarmInitPool(std::string init_path, CgroupSupport cgroup, int num_idle, LaunchSpec root,
               NetNamespacePool* net_namespaces);

  // Stops the spawner, which first ends every idle init (their cgroups are removed).
  ~WarmInitPool();

  WarmInitPool(const WarmInitPool&) = delete;
  WarmInitPool& operator=(const WarmInitPool&) = delete;

  // A ready init, or nullopt when none is (all taken and not yet replaced, or spawning fails):
  // the caller then launches cold. Never waits for a spawn.
  std::optional<PooledInit> Take();

  // Inits handed out by Take so far.
  int64_t num_taken() const { return num_taken_.load(); }

 private:
  void SpawnerLoop();

  const std::string init_path_;
  const CgroupSupport cgroup_;
  const LaunchSpec root_;
  const size_t num_idle_;
  NetNamespacePool* const net_namespaces_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<PooledInit> idle_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> num_taken_{0};
  std::thread spawner_;
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_WARM_INIT_POOL_H_
