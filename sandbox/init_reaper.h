// Reaps finished runs' outer inits off the caller's thread. A run's result is complete once its
// namespace init is gone, and with it every process of the run (the kernel empties a PID
// namespace before its pid 1 is dead); the outer init, which only waits for that one, exits a
// moment later, and its exit tears the run's mount, IPC, UTS and user namespaces down (about a
// millisecond). Sandbox::Run hands it here with what must outlive it: the run's cgroups (a
// cgroup holding a process cannot be removed) and its network namespace lease (it goes back to
// the pool only when no process of the run is in it).
//
// Thread safety: Add may be called from any thread. The destructor reaps everything pending.
#ifndef LOCKSTEP_SANDBOX_INIT_REAPER_H_
#define LOCKSTEP_SANDBOX_INIT_REAPER_H_

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "sandbox/cgroup.h"
#include "sandbox/net_namespace_pool.h"

namespace lockstep::sandbox {

class InitReaper {
 public:
  InitReaper();
  ~InitReaper();
  InitReaper(const InitReaper&) = delete;
  InitReaper& operator=(const InitReaper&) = delete;

  // Reaps `init` (a child of this process) and then releases `cgroup` and `net_namespace`.
  void Add(pid_t init, std::optional<RunCgroup> cgroup, NetNamespaceLease net_namespace);

  // Inits added and not yet reaped.
  size_t num_pending();

 private:
  struct Pending {
    pid_t init;
    std::optional<RunCgroup> cgroup;
    NetNamespaceLease net_namespace;
  };
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_INIT_REAPER_H_
