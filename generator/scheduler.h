// Continuous batching: decides, every engine step, which sequences run and how many of their
// tokens enter the KV cache.
//
// Each step has a token budget (max_num_batched_tokens) and a sequence cap (max_num_seqs).
// Running sequences go first, in order: a decoding sequence feeds its one new token, a sequence
// still prefilling feeds the next chunk of prompt (+ generated, after a preemption) that fits the
// remaining budget. Then waiting sequences are admitted in arrival order, each with its first
// chunk. Running sequences left out of a step for lack of budget go first in the next one.
// When the block pool cannot hold a running sequence's next tokens, the running sequence at the
// back of the queue (not yet considered this step; else a left-out one; else the sequence
// itself) is preempted by recompute: its blocks are freed and it goes back to the front of the
// waiting queue with its generated tokens kept; on readmission it re-prefills prompt + generated
// (in batch-invariant mode with the same bits) and continues. No waiting sequence is admitted in
// a step that preempted.
//
// Thread safety: none; used by the engine thread only.
#ifndef LOCKSTEP_GENERATOR_SCHEDULER_H_
#define LOCKSTEP_GENERATOR_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "generator/block_manager.h"
#include "generator/sequence.h"

namespace lockstep::generator {

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 512;  // tokens fed to the model per step
  int64_t max_num_seqs = 64;             // sequences per step

  absl::Status Validate() const;
};

// One sequence's part of a step: tokens [num_computed_tokens, + num_new_tokens) enter the cache.
struct ScheduledSequence {
  Sequence* seq = nullptr;
  int64_t num_new_tokens = 0;
  // True iff this chunk reaches the end of the sequence's tokens: the step samples its next one.
  bool samples() const { return seq->num_computed_tokens + num_new_tokens == seq->num_tokens(); }
};

struct ScheduledStep {
  std::vector<ScheduledSequence> sequences;
  std::vector<BlockCopy> block_copies;  // apply before the forward
  int64_t num_preempted = 0;
  bool empty() const { return sequences.empty(); }
};

class Scheduler {
 public:
  // `block_manager` is not owned and must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, BlockManager* block_manager);

  // Takes a sequence (not owned; must stay alive until it leaves the scheduler) into the
  // waiting queue.
  void Add(Sequence* seq);
  // Adds an already-cached sequence (a fork sharing its parent's blocks) to the running set.
  void AddRunning(Sequence* seq);

  ScheduledStep Schedule();

  // After the step's forward: advances num_computed_tokens of every scheduled sequence.
  void Commit(const ScheduledStep& step);

  // Frees seq's blocks and removes it from the scheduler; marks it finished with `reason`.
  void Finish(Sequence* seq, FinishReason reason);

  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }

 private:
  void Preempt(Sequence* seq);

  SchedulerOptions options_;
  BlockManager* block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
};

}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_SCHEDULER_H_
