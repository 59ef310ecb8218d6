// CUDA runtime return codes as absl::Status, and the one bounded wait on a CUDA stream that the
// GPU transfer layers (nccl_broadcast.h, cuda_ipc.h) share. Plain CUDA runtime; no LibTorch.
//
// COMPILED ONLY: built and host-tested on machines without a GPU; no GPU has run it yet.
//
// Thread safety: free functions; WaitForStream may be called from any thread that may use the
// stream.
#ifndef LOCKSTEP_WEIGHT_SYNC_GPU_STATUS_H_
#define LOCKSTEP_WEIGHT_SYNC_GPU_STATUS_H_

#include <cuda_runtime.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::weight_sync {

// OK for cudaSuccess, else "<what>: <cudaGetErrorName>: <cudaGetErrorString>" with a code by
// kind: InvalidArgument (bad value, handle or pointer), ResourceExhausted (out of memory),
// FailedPrecondition (no device, no driver, IPC not supported), Internal otherwise. Clears the
// thread's last-error slot, so a non-sticky error does not leak into the next call.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Polls cudaStreamQuery(stream) until the work queued on it so far is done: OK, or the stream's
// error (CudaStatus), or DeadlineExceeded "<what>: not done by the deadline" once `deadline`
// passes. Between polls it runs `check` (may be empty) and returns its first non-OK status: the
// NCCL communicator's asynchronous error, for one. Sleeps between polls (from a yield up to
// 1 ms), so it never spins a core for a long transfer and never waits past the deadline by more
// than a poll.
absl::Status WaitForStream(cudaStream_t stream, absl::Time deadline, absl::string_view what,
                           const std::function<absl::Status()>& check = {});

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GPU_STATUS_H_
