#include "sandbox/net_namespace_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::sandbox {
namespace {

// Idle namespaces kept beyond this many are closed (each holds a loopback device and tables).
constexpr size_t kMaxIdle = 64;

// A new network namespace of this process's (root's) user namespace, made on a thread of its own
// that ends right after: unshare(CLONE_NEWNET) moves only the calling thread.
absl::StatusOr<int> NewNetNamespace() {
  int fd = -1;
  int error = 0;
  std::thread maker([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      error = errno;
      return;
    }
    fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) error = errno;
  });
  maker.join();
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("new network namespace: ", strerror(error)));
  }
  return fd;
}

}  // namespace

NetNamespaceLease::NetNamespaceLease(NetNamespaceLease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), fd_(std::exchange(other.fd_, -1)) {}

NetNamespaceLease& NetNamespaceLease::operator=(NetNamespaceLease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) pool_->Return(fd_);
    pool_ = std::exchange(other.pool_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

NetNamespaceLease::~NetNamespaceLease() {
  if (fd_ >= 0) pool_->Return(fd_);
}

std::unique_ptr<NetNamespacePool> NetNamespacePool::CreateIfRoot(unsigned outside_uid) {
  if (geteuid() != 0 || outside_uid == 0) return nullptr;
  // Root without CAP_SYS_ADMIN (some containers) cannot make one: no pool then.
  absl::StatusOr<int> first = NewNetNamespace();
  if (!first.ok()) return nullptr;
  auto pool = std::unique_ptr<NetNamespacePool>(new NetNamespacePool());
  std::lock_guard<std::mutex> lock(pool->mu_);
  pool->idle_.push_back(*first);
  return pool;
}

NetNamespacePool::~NetNamespacePool() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : idle_) close(fd);
}

absl::StatusOr<NetNamespaceLease> NetNamespacePool::Take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      return NetNamespaceLease(this, fd);
    }
  }
  absl::StatusOr<int> fd = NewNetNamespace();
  if (!fd.ok()) return fd.status();
  return NetNamespaceLease(this, *fd);
}

void NetNamespacePool::Return(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() >= kMaxIdle) {
    close(fd);
    return;
  }
  idle_.push_back(fd);
}

}  // namespace lockstep::sandbox
