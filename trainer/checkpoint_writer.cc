#include "trainer/checkpoint_writer.h"

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

void CheckpointWriter::CopyInto(const TensorMap& from, TensorMap& into) {
  for (auto it = into.begin(); it != into.end();) {
    it = from.count(it->first) ? std::next(it) : into.erase(it);
  }
  for (const auto& [name, source] : from) {
    torch::Tensor& buffer = into[name];
    if (!buffer.defined() || !buffer.sizes().equals(source.sizes()) ||
        buffer.scalar_type() != source.scalar_type()) {
      buffer = torch::empty(source.sizes(), source.options().requires_grad(false));
    }
    const torch::Tensor from_tensor = source.detach();
    if (from_tensor.is_contiguous()) {
      std::memcpy(buffer.data_ptr(), from_tensor.data_ptr(), from_tensor.nbytes());
    } else {
      buffer.copy_(from_tensor);
    }
  }
}

absl::Status CheckpointWriter::WaitLocked(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [this] { return !pending_; });
  return std::exchange(unreturned_failure_, absl::OkStatus());
}

absl::StatusOr<CheckpointSubmitted> CheckpointWriter::Save(int64_t step,
                                                           const ModelConfig& model_config,
                                                           const TensorMap& weights,
                                                           const CheckpointPayload& payload) {
  const absl::Time start = absl::Now();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (absl::Status s = WaitLocked(lock); !s.ok()) return s;
  }
  // No write is in flight: the snapshot is ours until `pending_` is set.
  const absl::Time copy_start = absl::Now();
  step_ = step;
  model_config_ = model_config;
  CopyInto(weights, weights_);
  CopyInto(payload.optimizer, payload_.optimizer);
  CopyInto(payload.extra, payload_.extra);
  payload_.trainer_state = payload.trainer_state;
  const absl::Time end = absl::Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  changed_.notify_all();
  return CheckpointSubmitted{manager_.StepDir(step), Milliseconds(end - start),
                             Milliseconds(end - copy_start)};
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
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [this] { return pending_ || stopping_; });
      if (!pending_) return;  // stopping with nothing to write
    }
    const absl::Time start = absl::Now();
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
