// A fixed pool of worker threads behind a queue of bounded length: the one way lockstep runs
// work off the caller's thread (the sandbox service's concurrency limit, in-process reward
// scoring, environment episodes, the generator's weight-sync calls).
//
// TrySubmit either hands the task to a worker (now, or once one is free) or, when `max_queued`
// tasks already wait, refuses it at once, so the backlog never grows past num_workers running +
// max_queued waiting. At destruction the tasks still waiting either run (kRunQueued) or get their
// `cancel` callback instead (kCancelQueued); either way each accepted task is settled exactly
// once, and the running ones finish before the workers are joined.
//
//   WorkQueue queue({.num_workers = 2, .max_queued = 4});
//   if (!queue.TrySubmit([] { ... })) { /* full: answer RESOURCE_EXHAUSTED */ }
//
// Thread safety: every method may be called from any thread, the tasks included (a task may
// submit more work).
#ifndef LOCKSTEP_COMMON_WORK_QUEUE_H_
#define LOCKSTEP_COMMON_WORK_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace lockstep {

struct WorkQueueOptions {
  // The backlog of a queue whose producer is bounded elsewhere (the orchestrator's admission
  // control bounds the rollouts in flight, and so the reward batches and episodes queued).
  static constexpr int64_t kBoundedByCaller = std::numeric_limits<int64_t>::max() / 2;
  enum class AtDestruction { kRunQueued, kCancelQueued };

  int num_workers = 1;    // tasks running at once; >= 1
  int64_t max_queued = 0;  // tasks waiting for a worker at most; >= 0 (0: refuse when all busy)
  AtDestruction at_destruction = AtDestruction::kRunQueued;
};

struct WorkQueueStats {
  int64_t running = 0;    // tasks running now
  int64_t queued = 0;     // accepted tasks waiting for a worker now (beyond one per worker)
  int64_t accepted = 0;   // TrySubmit calls that returned true
  int64_t rejected = 0;   // TrySubmit calls that returned false (queue full or stopping)
  int64_t completed = 0;  // tasks that ran and returned
  int64_t cancelled = 0;  // waiting tasks settled by `cancel` at destruction (kCancelQueued)
  int64_t max_queued_seen = 0;
};

class WorkQueue {
 public:
  // Starts the workers. Bad options (num_workers < 1, max_queued < 0) are a programmer error
  // (abort): callers validate their own config fields first, with their own names.
  explicit WorkQueue(WorkQueueOptions options);

  // Settles every accepted task (see AtDestruction), then joins the workers.
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // True: `run` will run on a worker thread exactly once, or, with kCancelQueued, `cancel` (if
  // given) runs instead when the queue is destroyed before a worker took the task. False:
  // refused (max_queued tasks already wait, or the queue is being destroyed); nothing runs.
  bool TrySubmit(std::function<void()> run, std::function<void()> cancel = nullptr);

  WorkQueueStats stats() const;
  const WorkQueueOptions& options() const { return options_; }

 private:
  struct Task {
    std::function<void()> run;
    std::function<void()> cancel;
  };

  void WorkerLoop();
  void UpdateQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkQueueOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_ready_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  WorkQueueStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_WORK_QUEUE_H_
