// A fixed pool of worker threads behind a queue of bounded length: the sandbox service's
// concurrency limit. TrySubmit either hands the task to a worker (now, or once one is free) or,
// when `max_queued` tasks already wait, refuses it at once, so the backlog never grows past
// num_workers running + max_queued waiting.
//
//   BoundedWorkQueue queue({.num_workers = 2, .max_queued = 4});
//   if (!queue.TrySubmit([] { ... })) { /* full: answer RESOURCE_EXHAUSTED */ }
//
// Thread safety: every method may be called from any thread.
#ifndef LOCKSTEP_SANDBOX_BOUNDED_WORK_QUEUE_H_
#define LOCKSTEP_SANDBOX_BOUNDED_WORK_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace lockstep::sandbox {

struct BoundedWorkQueueOptions {
  int num_workers = 1;  // tasks running at once; >= 1
  int max_queued = 0;   // tasks waiting for a worker at most; >= 0 (0: refuse when all are busy)
};

struct WorkQueueStats {
  int64_t running = 0;    // tasks running now
  int64_t queued = 0;     // accepted tasks waiting for a worker now (beyond one per worker)
  int64_t accepted = 0;   // TrySubmit calls that returned true
  int64_t rejected = 0;   // TrySubmit calls that returned false (queue full or stopping)
  int64_t completed = 0;  // tasks that returned
  int64_t max_queued_seen = 0;
};

class BoundedWorkQueue {
 public:
  // InvalidArgument naming the field for a bad option.
  static absl::Status Validate(const BoundedWorkQueueOptions& options);

  // Starts the workers. The options must be valid (CHECK).
  explicit BoundedWorkQueue(BoundedWorkQueueOptions options);

  // Runs every task already accepted (queued ones included), then joins the workers.
  ~BoundedWorkQueue();

  BoundedWorkQueue(const BoundedWorkQueue&) = delete;
  BoundedWorkQueue& operator=(const BoundedWorkQueue&) = delete;

  // True: `task` will run on a worker thread exactly once. False: refused (max_queued tasks
  // already wait, or the queue is being destroyed); `task` is dropped without running.
  bool TrySubmit(std::function<void()> task);

  WorkQueueStats stats() const;
  const BoundedWorkQueueOptions& options() const { return options_; }

 private:
  void WorkerLoop();
  void UpdateQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BoundedWorkQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_ready_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  WorkQueueStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_BOUNDED_WORK_QUEUE_H_
