#include "weight_sync/shm_transport.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/rendezvous.h"

namespace lockstep::weight_sync {
namespace {

using Clock = ShmBucketChannel::Clock;

std::string MappedKey(int rank) { return absl::StrCat("shm/mapped/", rank); }
constexpr char kShmNameKey[] = "shm/name";  // rank 0's segment name ("" = none)
constexpr char kShmUseKey[] = "shm/use";    // rank 0's decision: "shm", "gloo" or an error

// Buckets are handed over in chunks of this many fp32 elements (8 MiB), so that the receivers
// copy one chunk out while rank 0 writes the next.
constexpr int64_t kChunkElements = int64_t{2} << 20;

uint64_t RandomNonce() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^
         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
}

// Slot `index` of `channel` as an fp32 tensor of `num_elements` (no copy).
torch::Tensor SlotTensor(const ShmBucketChannel& channel, int index, int64_t num_elements) {
  return torch::from_blob(channel.slot(index), {num_elements}, torch::kFloat32);
}

// Rank 0's half of Connect: the segment, every receiver's answer, the decision.
absl::StatusOr<std::unique_ptr<ShmBucketChannel>> CreateForAll(const GroupOptions& options,
                                                               c10d::Store& store,
                                                               int64_t slot_bytes,
                                                               const std::string& where,
                                                               std::string& decision) {
  const bool required = options.transport == Transport::kSharedMemory;
  const std::string name = SharedMemoryName(options.group_name, RandomNonce());
  absl::StatusOr<std::unique_ptr<ShmBucketChannel>> created =
      ShmBucketChannel::Create(name, options.world_size, slot_bytes);
  if (!created.ok()) {
    decision =
        required ? absl::StrCat("rank 0 cannot create shared memory: ", created.status().message())
                 : "gloo";
    SetText(store, kShmNameKey, "");
    return created;
  }
  struct Unlinker {  // on every way out, exceptions included
    std::string name;
    ~Unlinker() { ShmBucketChannel::Unlink(name); }
  } unlinker{name};
  SetText(store, kShmNameKey, name);
  if (absl::Status s =
          WaitForRanks(store, MappedKey, 1, options, where, "mapped the shared-memory segment");
      !s.ok()) {
    return s;
  }
  ShmBucketChannel::Unlink(name);  // every rank has it mapped: nothing stays in /dev/shm
  decision = "shm";
  for (int r = 1; r < options.world_size; ++r) {
    const std::string mapped = GetText(store, MappedKey(r));
    if (mapped == "ok") continue;
    decision = required ? absl::StrCat("rank ", r, " cannot map rank 0's shared memory: ", mapped,
                                       "; use transport=auto or gloo")
                        : "gloo";
    break;
  }
  return created;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmBucketTransport>> ShmBucketTransport::Connect(
    const GroupOptions& options, c10d::Store& store, const BucketPlan& plan,
    const std::string& where) {
  const int64_t slot_bytes = std::min(plan.bucket_elements(), plan.num_elements()) * 4;
  std::unique_ptr<ShmBucketChannel> channel;
  std::string decision;
  try {
    if (options.rank == 0) {
      absl::StatusOr<std::unique_ptr<ShmBucketChannel>> created =
          CreateForAll(options, store, slot_bytes, where, decision);
      if (created.ok()) {
        channel = *std::move(created);
      } else if (decision.empty()) {
        return created.status();  // a peer left: no decision to announce
      }
      SetText(store, kShmUseKey, decision);
    } else {
      store.wait({kShmNameKey}, options.timeout);
      const std::string name = GetText(store, kShmNameKey);
      if (!name.empty()) {
        absl::StatusOr<std::unique_ptr<ShmBucketChannel>> opened =
            ShmBucketChannel::Open(name, options.world_size, slot_bytes);
        if (opened.ok()) channel = *std::move(opened);
        SetText(store, MappedKey(options.rank),
                opened.ok() ? "ok" : std::string(opened.status().message()));
      }
      store.wait({kShmUseKey}, options.timeout);
      decision = GetText(store, kShmUseKey);
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the shared-memory rendezvous did not finish within ",
                     options.timeout.count(), " ms: ", c10d_compat::ErrorText(e)));
  }
  if (decision == "shm") {
    return std::unique_ptr<ShmBucketTransport>(
        new ShmBucketTransport(options, plan, std::move(channel)));
  }
  if (decision == "gloo") return std::unique_ptr<ShmBucketTransport>();
  return absl::FailedPreconditionError(absl::StrCat(where, ": ", decision));
}

ShmBucketTransport::ShmBucketTransport(const GroupOptions& options, const BucketPlan& plan,
                                       std::unique_ptr<ShmBucketChannel> channel)
    : options_(options), plan_(plan), channel_(std::move(channel)) {}

absl::Status ShmBucketTransport::Failure(const absl::Status& cause, int64_t bucket) const {
  return TransferFailure(options_, absl::StrCat("bucket ", bucket, " (shared memory)"), cause);
}

absl::Status ShmBucketTransport::SendBuckets(BucketSource& source) {
  // Chunks published so far, over the whole life of the group; bucket_end[k] = the count once
  // bucket k is complete.
  uint32_t count = next_sequence_;
  std::vector<uint32_t> bucket_end;
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    // Slot k % 2 is free once every receiver has taken bucket k - 2 out. (SendBuckets waits for
    // the last chunk of the previous broadcast, so both slots are free when a broadcast starts.)
    if (k >= 2) {
      if (absl::Status s =
              channel_->WaitConsumed(bucket_end[k - 2], Clock::now() + options_.timeout);
          !s.ok()) {
        return Failure(s, k);
      }
    }
    const int64_t num_elements = plan_.bucket(k).num_elements;
    const torch::Tensor slot = SlotTensor(*channel_, static_cast<int>(k % 2), num_elements);
    // Chunk by chunk, publishing each, so that the receivers copy chunk c out while rank 0
    // writes chunk c + 1 (one memcpy each side, overlapped).
    for (int64_t begin = 0; begin < num_elements; begin += kChunkElements) {
      source.Pack(k, slot, begin, std::min(begin + kChunkElements, num_elements));
      channel_->Publish(++count);
    }
    bucket_end.push_back(count);
  }
  next_sequence_ = count;
  // Done when every receiver has every chunk (so the time covers the whole transfer).
  if (absl::Status s = channel_->WaitConsumed(count, Clock::now() + options_.timeout); !s.ok()) {
    return Failure(s, plan_.num_buckets() - 1);
  }
  return absl::OkStatus();
}

absl::Status ShmBucketTransport::ReceiveBuckets(BucketSink& sink) {
  uint32_t count = next_sequence_;  // chunks taken so far (the same count as rank 0's)
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const int64_t num_elements = plan_.bucket(k).num_elements;
    const torch::Tensor slot = SlotTensor(*channel_, static_cast<int>(k % 2), num_elements);
    for (int64_t begin = 0; begin < num_elements; begin += kChunkElements) {
      if (absl::Status s = channel_->WaitWritten(count + 1, Clock::now() + options_.timeout);
          !s.ok()) {
        return Failure(s, k);
      }
      sink.Take(k, slot, begin, std::min(begin + kChunkElements, num_elements));
      channel_->Release(options_.rank, ++count);
    }
  }
  next_sequence_ = count;
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
