#include "trainer/checkpoint_writer.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lockstep::trainer {
namespace {

double Milliseconds(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

CheckpointWriter::CheckpointWriter(CheckpointManager manager)
    : manager_(std::move(manager)), thread_([this] { WriterLoop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return !pending_; });
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

int64_t CheckpointWriter::AllocateLike(const TensorMap& from, TensorMap& into, Copies& copies) {
  for (auto it = into.begin(); it != into.end();) {
    it = from.count(it->first) ? std::next(it) : into.erase(it);
  }
  int64_t allocated = 0;
  for (const auto& [name, source] : from) {
    torch::Tensor& buffer = into[name];
    if (!buffer.defined() || !buffer.sizes().equals(source.sizes()) ||
        buffer.scalar_type() != source.scalar_type()) {
      buffer = torch::empty(source.sizes(), source.options().requires_grad(false));
      allocated += static_cast<int64_t>(buffer.nbytes());
    }
    copies.emplace_back(source, buffer);
  }
  return allocated;
}

int64_t CheckpointWriter::PairWithBuffers(const TensorMap& weights,
                                          const CheckpointPayload& payload) {
  copies_.clear();
  return AllocateLike(weights, weights_, copies_) +
         AllocateLike(payload.optimizer, payload_.optimizer, copies_) +
         AllocateLike(payload.extra, payload_.extra, copies_);
}

void CheckpointWriter::CopySources() {
  for (const auto& [source, buffer] : copies_) {
    // No detach() for the memcpy: a new tensor per entry cost about as much as copying a
    // small model's state.
    if (source.is_contiguous()) {
      std::memcpy(buffer.data_ptr(), source.data_ptr(), source.nbytes());
    } else {
      torch::NoGradGuard no_grad;
      buffer.copy_(source);
    }
  }
}

void CheckpointWriter::TouchSnapshot() {
  for (TensorMap* buffers : {&weights_, &payload_.optimizer, &payload_.extra}) {
    for (auto& [name, buffer] : *buffers) {
      if (buffer.nbytes() > 0) std::memset(buffer.data_ptr(), 0, buffer.nbytes());
    }
  }
}

void CheckpointWriter::Reserve(const TensorMap& weights, const CheckpointPayload& payload) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return !pending_; });  // a failure stays for the next Save
  }
  // No write is in flight: the snapshot is ours until `pending_` is set.
  PairWithBuffers(weights, payload);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
    touch_only_ = true;
  }
  changed_.notify_all();
}

absl::Status CheckpointWriter::WaitLocked(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [this] { return !pending_; });
  return std::exchange(unreturned_failure_, absl::OkStatus());
}

void CheckpointWriter::StartWrite(int64_t step, const ModelConfig& model_config) {
  step_ = step;
  model_config_ = model_config;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  changed_.notify_all();
}

absl::StatusOr<CheckpointSubmitted> CheckpointWriter::Save(int64_t step,
                                                           const ModelConfig& model_config,
                                                           const TensorMap& weights,
                                                           const CheckpointPayload& payload) {
  const absl::Time start = absl::Now();
  if (absl::Status s = Wait(); !s.ok()) return s;
  // No write is in flight: the snapshot is ours until StartWrite.
  const absl::Time copy_start = absl::Now();
  const int64_t allocated = PairWithBuffers(weights, payload);
  CopySources();
  payload_.trainer_state = payload.trainer_state;
  render_trainer_state_ = nullptr;
  const absl::Time end = absl::Now();
  StartWrite(step, model_config);
  return CheckpointSubmitted{manager_.StepDir(step), Milliseconds(end - start),
                             Milliseconds(end - copy_start), allocated};
}

absl::StatusOr<CheckpointSubmitted> CheckpointWriter::SaveReserved(
    int64_t step, const ModelConfig& model_config, TrainerStateRenderer render_trainer_state) {
  const absl::Time start = absl::Now();
  if (absl::Status s = Wait(); !s.ok()) return s;
  if (copies_.empty()) {
    return absl::FailedPreconditionError("SaveReserved: no Reserve or Save named the state");
  }
  // No write is in flight: the snapshot is ours until StartWrite.
  const absl::Time copy_start = absl::Now();
  CopySources();
  render_trainer_state_ = std::move(render_trainer_state);
  const absl::Time end = absl::Now();
  StartWrite(step, model_config);
  return CheckpointSubmitted{manager_.StepDir(step), Milliseconds(end - start),
                             Milliseconds(end - copy_start), /*allocated_bytes=*/0};
}

absl::Status CheckpointWriter::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  return WaitLocked(lock);
}

std::optional<CheckpointWritten> CheckpointWriter::TakeFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(finished_, std::nullopt);
}

void CheckpointWriter::WriterLoop() {
#ifdef SCHED_BATCH
  // Best effort: a save wakes this thread after a long sleep, and the scheduler would let it
  // preempt the trainer at once (wakeup preemption), which then waits out the writer's slice
  // inside its blocking time. SCHED_BATCH gives up that preference and nothing else.
  sched_param param{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
#endif
  while (true) {
    bool touch_only = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [this] { return pending_ || stopping_; });
      if (!pending_) return;  // stopping with nothing to write
      touch_only = touch_only_;
    }
    if (touch_only) {
      TouchSnapshot();
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_ = touch_only_ = false;
      }
      changed_.notify_all();
      continue;
    }
    const absl::Time start = absl::Now();
    if (render_trainer_state_) payload_.trainer_state = render_trainer_state_();
    absl::StatusOr<std::filesystem::path> dir =
        manager_.Save(step_, model_config_, weights_, payload_);
    CheckpointWritten written{step_, Milliseconds(absl::Now() - start), dir.status()};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!dir.ok()) unreturned_failure_ = dir.status();
      finished_ = std::move(written);
      pending_ = false;
    }
    changed_.notify_all();
  }
}

}  // namespace lockstep::trainer
