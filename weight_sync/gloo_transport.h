// GlooBucketTransport: the buckets as Gloo broadcasts on the group's control process group, the
// path between hosts (and on one host under transport=gloo). Rank 0 packs bucket k + 1 into one
// of two kept fp32 bucket buffers while bucket k is on the wire; an fp32 receiver receives
// straight into its staging buffer (no copy), a lower-precision one receives into two bucket
// buffers and casts one out while the next arrives.
//
// Failures: every wait is bounded by the group's timeout (Gloo's own timeout and
// Work::wait(timeout)); a dead peer gives DeadlineExceeded or Unavailable. Abort() is a no-op:
// Gloo's peers notice a failed rank through their sockets or their timeout.
//
// Thread safety: one thread at a time (the group's).
#ifndef LOCKSTEP_WEIGHT_SYNC_GLOO_TRANSPORT_H_
#define LOCKSTEP_WEIGHT_SYNC_GLOO_TRANSPORT_H_

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "weight_sync/bucket_plan.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/group_options.h"

namespace lockstep::weight_sync {

// Waits for a collective on the group's Gloo process group, within the timeout. Failures:
// "<FailurePrefix>: <LibTorch's text>", then DeadlineExceeded "(no progress within <timeout>
// ms)" or Unavailable "(a peer left the group)".
absl::Status WaitCollective(const GroupOptions& options, const c10d_compat::CollectiveGroup& group,
                            const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

class GlooBucketTransport final : public BucketTransport {
 public:
  // `group` and `plan` must outlive the transport.
  GlooBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                      c10d_compat::CollectiveGroup& group);

  Transport kind() const override { return Transport::kGloo; }
  absl::Status SendBuckets(BucketSource& source) override;
  absl::Status ReceiveBuckets(BucketSink& sink) override;
  void Abort() override {}

 private:
  // bucket_buffers_[slot] (allocated on first use), narrowed to `num_elements`.
  torch::Tensor BucketBuffer(int slot, int64_t num_elements);
  absl::Status Wait(const c10::intrusive_ptr<c10d::Work>& work, int64_t bucket);

  const GroupOptions options_;
  const BucketPlan& plan_;
  c10d_compat::CollectiveGroup& group_;
  // Two fp32 bucket buffers, kept across broadcasts so that every sync does not page-fault fresh
  // memory in again.
  std::array<torch::Tensor, 2> bucket_buffers_;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_GLOO_TRANSPORT_H_
