#include "sandbox/warm_init_pool.h"

#include <chrono>
#include <utility>

namespace lockstep::sandbox {

WarmInitPool::WarmInitPool(std::string init_path, CgroupSupport cgroup, int num_idle,
                           LaunchSpec root, NetNamespacePool* net_namespaces)
    : init_path_(std::move(init_path)),
      cgroup_(std::move(cgroup)),
      root_(std::move(root)),
      num_idle_(static_cast<size_t>(num_idle < 1 ? 1 : num_idle)),
      net_namespaces_(net_namespaces) {
  spawner_ = std::thread([this] { SpawnerLoop(); });
}

WarmInitPool::~WarmInitPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  spawner_.join();  // it ends the idle inits first
}

std::optional<PooledInit> WarmInitPool::Take() {
  std::optional<PooledInit> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.empty()) return std::nullopt;
    taken.emplace(std::move(idle_.front()));
    idle_.pop_front();
  }
  ++num_taken_;
  wake_.notify_one();
  return taken;
}

void WarmInitPool::SpawnerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || idle_.size() < num_idle_; });
    if (stopping_) {
      // Ended from this thread, their PR_SET_PDEATHSIG parent, while it lives: each init reaps
      // its namespace init before it exits (killed by the thread's end instead, it would leave
      // that one to the machine's init, holding its cgroups).
      std::deque<PooledInit> idle = std::move(idle_);
      lock.unlock();
      for (PooledInit& pooled : idle) DiscardWarmInit(&pooled.init);  // before its cgroup goes
      return;
    }
    lock.unlock();
    PooledInit pooled;
    bool ok = true;
    std::vector<std::string> procs;
    if (cgroup_.kind != CgroupSupport::Kind::kNone) {
      absl::StatusOr<RunCgroup> created = RunCgroup::Create(cgroup_);
      ok = created.ok();
      if (ok) {
        procs = created->procs_files();
        pooled.cgroup.emplace(*std::move(created));
      }
    }
    if (ok && net_namespaces_ != nullptr) {
      absl::StatusOr<NetNamespaceLease> lease = net_namespaces_->Take();
      ok = lease.ok();
      if (ok) pooled.net_namespace = *std::move(lease);
    }
    if (ok) {
      absl::StatusOr<WarmInit> warm =
          SpawnWarmInit(init_path_, procs, root_, pooled.net_namespace.fd());
      ok = warm.ok();
      if (ok) pooled.init = *warm;
    }
    lock.lock();
    if (ok) {
      idle_.push_back(std::move(pooled));
    } else {
      // Runs start cold meanwhile; try again later rather than spin.
      wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; });
    }
  }
}

}  // namespace lockstep::sandbox
