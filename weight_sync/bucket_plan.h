// BucketPlan: how a manifest's tensors map onto broadcast buckets. Every tensor is laid out as
// fp32 in one element stream in manifest (name) order; the stream is cut into buckets of
// bucket_bytes / 4 elements (the last one shorter), so a tensor may span several buckets and a
// bucket may hold many tensors. Both sides compute the same plan from the same manifest.
//
// Also here: BucketHash, the 64-bit hash that verification compares across ranks.
//
// Thread safety: an immutable value after Create.
#ifndef LOCKSTEP_WEIGHT_SYNC_BUCKET_PLAN_H_
#define LOCKSTEP_WEIGHT_SYNC_BUCKET_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "weight_sync/manifest.h"

namespace lockstep::weight_sync {

// A run of elements of one tensor inside one bucket.
struct Segment {
  int64_t entry = 0;          // index into manifest.entries
  int64_t entry_offset = 0;   // first element within the (flattened) tensor
  int64_t bucket_offset = 0;  // first element within the bucket
  int64_t num_elements = 0;
};

struct Bucket {
  int64_t stream_offset = 0;  // first element within the whole stream
  int64_t num_elements = 0;
  std::vector<Segment> segments;  // in stream order
};

class BucketPlan {
 public:
  // InvalidArgument if bucket_bytes is not a positive multiple of 4.
  static absl::StatusOr<BucketPlan> Create(Manifest manifest, int64_t bucket_bytes);

  const Manifest& manifest() const { return manifest_; }
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  const Bucket& bucket(int64_t index) const { return buckets_[index]; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  int64_t num_elements() const { return num_elements_; }
  int64_t total_bytes() const { return num_elements_ * 4; }     // fp32 on the wire
  int64_t bucket_elements() const { return bucket_elements_; }  // capacity of one bucket
  // Element offset of entry `index` in the stream.
  int64_t entry_offset(int64_t index) const { return entry_offsets_[index]; }

 private:
  BucketPlan() = default;

  Manifest manifest_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> entry_offsets_;
  int64_t num_elements_ = 0;
  int64_t bucket_elements_ = 0;
};

// A 64-bit hash of `num_bytes` bytes (four independent multiply-rotate lanes over 8-byte words,
// then the tail and the length): fast enough to run on every bucket, and any changed bit changes
// it with overwhelming probability. Not cryptographic.
uint64_t BucketHash(const void* data, size_t num_bytes);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_BUCKET_PLAN_H_
