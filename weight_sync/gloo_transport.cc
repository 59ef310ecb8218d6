#include "weight_sync/gloo_transport.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "weight_sync/large_buffer.h"

namespace lockstep::weight_sync {

absl::Status WaitCollective(const GroupOptions& options, const c10d_compat::CollectiveGroup& group,
                            const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  absl::Status status = group.Wait(work, FailurePrefix(options, what));
  if (status.ok()) return status;
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat(status.message(), " (no progress within ", options.timeout.count(), " ms)"));
  }
  return absl::UnavailableError(absl::StrCat(status.message(), " (a peer left the group)"));
}

GlooBucketTransport::GlooBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                                         c10d_compat::CollectiveGroup& group)
    : options_(options), plan_(plan), group_(group) {}

torch::Tensor GlooBucketTransport::BucketBuffer(int slot, int64_t num_elements) {
  if (!bucket_buffers_[slot].defined()) {
    const int64_t capacity = std::min(plan_.bucket_elements(), plan_.num_elements());
    bucket_buffers_[slot] = AllocateLargeBuffer(capacity, torch::kFloat32);
  }
  return bucket_buffers_[slot].narrow(0, 0, num_elements);
}

absl::Status GlooBucketTransport::Wait(const c10::intrusive_ptr<c10d::Work>& work, int64_t bucket) {
  return WaitCollective(options_, group_, work, absl::StrCat("bucket ", bucket));
}

absl::Status GlooBucketTransport::SendBuckets(BucketSource& source) {
  // Bucket k + 1 is packed while bucket k is on the wire.
  std::array<c10::intrusive_ptr<c10d::Work>, 2> in_flight;
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const int slot = static_cast<int>(k % 2);
    if (in_flight[slot]) {
      if (absl::Status s = Wait(in_flight[slot], k - 2); !s.ok()) return s;
      in_flight[slot].reset();
    }
    const int64_t num_elements = plan_.bucket(k).num_elements;
    torch::Tensor buffer = BucketBuffer(slot, num_elements);
    source.Pack(k, buffer, 0, num_elements);
    in_flight[slot] = group_.StartBroadcast(buffer);
  }
  for (int64_t k = std::max<int64_t>(0, plan_.num_buckets() - 2); k < plan_.num_buckets(); ++k) {
    const int slot = static_cast<int>(k % 2);
    if (!in_flight[slot]) continue;
    if (absl::Status s = Wait(in_flight[slot], k); !s.ok()) return s;
    in_flight[slot].reset();
  }
  return absl::OkStatus();
}

absl::Status GlooBucketTransport::ReceiveBuckets(BucketSink& sink) {
  if (plan_.num_buckets() > 0 && sink.DirectSlice(0).defined()) {
    // fp32: every bucket straight into its staging slice, all in flight at once.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<torch::Tensor> slices;
    for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
      slices.push_back(sink.DirectSlice(k));
      works.push_back(group_.StartBroadcast(slices.back()));
    }
    for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
      if (absl::Status s = Wait(works[k], k); !s.ok()) return s;
      sink.Take(k, slices[k], 0, slices[k].numel());
    }
    return absl::OkStatus();
  }
  // Lower precision: two fp32 bucket buffers; bucket k + 1 arrives while k is cast out.
  std::array<c10::intrusive_ptr<c10d::Work>, 2> in_flight;
  auto launch = [&](int64_t k) {
    torch::Tensor buffer = BucketBuffer(static_cast<int>(k % 2), plan_.bucket(k).num_elements);
    in_flight[k % 2] = group_.StartBroadcast(buffer);
  };
  if (plan_.num_buckets() > 0) launch(0);
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    if (k + 1 < plan_.num_buckets()) launch(k + 1);
    const int slot = static_cast<int>(k % 2);
    if (absl::Status s = Wait(in_flight[slot], k); !s.ok()) return s;
    in_flight[slot].reset();
    const int64_t num_elements = plan_.bucket(k).num_elements;
    sink.Take(k, BucketBuffer(slot, num_elements), 0, num_elements);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
