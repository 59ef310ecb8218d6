#include "weight_sync/bucket_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::weight_sync {
namespace {

// Calls visit(segment, from, to) for every segment of `bucket` overlapping [begin, end), with
// [from, to) the overlap in bucket elements.
template <typename Visit>
void ForEachPiece(const Bucket& bucket, int64_t begin, int64_t end, const Visit& visit) {
  for (const Segment& segment : bucket.segments) {
    if (segment.bucket_offset >= end) break;  // segments are in stream order
    const int64_t from = std::max(begin, segment.bucket_offset);
    const int64_t to = std::min(end, segment.bucket_offset + segment.num_elements);
    if (from < to) visit(segment, from, to);
  }
}

// Host fp32 to host fp32 is one memcpy; anything else (a cast, a device) goes through torch. A
// transport that received straight into the destination (same memory) copies nothing.
void CopyElements(const torch::Tensor& to, const torch::Tensor& from) {
  if (to.data_ptr() == from.data_ptr() && to.device() == from.device() &&
      to.scalar_type() == from.scalar_type() && to.numel() == from.numel() &&
      to.is_contiguous() && from.is_contiguous()) {
    return;
  }
  if (to.device().is_cpu() && from.device().is_cpu() && to.scalar_type() == from.scalar_type() &&
      to.scalar_type() == torch::kFloat32 && to.is_contiguous() && from.is_contiguous()) {
    std::memcpy(to.data_ptr(), from.data_ptr(), static_cast<size_t>(to.numel()) * 4);
    return;
  }
  to.copy_(from);
}

int64_t HashOf(const torch::Tensor& fp32) {
  const torch::Tensor host = fp32.device().is_cpu() ? fp32.contiguous() : fp32.cpu();
  return static_cast<int64_t>(BucketHash(host.data_ptr(), static_cast<size_t>(host.numel()) * 4));
}

}  // namespace

BucketSource::BucketSource(const BucketPlan& plan, std::vector<torch::Tensor> flat, bool verify)
    : plan_(plan), flat_(std::move(flat)), verify_(verify) {}

void BucketSource::Pack(int64_t k, const torch::Tensor& bucket, int64_t begin, int64_t end) {
  const Bucket& plan_bucket = plan_.bucket(k);
  ForEachPiece(plan_bucket, begin, end, [&](const Segment& segment, int64_t from, int64_t to) {
    CopyElements(bucket.narrow(0, from, to - from),
                 flat_[segment.entry].narrow(
                     0, segment.entry_offset + (from - segment.bucket_offset), to - from));
  });
  if (verify_ && end == plan_bucket.num_elements)
    hashes_.push_back(HashOf(bucket.narrow(0, 0, end)));
}

BucketSink::BucketSink(const BucketPlan& plan, torch::Dtype dtype, torch::Tensor staging,
                       bool verify, torch::Device device)
    : plan_(plan),
      dtype_(dtype),
      staging_(dtype == torch::kFloat32 ? std::move(staging) : torch::Tensor()),
      verify_(verify) {
  if (dtype_ == torch::kFloat32) return;
  for (const auto& [name, shape] : plan_.manifest().entries) {
    outputs_.push_back(torch::empty(shape, torch::TensorOptions().dtype(dtype_).device(device)));
  }
}

torch::Tensor BucketSink::DirectSlice(int64_t k) const {
  if (dtype_ != torch::kFloat32) return torch::Tensor();
  const Bucket& bucket = plan_.bucket(k);
  return staging_.narrow(0, bucket.stream_offset, bucket.num_elements);
}

void BucketSink::Take(int64_t k, const torch::Tensor& bucket, int64_t begin, int64_t end) {
  const Bucket& plan_bucket = plan_.bucket(k);
  const bool last = end == plan_bucket.num_elements;
  if (dtype_ == torch::kFloat32) {
    torch::Tensor slice = DirectSlice(k);
    CopyElements(slice.narrow(0, begin, end - begin), bucket.narrow(0, begin, end - begin));
    // The hash is of what this rank now holds.
    if (verify_ && last) hashes_.push_back(HashOf(slice));
    return;
  }
  ForEachPiece(plan_bucket, begin, end, [&](const Segment& segment, int64_t from, int64_t to) {
    outputs_[segment.entry]
        .view({-1})
        .narrow(0, segment.entry_offset + (from - segment.bucket_offset), to - from)
        .copy_(bucket.narrow(0, from, to - from));
  });
  // A cast receiver hashes the fp32 bytes it received, before their memory may be reused.
  if (verify_ && last) hashes_.push_back(HashOf(bucket.narrow(0, 0, end)));
}

TensorMap BucketSink::Finish() {
  const Manifest& manifest = plan_.manifest();
  TensorMap received;
  for (size_t i = 0; i < manifest.entries.size(); ++i) {
    const auto& [name, shape] = manifest.entries[i];
    if (dtype_ != torch::kFloat32) {
      received.emplace(name, outputs_[i]);
      continue;
    }
    int64_t num_elements = 1;
    for (int64_t dim : shape) num_elements *= dim;
    received.emplace(name, staging_.narrow(0, plan_.entry_offset(i), num_elements).view(shape));
  }
  return received;
}

std::string FailurePrefix(const GroupOptions& options, const std::string& what) {
  return absl::StrCat(GroupLabel(options), ": ", what, " failed");
}

absl::Status TransferFailure(const GroupOptions& options, const std::string& what,
                             const absl::Status& cause) {
  const std::string message = absl::StrCat(FailurePrefix(options, what), ": ", cause.message());
  if (cause.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat(message, " (no progress within ", options.timeout.count(), " ms)"));
  }
  return absl::Status(cause.code(), message);
}

}  // namespace lockstep::weight_sync
