#include "weight_sync/bucket_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::weight_sync {

absl::StatusOr<BucketPlan> BucketPlan::Create(Manifest manifest, int64_t bucket_bytes) {
  if (bucket_bytes <= 0 || bucket_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_bytes must be a positive multiple of 4, got ", bucket_bytes));
  }
  BucketPlan plan;
  plan.bucket_elements_ = bucket_bytes / 4;
  plan.manifest_ = std::move(manifest);
  int64_t offset = 0;
  for (const auto& [name, shape] : plan.manifest_.entries) {
    plan.entry_offsets_.push_back(offset);
    int64_t count = 1;
    for (int64_t dim : shape) count *= dim;
    offset += count;
  }
  plan.num_elements_ = offset;

  // Walk the stream once, cutting it at every bucket boundary.
  for (int64_t start = 0; start < plan.num_elements_; start += plan.bucket_elements_) {
    Bucket bucket;
    bucket.stream_offset = start;
    bucket.num_elements = std::min(plan.bucket_elements_, plan.num_elements_ - start);
    plan.buckets_.push_back(std::move(bucket));
  }
  for (int64_t entry = 0; entry < static_cast<int64_t>(plan.entry_offsets_.size()); ++entry) {
    const int64_t begin = plan.entry_offsets_[entry];
    const int64_t end = entry + 1 < static_cast<int64_t>(plan.entry_offsets_.size())
                            ? plan.entry_offsets_[entry + 1]
                            : plan.num_elements_;
    for (int64_t position = begin; position < end;) {
      Bucket& bucket = plan.buckets_[position / plan.bucket_elements_];
      const int64_t bucket_end = bucket.stream_offset + bucket.num_elements;
      const int64_t count = std::min(end, bucket_end) - position;
      bucket.segments.push_back(
          Segment{entry, position - begin, position - bucket.stream_offset, count});
      position += count;
    }
  }
  return plan;
}

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;

inline uint64_t RotateLeft(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

inline uint64_t Mix(uint64_t lane, uint64_t word) {
  return RotateLeft(lane + word * kPrime2, 31) * kPrime1;
}

inline uint64_t LoadWord(const unsigned char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

}  // namespace

uint64_t BucketHash(const void* data, size_t num_bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  size_t i = 0;
  for (; i + 32 <= num_bytes; i += 32) {
    lanes[0] = Mix(lanes[0], LoadWord(p + i));
    lanes[1] = Mix(lanes[1], LoadWord(p + i + 8));
    lanes[2] = Mix(lanes[2], LoadWord(p + i + 16));
    lanes[3] = Mix(lanes[3], LoadWord(p + i + 24));
  }
  uint64_t hash = RotateLeft(lanes[0], 1) + RotateLeft(lanes[1], 7) + RotateLeft(lanes[2], 12) +
                  RotateLeft(lanes[3], 18);
  for (; i + 8 <= num_bytes; i += 8) hash = Mix(hash, LoadWord(p + i));
  for (; i < num_bytes; ++i) hash = Mix(hash, p[i]);
  hash ^= num_bytes;
  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  return hash;
}

}  // namespace lockstep::weight_sync
