// common/work_queue: at most num_workers tasks run, at most max_queued wait, the rest are refused
// at once; every accepted task is settled exactly once at destruction (run, or cancelled).
#include "common/work_queue.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Tasks that block until released, so the test controls what is running.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  void AwaitWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

TEST(WorkQueueTest, RunsAtMostWorkersAndQueuesAtMostMaxQueued) {
  Gate gate;
  std::atomic<int> ran{0};
  {
    WorkQueue queue({.num_workers = 2, .max_queued = 3});
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(queue.TrySubmit([&] { gate.Wait(); ++ran; })) << i;
    }
    gate.AwaitWaiting(2);
    EXPECT_FALSE(queue.TrySubmit([&] { ++ran; })) << "2 running + 3 queued is the limit";
    WorkQueueStats stats = queue.stats();
    EXPECT_EQ(stats.running, 2);
    EXPECT_EQ(stats.queued, 3);
    EXPECT_EQ(stats.accepted, 5);
    EXPECT_EQ(stats.rejected, 1);
    gate.Open();
  }  // the destructor runs what was accepted
  EXPECT_EQ(ran.load(), 5);
}

TEST(WorkQueueTest, ZeroQueueRunsNowOrRefuses) {
  Gate gate;
  WorkQueue queue({.num_workers = 1, .max_queued = 0});
  ASSERT_TRUE(queue.TrySubmit([&] { gate.Wait(); }));
  gate.AwaitWaiting(1);
  EXPECT_FALSE(queue.TrySubmit([] {}));
  gate.Open();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (queue.stats().completed < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> second{false};
  EXPECT_TRUE(queue.TrySubmit([&] { second = true; })) << "a free worker takes the next task";
  while (!second && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(second.load());
}

// kCancelQueued: the running task finishes, the waiting ones get `cancel` instead of `run`.
TEST(WorkQueueTest, CancelQueuedSettlesWaitingTasksWithTheirCancel) {
  Gate gate;
  std::atomic<int> ran{0};
  std::atomic<int> cancelled{0};
  {
    WorkQueue queue({.num_workers = 1,
                     .max_queued = WorkQueueOptions::kBoundedByCaller,
                     .at_destruction = WorkQueueOptions::AtDestruction::kCancelQueued});
    ASSERT_TRUE(queue.TrySubmit([&] { gate.Wait(); ++ran; }, [&] { ++cancelled; }));
    gate.AwaitWaiting(1);
    // The cancels run in the destructor, after it took the waiting tasks and before it joins the
    // worker: the first one releases the running task, so none of the waiting ones can start.
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(queue.TrySubmit([&] { ++ran; }, [&] {
        ++cancelled;
        gate.Open();
      }));
    }
  }
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(cancelled.load(), 4);
}

// A task may submit more work; it runs before the workers are joined.
TEST(WorkQueueTest, TasksMaySubmitMoreWork) {
  std::atomic<int> ran{0};
  {
    WorkQueue queue({.num_workers = 1, .max_queued = 8});
    ASSERT_TRUE(queue.TrySubmit([&] {
      ++ran;
      EXPECT_TRUE(queue.TrySubmit([&] { ++ran; }));
    }));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ran.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace lockstep
