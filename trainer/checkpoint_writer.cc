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

int64_t CheckpointWriter::AllocateLike(const TensorMap& from, TensorMap& into) {
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
  }
  return allocated;
}

int64_t CheckpointWriter::CopyInto(const TensorMap& from, TensorMap& into) {
  const int64_t allocated = AllocateLike(from, into);
  for (const auto& [name, source] : from) {
    torch::Tensor& buffer = into.at(name);
    // No detach() for the memcpy: a new tensor per entry cost about as much as copying a
    // small model's state.
    if (source.is_contiguous()) {
      std::memcpy(buffer.data_ptr(), source.data_ptr(), source.nbytes());
    } else {
      torch::NoGradGuard no_grad;
      buffer.copy_(source);
    }
  }
  return allocated;
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
  AllocateLike(weights, weights_);
  AllocateLike(payload.optimizer, payload_.optimizer);
  AllocateLike(payload.extra, payload_.extra);
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
  const int64_t allocated = CopyInto(weights, weights_) +
                            CopyInto(payload.optimizer, payload_.optimizer) +
                            CopyInto(payload.extra, payload_.extra);
  payload_.trainer_state = payload.trainer_state;
  const absl::Time end = absl::Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  changed_.notify_all();
  return CheckpointSubmitted{manager_.StepDir(step), Milliseconds(end - start),
                             Milliseconds(end - copy_start), allocated};
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
