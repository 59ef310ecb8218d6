// CudaIpcBucketTransport: the buckets through CUDA IPC, for a trainer and generators whose
// weights live on one GPU (or GPUs of one host). Built on cuda_ipc.h.
//
// Set-up (Connect, during Join): rank 0 allocates two device slots of one bucket each
// (cudaMalloc: an IPC handle names a whole allocation) and publishes their handle in the group's
// store; every receiver opens it and reports back ("ok" or its error), and rank 0 refuses the
// group, naming the rank, if one could not.
//
// Per bucket k, with one barrier B_k (a one-element Gloo all-reduce on the control group,
// bounded by the timeout) per bucket and one more at the end:
//   rank 0:     pack bucket k into slot k % 2, wait for the stream, B_k.
//   receivers:  B_k, copy slot k % 2 into the staging slice (fp32) or a kept device bucket
//               buffer that BucketSink::Take casts out, wait for the stream.
// A receiver enters B_k only after it copied bucket k - 1 out, so after B_k rank 0 may refill
// slot (k + 1) % 2 while the receivers read slot k % 2: one slot is filled while the other
// drains, as over shared memory. Every stream wait is bounded too (WaitForStream). Abort() is a
// no-op: the peers' next barrier fails within the timeout.
//
// COMPILED ONLY: never run on a GPU.
//
// Thread safety: one thread at a time (the group's).
#ifndef LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_TRANSPORT_H_
#define LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_TRANSPORT_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/cuda_ipc.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

class CudaIpcBucketTransport final : public BucketTransport {
 public:
  // Every rank calls it at the same point of Join. `store`: the group's prefixed store (the
  // handle and the receivers' answers); `control` (the per-bucket barriers) and `plan` must
  // outlive the transport. Errors, each beginning with `where`: FailedPrecondition naming the
  // receiver that could not open the handle (on rank 0 and that receiver); DeadlineExceeded when
  // a peer does not finish the set-up within the timeout; CUDA's error otherwise.
  static absl::StatusOr<std::unique_ptr<CudaIpcBucketTransport>> Connect(
      const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
      c10d_compat::CollectiveGroup& control, const std::string& where);

  // Rank 0 frees its slots (cudaFree); a receiver closes its mapping.
  ~CudaIpcBucketTransport() override;

  Transport kind() const override { return Transport::kCudaIpc; }
  absl::Status SendBuckets(BucketSource& source) override;
  absl::Status ReceiveBuckets(BucketSink& sink) override;
  void Abort() override {}

 private:
  CudaIpcBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                         c10d_compat::CollectiveGroup& control, void* slots,
                         std::unique_ptr<CudaIpcBuffer> opened);
  // B_k: every rank has reached bucket `k` (k == num_buckets: the end).
  absl::Status Barrier(int64_t k);
  // Elements in one slot.
  int64_t SlotElements() const;

  const GroupOptions options_;
  const BucketPlan& plan_;
  c10d_compat::CollectiveGroup& control_;
  void* const slots_;                          // rank 0: two slots, cudaMalloc'd here
  const std::unique_ptr<CudaIpcBuffer> opened_;  // receivers: rank 0's slots, mapped
  torch::Tensor bucket_buffer_;                // receivers of a non-fp32 dtype
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_CUDA_IPC_TRANSPORT_H_
