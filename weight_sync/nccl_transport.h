// NcclBucketTransport: the buckets as NCCL broadcasts of device memory, for generators whose
// weights live on other GPUs (or other hosts) than the trainer's. Built on NcclCommunicator
// (nccl_broadcast.h): a nonblocking communicator whose every wait is bounded.
//
// Set-up (Connect, during Join): rank 0 draws an ncclUniqueId and publishes its bytes in the
// group's store; every rank reads it and joins the communicator on its cuda_device within the
// group's timeout (on a deadline the half-formed communicator is aborted: DeadlineExceeded).
//
// Per bucket k: rank 0 packs it (BucketSource::Pack, a LibTorch copy on the current stream) into
// one kept device bucket buffer and broadcasts it; an fp32 receiver receives straight into its
// device staging slice, another dtype into a kept device bucket buffer that BucketSink::Take
// casts out. Each broadcast and the stream behind it must finish within the group's timeout, else
// the communicator is aborted (ncclCommAbort) and the bucket fails with DeadlineExceeded naming
// the group, the bucket, the bytes and the device: no rank stays stuck in a collective whose peer
// died. Abort() aborts the communicator at once.
//
// COMPILED ONLY: never run on a GPU. Untuned: one bucket in flight at a time (no packing of
// bucket k + 1 while k is on the wire, unlike the Gloo transport).
//
// Thread safety: one thread at a time (the group's).
#ifndef LOCKSTEP_WEIGHT_SYNC_NCCL_TRANSPORT_H_
#define LOCKSTEP_WEIGHT_SYNC_NCCL_TRANSPORT_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/group_options.h"
#include "weight_sync/nccl_broadcast.h"

namespace lockstep::weight_sync {

class NcclBucketTransport final : public BucketTransport {
 public:
  // Every rank calls it at the same point of Join. `store`: the group's prefixed store (the id);
  // `plan` must outlive the transport. Errors: DeadlineExceeded when the id or a peer does not
  // arrive within the timeout; NCCL's or CUDA's error otherwise; each begins with `where`.
  static absl::StatusOr<std::unique_ptr<NcclBucketTransport>> Connect(const GroupOptions& options,
                                                                      c10d::Store& store,
                                                                      const BucketPlan& plan,
                                                                      const std::string& where);

  Transport kind() const override { return Transport::kNccl; }
  absl::Status SendBuckets(BucketSource& source) override;
  absl::Status ReceiveBuckets(BucketSink& sink) override;
  void Abort() override { communicator_->Abort(); }

 private:
  NcclBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                      std::unique_ptr<NcclCommunicator> communicator);
  // The kept device bucket buffer (allocated on first use), narrowed to `num_elements`.
  torch::Tensor BucketBuffer(int64_t num_elements);
  // Broadcasts `bucket` (fp32 on this rank's device) in place from rank 0, bounded by the timeout.
  absl::Status Broadcast(const torch::Tensor& bucket, int64_t k);

  const GroupOptions options_;
  const BucketPlan& plan_;
  const std::unique_ptr<NcclCommunicator> communicator_;
  torch::Tensor bucket_buffer_;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_NCCL_TRANSPORT_H_
