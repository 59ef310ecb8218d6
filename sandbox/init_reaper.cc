#include "sandbox/init_reaper.h"

#include <errno.h>
#include <sys/wait.h>

#include <utility>

namespace lockstep::sandbox {

InitReaper::InitReaper() { thread_ = std::thread([this] { Loop(); }); }

InitReaper::~InitReaper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();  // it drains the queue first
}

void InitReaper::Add(pid_t init, std::optional<RunCgroup> cgroup, NetNamespaceLease net_namespace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({init, std::move(cgroup), std::move(net_namespace)});
  }
  wake_.notify_one();
}

size_t InitReaper::num_pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

void InitReaper::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and nothing left
    const pid_t init = pending_.front().init;
    lock.unlock();
    while (waitpid(init, nullptr, 0) < 0 && errno == EINTR) {
    }
    lock.lock();
    {
      // Popped only now, so num_pending counts an init until it is reaped; its cgroups and
      // lease are released (at the end of this scope) outside the lock.
      Pending done = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
    }
    lock.lock();
  }
}

}  // namespace lockstep::sandbox
