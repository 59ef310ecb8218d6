// The service's concurrency limit on its own: at most num_workers tasks run, at most max_queued
// wait, the rest are refused at once; every accepted task runs exactly once, destruction
// included.
#include "sandbox/bounded_work_queue.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep::sandbox {
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

TEST(BoundedWorkQueueTest, RunsAtMostWorkersAndQueuesAtMostMaxQueued) {
  Gate gate;
  std::atomic<int> ran{0};
  {
    BoundedWorkQueue queue({.num_workers = 2, .max_queued = 3});
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

TEST(BoundedWorkQueueTest, ZeroQueueRunsNowOrRefuses) {
  Gate gate;
  BoundedWorkQueue queue({.num_workers = 1, .max_queued = 0});
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

TEST(BoundedWorkQueueTest, BadOptionsNameTheField) {
  EXPECT_NE(BoundedWorkQueue::Validate({.num_workers = 0}).message().find("max_concurrency"),
            absl::string_view::npos);
  EXPECT_NE(BoundedWorkQueue::Validate({.num_workers = 1, .max_queued = -1})
                .message()
                .find("max_queue"),
            absl::string_view::npos);
  EXPECT_TRUE(BoundedWorkQueue::Validate({.num_workers = 1, .max_queued = 0}).ok());
}

}  // namespace
}  // namespace lockstep::sandbox
