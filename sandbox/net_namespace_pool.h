// Network namespaces of the host's root, reused run after run (one run at a time each), so that
// a run pays neither the creation of its network namespace (copy_net_ns: loopback, sysctl
// tables) nor its teardown (cleanup_net, a kernel worker): ~1.7 ms of CPU a run on this
// project's machine (docs/sandbox.md, "What a run costs").
//
// Sound only because the namespaces are owned by the initial user namespace: the sandbox's
// processes (root of their own user namespace, uid 65534 outside) have no capability over them
// and are not their owner's root, so they can change nothing of them (net.* sysctls, interfaces,
// routes); with seccomp allowing AF_UNIX sockets only, a run's sockets are the only state it
// leaves there, and a namespace that still holds one is not used (the init checks: init_main.cc).
// Hence only for a root caller (a non-root caller's runs make their own namespace, as before).
//
// A namespace is lent as a NetNamespaceLease, which holds it for exactly one init (warm or
// cold); the lease goes back to the pool when destroyed, which its holder does only after that
// init and so the run's PID namespace are gone (reaped). Thread safety: all methods may be
// called from any thread.
#ifndef LOCKSTEP_SANDBOX_NET_NAMESPACE_POOL_H_
#define LOCKSTEP_SANDBOX_NET_NAMESPACE_POOL_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

namespace lockstep::sandbox {

class NetNamespacePool;

// One network namespace (a descriptor of it), lent to one run.
class NetNamespaceLease {
 public:
  NetNamespaceLease() = default;
  NetNamespaceLease(NetNamespaceLease&& other) noexcept;
  NetNamespaceLease& operator=(NetNamespaceLease&& other) noexcept;
  NetNamespaceLease(const NetNamespaceLease&) = delete;
  NetNamespaceLease& operator=(const NetNamespaceLease&) = delete;
  // Gives the namespace back to its pool: only once no process of the run is left in it.
  ~NetNamespaceLease();

  // The namespace's descriptor (close-on-exec; the init is handed a copy), or -1 when empty.
  int fd() const { return fd_; }

 private:
  friend class NetNamespacePool;
  NetNamespaceLease(NetNamespacePool* pool, int fd) : pool_(pool), fd_(fd) {}
  NetNamespacePool* pool_ = nullptr;
  int fd_ = -1;
};

class NetNamespacePool {
 public:
  // A pool when this process is root (effective uid 0), the sandbox's processes run as another
  // uid (`outside_uid`) and the kernel lets this process make a network namespace (root without
  // CAP_SYS_ADMIN cannot); null otherwise (each run then makes its own, as a non-root caller's).
  static std::unique_ptr<NetNamespacePool> CreateIfRoot(unsigned outside_uid);

  // Closes the idle namespaces. Every lease must be gone first.
  ~NetNamespacePool();

  NetNamespacePool(const NetNamespacePool&) = delete;
  NetNamespacePool& operator=(const NetNamespacePool&) = delete;

  // An idle namespace, else a new one (made on a short-lived thread, so that no caller's thread
  // ever changes namespace). Internal error if the kernel refuses a new one.
  absl::StatusOr<NetNamespaceLease> Take();

 private:
  NetNamespacePool() = default;
  friend class NetNamespaceLease;
  void Return(int fd);

  std::mutex mu_;
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_NET_NAMESPACE_POOL_H_
