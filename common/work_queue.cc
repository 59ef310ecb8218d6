#include "common/work_queue.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace lockstep {

WorkQueue::WorkQueue(WorkQueueOptions options) : options_(options) {
  if (options_.num_workers < 1 || options_.max_queued < 0) std::abort();
  workers_.reserve(options_.num_workers);
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

WorkQueue::~WorkQueue() {
  std::deque<Task> abandoned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (options_.at_destruction == WorkQueueOptions::AtDestruction::kCancelQueued) {
      abandoned.swap(queue_);
      stats_.cancelled += static_cast<int64_t>(abandoned.size());
      UpdateQueued();
    }
  }
  work_ready_.notify_all();
  for (Task& task : abandoned) {
    if (task.cancel) task.cancel();
  }
  for (std::thread& worker : workers_) worker.join();
}

// Accepted while the tasks running plus those waiting stay within num_workers + max_queued:
// with a free worker the task starts at once; otherwise it waits, up to max_queued of them.
bool WorkQueue::TrySubmit(std::function<void()> run, std::function<void()> cancel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t outstanding = static_cast<int64_t>(queue_.size()) + stats_.running;
    if (stopping_ || outstanding >= options_.num_workers + options_.max_queued) {
      ++stats_.rejected;
      return false;
    }
    queue_.push_back(Task{std::move(run), std::move(cancel)});
    ++stats_.accepted;
    UpdateQueued();
  }
  work_ready_.notify_one();
  return true;
}

// Counted as waiting: the accepted tasks beyond one per worker. A task in queue_ that a free
// worker is about to take is not waiting.
void WorkQueue::UpdateQueued() {
  const int64_t outstanding = static_cast<int64_t>(queue_.size()) + stats_.running;
  stats_.queued = std::max<int64_t>(0, outstanding - options_.num_workers);
  stats_.max_queued_seen = std::max(stats_.max_queued_seen, stats_.queued);
}

WorkQueueStats WorkQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void WorkQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Task task = std::move(queue_.front());
    queue_.pop_front();
    ++stats_.running;
    lock.unlock();
    task.run();
    task = Task{};  // the task's captures go before the next one starts
    lock.lock();
    --stats_.running;
    ++stats_.completed;
    UpdateQueued();
  }
}

}  // namespace lockstep
