// The prompts in flight between admission and training, in admission order (FIFO).
//
// A prompt enters when the loop submits it to a generator; a gRPC thread marks it generated
// (its n samples, or an error); a reward-scorer thread marks it scored (one outcome per sample).
// The loop thread takes the oldest `count` prompts once all of them are scored. Training in
// admission order is what makes the staleness bound of staleness.h hold.
//
// With KeepFailedCalls, a failed generation call does not fail the queue: the prompt waits
// (call_failed) until the loop takes it (TakeFailedCalls) and either resubmits it (Resubmit:
// its generator died; at once, or once a generator is free to take it) or fails the queue with
// its error.
//
// Thread safety: every method is thread-safe. Callbacks of in-flight calls may keep the queue
// alive through a shared_ptr after the loop has finished with it.
#ifndef LOCKSTEP_ORCHESTRATOR_ROLLOUT_QUEUE_H_
#define LOCKSTEP_ORCHESTRATOR_ROLLOUT_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/example.h"
#include "proto/generator.pb.h"
#include "rewards/reward_scorer.h"

namespace lockstep::orchestrator {

struct PromptInFlight {
  int64_t index = 0;                 // prompt number since the RL loop started
  const Example* example = nullptr;  // owned by the dataset
  std::string prompt_text;
  std::vector<int64_t> prompt_ids;
  int64_t generator = 0;             // which generator serves it
  int64_t incarnation = 0;           // of that generator's process (GeneratorRecovery)
  int64_t resubmissions = 0;         // calls lost with a dead generator and made again
  absl::Status call_error;           // the last call's error, while call_failed
  bool call_failed = false;          // its call failed and it waits for a decision
  absl::Time submitted;
  absl::Time generated;              // when its last sample arrived
  absl::Time scored;
  std::vector<v1::GenerateResponse> samples;  // by sample index
  std::vector<rewards::ItemOutcome> outcomes; // one per sample, once scored
  bool is_generated = false;
  bool is_scored = false;
};

// What WaitForOldest found waiting, for the step-time split.
struct QueueWait {
  absl::Duration generate;  // waited while some prompt of the batch was not generated
  absl::Duration reward;    // waited while all were generated but some not scored
};

class RolloutQueue {
 public:
  explicit RolloutQueue(int64_t num_generators);

  // Adds a submitted prompt at the back.
  void Push(std::shared_ptr<PromptInFlight> prompt);

  // The generator's answer for prompt `index`. An error fails the queue (WaitForOldest returns
  // it). Returns the prompt so that the caller can start scoring it.
  std::shared_ptr<PromptInFlight> MarkGenerated(
      int64_t index, absl::StatusOr<std::vector<v1::GenerateResponse>> samples);
  void MarkScored(int64_t index, std::vector<rewards::ItemOutcome> outcomes);
  // Fails the queue: waiting callers return `status`.
  void Fail(absl::Status status);

  // From now on a failed generation call marks its prompt call_failed instead of failing the
  // queue.
  void KeepFailedCalls();
  // The prompts whose call failed since the last call (their call_failed is cleared).
  std::vector<std::shared_ptr<PromptInFlight>> TakeFailedCalls();
  // A queued prompt goes to generator `g` (process `incarnation`) again: counts a call in
  // flight and a callback, like Push.
  void Resubmit(const std::shared_ptr<PromptInFlight>& prompt, int64_t g, int64_t incarnation);

  // Blocks until the oldest `count` prompts are scored, removes and returns them. Returns the
  // queue's error if it failed, Cancelled once `stop` returns true (checked every 100 ms), and
  // FailedPrecondition if fewer than `count` prompts are queued. `tend`, when given, runs on
  // the calling thread (the queue unlocked) at every wake-up, at least every 100 ms and at
  // once after a failed call; its error is returned.
  absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> WaitForOldest(
      int64_t count, const std::function<bool()>& stop, QueueWait* wait,
      const std::function<absl::Status()>& tend = nullptr);

  // Prompts queued (submitted, not yet taken).
  int64_t size() const;
  // Index of the oldest queued prompt, or -1 when empty.
  int64_t oldest_index() const;
  // Calls submitted to a generator whose samples have not all arrived.
  int64_t num_generating() const;

  // When process `incarnation` of generator `g`, or a later one, first returned samples (a call
  // that went to it succeeded), or nullopt if none has yet. Only the latest incarnation that
  // returned samples is remembered.
  std::optional<absl::Time> FirstSamples(int64_t g, int64_t incarnation) const;
  // Calls of generator `g` in flight (0: it is idle).
  int64_t calls_in_flight(int64_t g) const;

  // Time generator `g` had no call in flight since the last TakeGeneratorIdle(g).
  absl::Duration TakeGeneratorIdle(int64_t g);

  // Generation callbacks: Push counts one; the callback calls CallbackDone as its last action.
  // WaitForCallbacks blocks until none is left or `timeout` passes; false on timeout. The loop
  // waits before it goes away, because callbacks use the loop's scorer and tokenizer.
  void CallbackDone();
  bool WaitForCallbacks(absl::Duration timeout);

 private:
  std::shared_ptr<PromptInFlight> Find(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<PromptInFlight>> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // Per generator: calls in flight, idle time accumulated, and when it last became idle.
  std::vector<int64_t> calls_in_flight_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> idle_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> idle_since_ ABSL_GUARDED_BY(mu_);
  // Per generator: the latest incarnation that returned samples (-1: none), and when it first did.
  std::vector<int64_t> first_samples_incarnation_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> first_samples_time_ ABSL_GUARDED_BY(mu_);
  int64_t callbacks_pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool keep_failed_calls_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_ROLLOUT_QUEUE_H_
