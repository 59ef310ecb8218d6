// The one place in trainer/ that names LibTorch's c10d classes (TCPStore, PrefixStore,
// ProcessGroupGloo, ProcessGroupNCCL). Their constructors and class hierarchy differ between
// LibTorch 1.13 (Debian) and 2.x (ProcessGroupGloo became a c10d::Backend), so everything else
// talks to CollectiveGroup, which hides them behind a pointer to an implementation.
//
// Backends: Gloo for CPU tensors, always built. NCCL for CUDA tensors only when LibTorch was
// built with it (USE_C10D_NCCL); on Debian's CPU LibTorch that code is not compiled and asking
// for it returns FailedPrecondition.
//
// Thread safety: a CollectiveGroup is used by one thread at a time (collectives must be issued
// in the same order on every rank anyway).
#ifndef LOCKSTEP_TRAINER_C10D_COMPAT_H_
#define LOCKSTEP_TRAINER_C10D_COMPAT_H_

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::trainer {

enum class CollectiveBackend { kGloo, kNccl };

struct CollectiveGroupOptions {
  std::string master_addr = "127.0.0.1";  // rank 0 hosts the TCPStore here
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  // Rendezvous and every collective. A missing or dead peer fails the call after this long.
  std::chrono::milliseconds timeout{60000};
  // Store key prefix: a new prefix forms a new group on the same store address.
  std::string store_prefix = "lockstep-dp";
  CollectiveBackend backend = CollectiveBackend::kGloo;
};

enum class ReduceKind { kSum, kMin, kMax };

class CollectiveGroup {
 public:
  // Rank 0 starts the TCPStore at master_addr:master_port; every rank connects to it and joins
  // the process group. Errors: InvalidArgument for bad options; DeadlineExceeded when the peers
  // do not all arrive within the timeout; Unavailable for other connection failures (the
  // message carries LibTorch's); FailedPrecondition for NCCL on a build without it.
  static absl::StatusOr<std::unique_ptr<CollectiveGroup>> Create(
      const CollectiveGroupOptions& options);

  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  // Reduces `tensor` element-wise across ranks, in place: afterwards every rank holds the same
  // bits. It must be dense and contiguous, with the same shape and dtype on every rank. Blocks
  // until done; DeadlineExceeded / Unavailable on failure.
  absl::Status AllReduce(torch::Tensor& tensor, ReduceKind kind);

  // Copies `root`'s values into `tensor` on every other rank, in place.
  absl::Status Broadcast(torch::Tensor& tensor, int root);

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const CollectiveGroupOptions& options() const { return options_; }

 private:
  struct Impl;
  CollectiveGroup(const CollectiveGroupOptions& options, std::unique_ptr<Impl> impl);

  const CollectiveGroupOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_C10D_COMPAT_H_
