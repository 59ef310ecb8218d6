#include "generator/scheduler.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace lockstep::generator {

absl::Status SchedulerOptions::Validate() const {
  if (max_num_batched_tokens <= 0) {
    return absl::InvalidArgumentError("max_num_batched_tokens must be > 0");
  }
  if (max_num_seqs <= 0) return absl::InvalidArgumentError("max_num_seqs must be > 0");
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* block_manager)
    : options_(options), block_manager_(block_manager) {}

void Scheduler::Add(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::AddRunning(Sequence* seq) {
  seq->status = SequenceStatus::kRunning;
  running_.push_back(seq);
}

ScheduledStep Scheduler::Schedule() {
  ScheduledStep step;
  int64_t budget = options_.max_num_batched_tokens;
  std::deque<Sequence*> scheduled;  // running sequences that feed tokens this step
  std::deque<Sequence*> idle;       // running sequences left out (budget or sequence cap)

  // Running sequences first, in order; preemption victims come from the back of those not yet
  // considered, then from the idle ones, and last the sequence itself.
  while (!running_.empty()) {
    Sequence* seq = running_.front();
    running_.pop_front();
    const int64_t num_new = std::min(seq->num_tokens() - seq->num_computed_tokens, budget);
    if (num_new <= 0 || static_cast<int64_t>(scheduled.size()) >= options_.max_num_seqs) {
      idle.push_back(seq);
      continue;
    }
    const int64_t target = seq->num_computed_tokens + num_new;
    while (!block_manager_->CanAllocate(*seq, target)) {
      Sequence* victim = nullptr;
      if (!running_.empty()) {
        victim = running_.back();
        running_.pop_back();
      } else if (!idle.empty()) {
        victim = idle.back();
        idle.pop_back();
      } else {
        victim = seq;
      }
      Preempt(victim);
      ++step.num_preempted;
      if (victim == seq) break;
    }
    if (seq->status == SequenceStatus::kWaiting) break;  // preempted itself; running_ is empty
    block_manager_->Allocate(*seq, target, &step.block_copies);
    step.sequences.push_back({seq, num_new});
    scheduled.push_back(seq);
    budget -= num_new;
  }
  // Left-out sequences go first next step so that none starves behind the budget.
  running_ = std::move(idle);
  running_.insert(running_.end(), scheduled.begin(), scheduled.end());

  // Admit waiting sequences, first come first served, unless this step had to preempt.
  while (step.num_preempted == 0 && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(step.sequences.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const int64_t num_new = std::min(seq->num_tokens() - seq->num_computed_tokens, budget);
    const int64_t target = seq->num_computed_tokens + num_new;
    if (!block_manager_->CanAllocate(*seq, target)) break;
    waiting_.pop_front();
    block_manager_->Allocate(*seq, target, &step.block_copies);
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    step.sequences.push_back({seq, num_new});
    budget -= num_new;
  }
  return step;
}

void Scheduler::Commit(const ScheduledStep& step) {
  for (const ScheduledSequence& s : step.sequences) s.seq->num_computed_tokens += s.num_new_tokens;
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  block_manager_->Deallocate(*seq);
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
  for (auto* queue : {&waiting_, &running_}) {
    queue->erase(std::remove(queue->begin(), queue->end(), seq), queue->end());
  }
}

void Scheduler::Preempt(Sequence* seq) {
  block_manager_->Deallocate(*seq);  // recompute: prompt + generated re-prefill later
  seq->status = SequenceStatus::kWaiting;
  ++seq->num_preemptions;
  waiting_.push_front(seq);
}

}  // namespace lockstep::generator
