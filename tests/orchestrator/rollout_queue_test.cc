// RolloutQueue with failed calls kept (a dead generator's prompts): a failed call waits for the
// loop instead of failing the queue, the loop's tend hook runs at once, a resubmitted prompt is
// counted in flight again and trains like any other; without KeepFailedCalls a failed call
// fails the queue.
#include "orchestrator/rollout_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace lockstep::orchestrator {
namespace {

std::shared_ptr<PromptInFlight> Prompt(int64_t index, int64_t generator) {
  auto prompt = std::make_shared<PromptInFlight>();
  prompt->index = index;
  prompt->generator = generator;
  return prompt;
}

std::vector<v1::GenerateResponse> Samples(int n) {
  return std::vector<v1::GenerateResponse>(n);
}

TEST(RolloutQueueTest, FailedCallWaitsForTheLoopAndIsResubmitted) {
  RolloutQueue queue(/*num_generators=*/2);
  queue.KeepFailedCalls();
  queue.Push(Prompt(0, 0));
  queue.Push(Prompt(1, 1));
  EXPECT_EQ(queue.MarkGenerated(0, absl::UnavailableError("generator0 died")), nullptr);
  queue.CallbackDone();
  ASSERT_NE(queue.MarkGenerated(1, Samples(2)), nullptr);
  queue.CallbackDone();
  queue.MarkScored(1, std::vector<rewards::ItemOutcome>(2));

  // The loop's tend sees the failed call at once and resubmits it to generator 1.
  int tended = 0;
  std::vector<std::shared_ptr<PromptInFlight>> failed_seen;
  auto tend = [&]() -> absl::Status {
    ++tended;
    for (auto& prompt : queue.TakeFailedCalls()) {
      failed_seen.push_back(prompt);
      EXPECT_EQ(prompt->call_error.code(), absl::StatusCode::kUnavailable);
      queue.Resubmit(prompt, /*g=*/1, /*incarnation=*/0);
      // The new call answers.
      EXPECT_NE(queue.MarkGenerated(prompt->index, Samples(2)), nullptr);
      queue.CallbackDone();
      queue.MarkScored(prompt->index, std::vector<rewards::ItemOutcome>(2));
    }
    return absl::OkStatus();
  };
  QueueWait wait;
  absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> batch =
      queue.WaitForOldest(2, nullptr, &wait, tend);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ((*batch)[0]->index, 0);
  EXPECT_EQ((*batch)[0]->generator, 1);
  EXPECT_EQ((*batch)[0]->resubmissions, 1);
  EXPECT_EQ((*batch)[0]->samples.size(), 2u);
  EXPECT_EQ((*batch)[1]->resubmissions, 0);
  ASSERT_EQ(failed_seen.size(), 1u);
  EXPECT_GE(tended, 1);
  EXPECT_TRUE(queue.TakeFailedCalls().empty());
  EXPECT_TRUE(queue.WaitForCallbacks(absl::Seconds(1)));  // the resubmission's callback counted
}

TEST(RolloutQueueTest, TendErrorStopsTheWait) {
  RolloutQueue queue(1);
  queue.KeepFailedCalls();
  queue.Push(Prompt(0, 0));
  queue.MarkGenerated(0, absl::UnavailableError("gone"));
  queue.CallbackDone();
  absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> batch = queue.WaitForOldest(
      1, nullptr, nullptr, [] { return absl::ResourceExhaustedError("budget spent"); });
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RolloutQueueTest, WithoutKeepFailedCallsAFailedCallFailsTheQueue) {
  RolloutQueue queue(1);
  queue.Push(Prompt(0, 0));
  queue.MarkGenerated(0, absl::UnavailableError("generator0 died"));
  queue.CallbackDone();
  absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> batch =
      queue.WaitForOldest(1, nullptr, nullptr);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(queue.TakeFailedCalls().empty());
}

}  // namespace
}  // namespace lockstep::orchestrator
