#include "orchestrator/rollout_queue.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::orchestrator {

RolloutQueue::RolloutQueue(int64_t num_generators)
    : calls_in_flight_(num_generators, 0),
      idle_(num_generators, absl::ZeroDuration()),
      idle_since_(num_generators, absl::Now()),
      first_samples_incarnation_(num_generators, -1),
      first_samples_time_(num_generators, absl::InfinitePast()) {}

void RolloutQueue::Push(std::shared_ptr<PromptInFlight> prompt) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t g = prompt->generator;
  if (calls_in_flight_[g]++ == 0) idle_[g] += absl::Now() - idle_since_[g];
  ++callbacks_pending_;
  queue_.push_back(std::move(prompt));
}

void RolloutQueue::CallbackDone() {
  std::lock_guard<std::mutex> lock(mu_);
  --callbacks_pending_;
  changed_.notify_all();
}

bool RolloutQueue::WaitForCallbacks(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                             return callbacks_pending_ == 0;
                           });
}

std::optional<absl::Time> RolloutQueue::FirstSamples(int64_t g, int64_t incarnation) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_samples_incarnation_[g] < incarnation) return std::nullopt;
  return first_samples_time_[g];
}

int64_t RolloutQueue::calls_in_flight(int64_t g) const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_in_flight_[g];
}

absl::Duration RolloutQueue::TakeGeneratorIdle(int64_t g) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (calls_in_flight_[g] == 0) {
    idle_[g] += now - idle_since_[g];
    idle_since_[g] = now;
  }
  const absl::Duration idle = idle_[g];
  idle_[g] = absl::ZeroDuration();
  return idle;
}

std::shared_ptr<PromptInFlight> RolloutQueue::Find(int64_t index) {
  for (const auto& prompt : queue_) {
    if (prompt->index == index) return prompt;
  }
  return nullptr;
}

std::shared_ptr<PromptInFlight> RolloutQueue::MarkGenerated(
    int64_t index, absl::StatusOr<std::vector<v1::GenerateResponse>> samples) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<PromptInFlight> prompt = Find(index);
  if (prompt == nullptr) return nullptr;  // the loop gave up on it
  prompt->generated = absl::Now();
  if (--calls_in_flight_[prompt->generator] == 0) idle_since_[prompt->generator] = absl::Now();
  if (!samples.ok() && keep_failed_calls_) {
    prompt->call_failed = true;
    prompt->call_error = samples.status();
    changed_.notify_all();
    return nullptr;  // nothing to score
  }
  prompt->is_generated = true;
  if (!samples.ok()) {
    if (error_.ok()) error_ = samples.status();
  } else {
    prompt->samples = *std::move(samples);
    const int64_t g = prompt->generator;
    if (prompt->incarnation > first_samples_incarnation_[g]) {
      first_samples_incarnation_[g] = prompt->incarnation;
      first_samples_time_[g] = prompt->generated;
    }
  }
  changed_.notify_all();
  return prompt;
}

void RolloutQueue::MarkScored(int64_t index, std::vector<rewards::ItemOutcome> outcomes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<PromptInFlight> prompt = Find(index);
  if (prompt == nullptr) return;
  prompt->outcomes = std::move(outcomes);
  prompt->scored = absl::Now();
  prompt->is_scored = true;
  changed_.notify_all();
}

void RolloutQueue::Fail(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(status);
  changed_.notify_all();
}

void RolloutQueue::KeepFailedCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  keep_failed_calls_ = true;
}

std::vector<std::shared_ptr<PromptInFlight>> RolloutQueue::TakeFailedCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<PromptInFlight>> failed;
  for (const auto& prompt : queue_) {
    if (!prompt->call_failed) continue;
    prompt->call_failed = false;
    failed.push_back(prompt);
  }
  return failed;
}

void RolloutQueue::Resubmit(const std::shared_ptr<PromptInFlight>& prompt, int64_t g,
                            int64_t incarnation) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt->generator = g;
  prompt->incarnation = incarnation;
  prompt->call_error = absl::OkStatus();
  prompt->samples.clear();
  ++prompt->resubmissions;
  if (calls_in_flight_[g]++ == 0) idle_[g] += absl::Now() - idle_since_[g];
  ++callbacks_pending_;
}

absl::StatusOr<std::vector<std::shared_ptr<PromptInFlight>>> RolloutQueue::WaitForOldest(
    int64_t count, const std::function<bool()>& stop, QueueWait* wait,
    const std::function<absl::Status()>& tend) {
  std::unique_lock<std::mutex> lock(mu_);
  if (static_cast<int64_t>(queue_.size()) < count) {
    return absl::FailedPreconditionError(
        absl::StrCat("rollout queue holds ", queue_.size(), " prompts, ", count, " needed"));
  }
  absl::Time last = absl::Now();
  bool tended = false;  // tend runs once per wake-up
  while (true) {
    if (!error_.ok()) return error_;
    bool all_generated = true, all_scored = true;
    for (int64_t i = 0; i < count; ++i) {
      all_generated = all_generated && queue_[i]->is_generated;
      all_scored = all_scored && queue_[i]->is_scored;
    }
    const absl::Time now = absl::Now();
    if (wait != nullptr) (all_generated ? wait->reward : wait->generate) += now - last;
    last = now;
    if (all_scored) break;
    if (stop && stop()) return absl::CancelledError("stopped by a signal");
    if (tend && !tended) {
      lock.unlock();
      absl::Status status = tend();
      lock.lock();
      if (!status.ok()) return status;
      tended = true;
      continue;  // what tend did may complete the batch
    }
    tended = false;
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  std::vector<std::shared_ptr<PromptInFlight>> batch(queue_.begin(), queue_.begin() + count);
  queue_.erase(queue_.begin(), queue_.begin() + count);
  return batch;
}

int64_t RolloutQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t RolloutQueue::oldest_index() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() ? -1 : queue_.front()->index;
}

int64_t RolloutQueue::num_generating() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& prompt : queue_) n += prompt->is_generated ? 0 : 1;
  return n;
}

}  // namespace lockstep::orchestrator
