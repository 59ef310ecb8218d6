// ShmBucketTransport: the buckets through a POSIX shared-memory segment (weight_sync/
// shm_channel.h) when every rank runs on one host. Rank 0 copies each bucket, in 8 MiB chunks,
// into slot k % 2 and publishes each chunk; every receiver copies the chunk out (fp32: one
// memcpy into its staging buffer; otherwise a cast into its tensors) and releases it, so rank 0
// fills one slot while the receivers drain the other (~2 memcpys per byte in all).
//
// Set-up (Connect, during Join): rank 0 creates the segment under a fresh name and publishes the
// name in the store, every receiver maps it and reports back, rank 0 unlinks the name (so
// nothing stays in /dev/shm) and announces the decision. Under transport=auto a receiver that
// cannot map it (another /dev/shm) makes the whole group fall back to Gloo.
//
// Failures: every wait is a futex wait bounded by the group's timeout; Abort() sets the
// segment's `aborted` flag so that the other ranks fail at once with Unavailable.
//
// Thread safety: one thread at a time (the group's).
#ifndef LOCKSTEP_WEIGHT_SYNC_SHM_TRANSPORT_H_
#define LOCKSTEP_WEIGHT_SYNC_SHM_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/group_options.h"
#include "weight_sync/shm_channel.h"

namespace lockstep::weight_sync {

class ShmBucketTransport final : public BucketTransport {
 public:
  // Every rank of a one-host group calls it at the same point of Join; each gets the same
  // outcome: the transport, or nullptr when the group falls back to Gloo (transport=auto only).
  // FailedPrecondition naming the rank under transport=shm when a rank cannot create or map the
  // segment; DeadlineExceeded when a peer leaves during the set-up. `store` is the group's
  // (prefixed) store; `where` names the group in errors; `plan` must outlive the transport.
  static absl::StatusOr<std::unique_ptr<ShmBucketTransport>> Connect(const GroupOptions& options,
                                                                     c10d::Store& store,
                                                                     const BucketPlan& plan,
                                                                     const std::string& where);

  Transport kind() const override { return Transport::kSharedMemory; }
  absl::Status SendBuckets(BucketSource& source) override;
  absl::Status ReceiveBuckets(BucketSink& sink) override;
  void Abort() override { channel_->Abort(); }

 private:
  ShmBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                     std::unique_ptr<ShmBucketChannel> channel);
  // A failed channel wait during `bucket` as the group's error.
  absl::Status Failure(const absl::Status& cause, int64_t bucket) const;

  const GroupOptions options_;
  const BucketPlan& plan_;
  const std::unique_ptr<ShmBucketChannel> channel_;
  // Chunks sent/received so far on this group (every rank counts the same).
  uint32_t next_sequence_ = 0;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_SHM_TRANSPORT_H_
