#include "sandbox/bounded_work_queue.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::sandbox {

absl::Status BoundedWorkQueue::Validate(const BoundedWorkQueueOptions& options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrency must be >= 1, got ", options.num_workers));
  }
  if (options.max_queued < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue must be >= 0, got ", options.max_queued));
  }
  return absl::OkStatus();
}

BoundedWorkQueue::BoundedWorkQueue(BoundedWorkQueueOptions options) : options_(options) {
  if (!Validate(options_).ok()) std::abort();  // a programmer error: callers validate first
  workers_.reserve(options_.num_workers);
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

BoundedWorkQueue::~BoundedWorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

// Accepted while the tasks running plus those waiting stay within num_workers + max_queued:
// with a free worker the task starts at once; otherwise it waits, up to max_queued of them.
bool BoundedWorkQueue::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t outstanding = static_cast<int64_t>(queue_.size()) + stats_.running;
    if (stopping_ || outstanding >= options_.num_workers + options_.max_queued) {
      ++stats_.rejected;
      return false;
    }
    queue_.push_back(std::move(task));
    ++stats_.accepted;
    UpdateQueued();
  }
  work_ready_.notify_one();
  return true;
}

// Counted as waiting: the accepted tasks beyond one per worker. A task in queue_ that a free
// worker is about to take is not waiting.
void BoundedWorkQueue::UpdateQueued() {
  const int64_t outstanding = static_cast<int64_t>(queue_.size()) + stats_.running;
  stats_.queued = std::max<int64_t>(0, outstanding - options_.num_workers);
  stats_.max_queued_seen = std::max(stats_.max_queued_seen, stats_.queued);
}

WorkQueueStats BoundedWorkQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void BoundedWorkQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++stats_.running;
    lock.unlock();
    task();
    lock.lock();
    --stats_.running;
    ++stats_.completed;
    UpdateQueued();
  }
}

}  // namespace lockstep::sandbox
