// NcclCommunicator: the raw NCCL layer under NcclBucketTransport (nccl_transport.h):
// a communicator formed from a unique id that the ranks exchange as bytes (through the weight-sync
// rendezvous store: rendezvous.h SetText/GetText), and an in-place broadcast of a device buffer.
// Plain CUDA runtime + NCCL; no LibTorch.
//
//   rank 0:     id = NcclUniqueIdBytes();  publish id in the store
//   every rank: comm = NcclCommunicator::Create(id, rank, world_size, deadline);
//               comm->Broadcast(device_buffer, bytes, /*root=*/0, stream, deadline);
//               comm->Close(deadline);
//
// Every wait is bounded. The communicator is nonblocking (ncclConfig_t.blocking = 0): NCCL calls
// return at once and this class polls ncclCommGetAsyncError (and the stream) until the work is
// done, NCCL reports an error, or the deadline passes; on an error or a deadline it calls
// ncclCommAbort, so no rank is left hanging in a collective whose peer died (the hang TRL hit),
// and returns a status naming the rank, the device and the bytes. An aborted communicator
// refuses further calls with FailedPrecondition; the group must form a new one (a new id).
//
// COMPILED ONLY: built and host-tested (argument checks) on machines without a GPU; no GPU has
// run it yet.
//
// Thread safety: one thread at a time per communicator.
#ifndef LOCKSTEP_WEIGHT_SYNC_NCCL_BROADCAST_H_
#define LOCKSTEP_WEIGHT_SYNC_NCCL_BROADCAST_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::weight_sync {

// Size of the unique id's bytes (NCCL_UNIQUE_ID_BYTES).
inline constexpr size_t kNcclUniqueIdBytes = NCCL_UNIQUE_ID_BYTES;

// A fresh ncclUniqueId as kNcclUniqueIdBytes bytes (it holds rank 0's bootstrap address: call it
// on the rank that will be rank 0). Errors: Unavailable / Internal from ncclGetUniqueId.
absl::StatusOr<std::string> NcclUniqueIdBytes();

// The host-side checks of a broadcast: InvalidArgument for a null buffer, zero bytes, or a root
// outside [0, world_size). Broadcast calls it first; exposed so that it is testable without a GPU.
absl::Status CheckBroadcastArguments(const void* device_buffer, size_t bytes, int root,
                                     int world_size);

class NcclCommunicator {
 public:
  // Joins the communicator named by `id_bytes` (NcclUniqueIdBytes from rank 0) as `rank` of
  // `world_size`, on the calling thread's current CUDA device (cudaSetDevice first). Blocks until
  // all `world_size` ranks have joined or `deadline` passes. Errors: InvalidArgument for id bytes
  // of the wrong size, world_size < 1, or rank outside [0, world_size) (checked before any CUDA
  // or NCCL call); DeadlineExceeded "NCCL init (rank r of w, device d): not done by the deadline
  // ..." when a peer did not join (the half-formed communicator is aborted); NCCL's or CUDA's
  // error otherwise.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(absl::string_view id_bytes,
                                                                  int rank, int world_size,
                                                                  absl::Time deadline);

  // Aborts the communicator if Close has not run (ncclCommAbort never waits for peers).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // In-place broadcast of `bytes` bytes at `device_buffer` (device memory on this communicator's
  // device) from `root` to every rank, enqueued on `stream`, then waits until everything queued
  // on `stream` so far is done. The calling thread's current device must be device().
  // Errors: CheckBroadcastArguments; FailedPrecondition when the communicator was aborted or
  // closed, or another device is current; DeadlineExceeded "NCCL broadcast of N bytes from root
  // R (rank r of w, device d): not done by the deadline; communicator aborted"; Unavailable when
  // NCCL reports a peer or network failure (aborted too).
  absl::Status Broadcast(void* device_buffer, size_t bytes, int root, cudaStream_t stream,
                         absl::Time deadline);

  // Finalizes (waits, bounded, for the peers to finish their pending work) and destroys the
  // communicator. Errors as for Broadcast (aborted on a deadline); OK if already closed.
  absl::Status Close(absl::Time deadline);

  // Aborts at once: pending work on this rank is cancelled; peers find out through their own
  // errors or deadlines. Idempotent.
  void Abort();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int device() const { return device_; }
  // False once aborted or closed.
  bool usable() const { return comm_ != nullptr; }

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int world_size, int device);

  // "<operation> (rank r of w, device d)", how every error of this communicator begins.
  std::string Describe(absl::string_view operation) const;
  // Polls ncclCommGetAsyncError until the last nonblocking call completed: OK, or (after
  // aborting) the NCCL error or DeadlineExceeded, described as `operation`.
  absl::Status WaitUntilReady(absl::string_view operation, absl::Time deadline);
  // The communicator's asynchronous error as a status (OK while none), without waiting.
  absl::Status AsyncError(absl::string_view operation);

  ncclComm_t comm_;  // nullptr once aborted or closed
  const int rank_;
  const int world_size_;
  const int device_;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_NCCL_BROADCAST_H_
