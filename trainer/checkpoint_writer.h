// Checkpoints written in the background, so that training does not wait for the disk.
//
//   Reserve(state)    = allocate the snapshot buffers for the state's shapes and pair each with
//                       its tensor → the writer thread touches every page of them → (returns
//                       at once).
//   Save(step, state) = wait for the write (or reservation) in flight → copy the state into the
//                       snapshot buffers kept between saves (one memcpy per tensor) → hand the
//                       snapshot to the writer thread → return.
//   SaveReserved(step, render)
//                     = the same from the tensors paired by the last Reserve or Save, with no
//                       name lookup at all, and the trainer-state JSON rendered by `render` on
//                       the writer thread: blocking is the wait and the memcpy alone.
//   writer thread     = render the trainer state (SaveReserved) → CheckpointManager::Save of the
//                       snapshot (files in step_N.tmp/, fsync, manifest, rename, prune), timed.
//
// Why Reserve: the first write into fresh memory faults every page in, so a first Save that
// allocated its buffers blocked 4-7x a memcpy (bench/checkpoint). Reserved ahead (the trainer
// does it in Create), every Save, the first included, copies into warm memory.
// Why SaveReserved: a small model's state copies in about a millisecond, and Save's fixed cost
// beside it (the caller's JSON and name -> tensor maps, the lookups pairing them with the
// buffers: 0.3-1.2 ms) held a tiny model's trainer 1.4-3.2x a memcpy (bench_checkpoint).
//
// At most one write is in flight: a Save while one runs waits for it first (its wait is part of
// the blocking time), so a checkpoint directory never has two writers and writes land in step
// order. A crash during a write leaves step_N.tmp/ behind and every earlier step directory
// intact (CheckpointManager::Load skips the .tmp; the next Save of that step replaces it).
//
// Errors: a failed background write is returned by the next Save or Wait (once) and reported
// by TakeFinished.
//
// Thread safety: Reserve, Save, Wait and TakeFinished may be called from one thread at a time
// (the trainer's); the writer thread is internal. The destructor waits for the write in flight.
#ifndef LOCKSTEP_TRAINER_CHECKPOINT_WRITER_H_
#define LOCKSTEP_TRAINER_CHECKPOINT_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "trainer/checkpoint_manager.h"

namespace lockstep::trainer {

// What a Save returns at once: where the checkpoint will be and how long the caller waited.
struct CheckpointSubmitted {
  std::filesystem::path dir;  // the step directory, complete once the write finishes
  double blocking_ms = 0;     // waiting for an earlier write + copying the state
  double copy_ms = 0;         // the copy alone
  int64_t allocated_bytes = 0;  // snapshot buffers this Save had to allocate (0 once reserved)
};

// A background write that finished.
struct CheckpointWritten {
  int64_t step = 0;
  double write_ms = 0;  // from the snapshot's hand-off to the rename (and prune) done
  absl::Status status;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(CheckpointManager manager);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Allocates snapshot buffers shaped like `weights` and the payload's tensors (names, shapes,
  // dtypes; the values are not read), pairs each buffer with its tensor for SaveReserved, and
  // has the writer thread touch every page, so that the first Save copies into warm memory.
  // Returns at once; a Save waits for the touching as for a write in flight. Waits first for a
  // write in flight (its failure stays for the next Save). Memory: one snapshot of the state,
  // held until the writer is destroyed (as after a Save); the writer keeps a reference to every
  // tensor given (the caller's live state, whose values each SaveReserved copies).
  void Reserve(const TensorMap& weights, const CheckpointPayload& payload);

  // Renders trainer_state.json; runs on the writer thread.
  using TrainerStateRenderer = std::function<std::string()>;

  // Save of `step` from the tensors of the last Reserve (or Save), their values now: the
  // caller must not change those tensors' shapes, and may change their values as soon as this
  // returns. trainer_state.json is `render_trainer_state()`, called on the writer thread, so it
  // must own what it reads. Blocking: the wait for an earlier write and one memcpy per tensor.
  // FailedPrecondition before any Reserve or Save; the error of an earlier write that failed.
  absl::StatusOr<CheckpointSubmitted> SaveReserved(int64_t step, const ModelConfig& model_config,
                                                   TrainerStateRenderer render_trainer_state);

  // Snapshots `weights` and the payload's tensors (copies; the caller may change the originals
  // as soon as this returns) and starts writing the checkpoint of `step`. Returns the error of
  // an earlier write that failed (then nothing is started).
  absl::StatusOr<CheckpointSubmitted> Save(int64_t step, const ModelConfig& model_config,
                                           const TensorMap& weights,
                                           const CheckpointPayload& payload);

  // Waits for the write in flight; its status (OK when there was none, or an earlier failure
  // not yet returned).
  absl::Status Wait();

  // The write that finished since the last call, if one did (not yet taken).
  std::optional<CheckpointWritten> TakeFinished();

 private:
  // (source, snapshot buffer): what a save copies.
  using Copies = std::vector<std::pair<torch::Tensor, torch::Tensor>>;

  // Gives `into` one buffer per tensor of `from` (same name, shape and dtype), reusing the
  // buffers it has and dropping the names `from` lacks, and appends each (tensor, buffer) pair
  // to `copies`. Returns the bytes newly allocated.
  static int64_t AllocateLike(const TensorMap& from, TensorMap& into, Copies& copies);
  // Points copies_ at the tensors of `weights` and `payload`, allocating buffers as needed.
  // Returns the bytes newly allocated. Only while no write is in flight.
  int64_t PairWithBuffers(const TensorMap& weights, const CheckpointPayload& payload);
  // Copies every source of copies_ into its buffer.
  void CopySources();
  // Hands the snapshot of `step` to the writer thread.
  void StartWrite(int64_t step, const ModelConfig& model_config);
  // Writes zeros over every snapshot buffer (faults its pages in); on the writer thread.
  void TouchSnapshot();
  void WriterLoop();
  // Blocks until no write is in flight; returns (and clears) an unreturned failure.
  absl::Status WaitLocked(std::unique_lock<std::mutex>& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CheckpointManager manager_;
  // The snapshot: written by Save while no write is in flight, read by the writer thread.
  int64_t step_ = 0;
  ModelConfig model_config_;
  TensorMap weights_;
  CheckpointPayload payload_;
  TrainerStateRenderer render_trainer_state_;  // set: payload_.trainer_state comes from it
  Copies copies_;  // the last Reserve's or Save's tensors, each with its buffer

  std::mutex mu_;
  std::condition_variable changed_;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;  // a snapshot waits for or is in its write
  bool touch_only_ ABSL_GUARDED_BY(mu_) = false;  // ...or, with pending_, for Reserve's touch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status unreturned_failure_ ABSL_GUARDED_BY(mu_);
  std::optional<CheckpointWritten> finished_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started after the members above exist
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_CHECKPOINT_WRITER_H_
