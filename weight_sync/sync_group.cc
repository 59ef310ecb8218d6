#include "weight_sync/sync_group.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/large_buffer.h"
#include "weight_sync/shm_channel.h"

namespace lockstep::weight_sync {
namespace {

using Clock = std::chrono::steady_clock;

std::string ManifestKey(int rank) { return absl::StrCat("manifest/", rank); }
std::string CheckedKey(int rank) { return absl::StrCat("checked/", rank); }
std::string SettingsKey(int rank) { return absl::StrCat("settings/", rank); }
std::string HostKey(int rank) { return absl::StrCat("host/", rank); }
std::string MappedKey(int rank) { return absl::StrCat("shm/mapped/", rank); }
constexpr char kShmNameKey[] = "shm/name";  // rank 0's segment name ("" = none)
constexpr char kShmUseKey[] = "shm/use";    // rank 0's decision: "shm", "gloo" or an error

// What every rank must agree on besides the manifest (else the collectives would not match).
std::string Settings(const GroupOptions& options) {
  return absl::StrCat("bucket_bytes=", options.bucket_bytes, " verify=", options.verify ? 1 : 0,
                      " transport=", TransportName(options.transport));
}

// The host name part of HostIdentity().
std::string HostName(const std::string& identity) {
  return identity.substr(0, identity.find('\n'));
}

// Shared memory hands buckets over in chunks of this many fp32 elements (8 MiB), so that the
// receivers copy one chunk out while rank 0 writes the next.
constexpr int64_t kShmChunkElements = int64_t{2} << 20;

uint64_t RandomNonce() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^
         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
}

std::string FromBytes(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> ToBytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "::1";
}

// The address Gloo binds on this rank: the store's address where that is ours (rank 0, or a
// loopback group), otherwise this machine's host name.
std::string DeviceHost(const GroupOptions& options) {
  if (options.rank == 0 || IsLoopback(options.store_host)) return options.store_host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return options.store_host;
  return name;
}

// c10d throws c10::Error; Gloo's own failures (gloo::IoException, ...) surface from Work::wait as
// plain std::exceptions. Both end up here, without LibTorch's backtrace.
std::string ErrorText(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

// Step 4 of Join (see there). Returns the mapped channel, or nullptr when the group falls back
// to Gloo (kAuto only). Every rank gets the same outcome: rank 0 decides after hearing from every
// receiver, and every wait is bounded by the group's timeout.
absl::StatusOr<std::unique_ptr<ShmBucketChannel>> SetUpSharedMemory(const GroupOptions& options,
                                                                    c10d::Store& store,
                                                                    int64_t slot_bytes,
                                                                    const std::string& where) {
  const bool required = options.transport == Transport::kSharedMemory;
  std::unique_ptr<ShmBucketChannel> channel;
  std::string decision;
  try {
    if (options.rank == 0) {
      const std::string name = SharedMemoryName(options.group_name, RandomNonce());
      absl::StatusOr<std::unique_ptr<ShmBucketChannel>> created =
          ShmBucketChannel::Create(name, options.world_size, slot_bytes);
      if (!created.ok()) {
        decision = required ? absl::StrCat("rank 0 cannot create shared memory: ",
                                           created.status().message())
                            : "gloo";
        store.set(kShmNameKey, ToBytes(""));
      } else {
        channel = *std::move(created);
        struct Unlinker {  // on every way out, exceptions included
          std::string name;
          ~Unlinker() { ShmBucketChannel::Unlink(name); }
        } unlinker{name};
        store.set(kShmNameKey, ToBytes(name));
        std::vector<std::string> keys;
        for (int r = 1; r < options.world_size; ++r) keys.push_back(MappedKey(r));
        try {
          store.wait(keys, options.timeout);
        } catch (const std::exception& e) {
          return absl::DeadlineExceededError(
              absl::StrCat(where, ": not every rank mapped the shared-memory segment within ",
                           options.timeout.count(), " ms (a peer left during the rendezvous)"));
        }
        ShmBucketChannel::Unlink(name);  // every rank has it mapped: nothing stays in /dev/shm
        decision = "shm";
        for (int r = 1; r < options.world_size; ++r) {
          const std::string mapped = FromBytes(store.get(MappedKey(r)));
          if (mapped == "ok") continue;
          decision = required
                         ? absl::StrCat("rank ", r, " cannot map rank 0's shared memory: ", mapped,
                                        "; use transport=auto or gloo")
                         : "gloo";
          break;
        }
      }
      store.set(kShmUseKey, ToBytes(decision));
    } else {
      store.wait({kShmNameKey}, options.timeout);
      const std::string name = FromBytes(store.get(kShmNameKey));
      if (!name.empty()) {
        absl::StatusOr<std::unique_ptr<ShmBucketChannel>> opened =
            ShmBucketChannel::Open(name, options.world_size, slot_bytes);
        if (opened.ok()) channel = *std::move(opened);
        store.set(MappedKey(options.rank),
                  ToBytes(opened.ok() ? "ok" : std::string(opened.status().message())));
      }
      store.wait({kShmUseKey}, options.timeout);
      decision = FromBytes(store.get(kShmUseKey));
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the shared-memory rendezvous did not finish within ",
                     options.timeout.count(), " ms: ", ErrorText(e)));
  }
  if (decision == "shm") return channel;
  if (decision == "gloo") return std::unique_ptr<ShmBucketChannel>();
  return absl::FailedPreconditionError(absl::StrCat(where, ": ", decision));
}

}  // namespace

struct WeightSyncGroup::Backend {
  c10::intrusive_ptr<c10d::Store> store;  // prefixed with the group name
  std::unique_ptr<compat::CollectiveGroup> collectives;
  std::unique_ptr<ShmBucketChannel> channel;  // set iff the buckets use shared memory
};

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kAuto:
      return "auto";
    case Transport::kGloo:
      return "gloo";
    case Transport::kSharedMemory:
      return "shm";
  }
  return "?";
}

absl::StatusOr<Transport> ParseTransport(const std::string& name) {
  for (Transport t : {Transport::kAuto, Transport::kGloo, Transport::kSharedMemory}) {
    if (name == TransportName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("transport must be auto, gloo or shm, got '", name, "'"));
}

absl::Status GroupOptions::Validate() const {
  if (world_size < 1)
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", world_size));
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", world_size, "), got ", rank));
  }
  if (store_host.empty()) return absl::InvalidArgumentError("store_host must be set");
  if (store_port <= 0 || store_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store_port must be in [1, 65535], got ", store_port));
  }
  if (group_name.empty() || absl::StrContains(group_name, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_name must be non-empty without '/', got '", group_name, "'"));
  }
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive, got ", timeout.count(), " ms"));
  }
  if (transport != Transport::kAuto && transport != Transport::kGloo &&
      transport != Transport::kSharedMemory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport must be auto (0), gloo (1) or shm (2), got ", static_cast<int>(transport)));
  }
  if (bucket_bytes <= 0 || bucket_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_bytes must be a positive multiple of 4, got ", bucket_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WeightSyncGroup>> WeightSyncGroup::Join(const GroupOptions& options,
                                                                       const Manifest& manifest) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(manifest, options.bucket_bytes);
  if (!plan.ok()) return plan.status();
  const std::string where = absl::StrCat("weight-sync group '", options.group_name, "' (rank ",
                                         options.rank, " of ", options.world_size, ", store ",
                                         options.store_host, ":", options.store_port, ")");
  auto backend = std::make_unique<Backend>();

  // 1. The store: rank 0 hosts it, the others dial it (retrying until the timeout).
  c10::intrusive_ptr<c10d::Store> root;
  try {
    // Rank 0 also dials its own server; c10d retries a refused connection only after a second,
    // so give that at least 10 s. Every wait below passes the group's timeout explicitly.
    const std::chrono::milliseconds store_timeout =
        options.rank == 0 ? std::max(options.timeout, std::chrono::milliseconds(10000))
                          : options.timeout;
    root = compat::ConnectTcpStore(options.store_host, options.store_port, options.rank == 0,
                                   store_timeout);
  } catch (const std::exception& e) {
    if (options.rank == 0) {
      return absl::UnavailableError(absl::StrCat(where, ": cannot host the store: ", ErrorText(e)));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        where, ": no store reachable within ", options.timeout.count(), " ms: ", ErrorText(e)));
  }
  backend->store = compat::PrefixedStore(options.group_name, root);
  c10d::Store& store = *backend->store;

  // 2. Manifests: everyone publishes its own and checks every rank's against rank 0's, so that all
  // ranks refuse a mismatch with the same message.
  std::vector<std::string> manifest_keys;
  for (int r = 0; r < options.world_size; ++r) manifest_keys.push_back(ManifestKey(r));
  std::vector<Manifest> manifests;
  std::vector<std::string> hosts;  // HostIdentity() per rank
  std::string settings_error;
  try {
    store.set(SettingsKey(options.rank), ToBytes(Settings(options)));
    store.set(HostKey(options.rank), ToBytes(HostIdentity()));
    store.set(ManifestKey(options.rank), ToBytes(EncodeManifest(manifest)));
    try {
      store.wait(manifest_keys, options.timeout);
    } catch (const std::exception& e) {
      std::vector<int> missing;
      for (int r = 0; r < options.world_size; ++r) {
        if (!store.check({ManifestKey(r)})) missing.push_back(r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat(where, ": rank(s) ", absl::StrJoin(missing, ", "), " did not join within ",
                       options.timeout.count(), " ms"));
    }
    const std::string reference_settings = FromBytes(store.get(SettingsKey(0)));
    for (int r = 1; r < options.world_size; ++r) {
      const std::string settings = FromBytes(store.get(SettingsKey(r)));
      if (settings != reference_settings) {
        settings_error = absl::StrCat(where, ": rank ", r, " uses ", settings, ", rank 0 uses ",
                                      reference_settings);
        break;
      }
    }
    for (int r = 0; r < options.world_size; ++r) hosts.push_back(FromBytes(store.get(HostKey(r))));
    for (int r = 0; r < options.world_size; ++r) {
      const std::vector<uint8_t> bytes = store.get(ManifestKey(r));
      absl::StatusOr<Manifest> decoded = DecodeManifest(std::string(bytes.begin(), bytes.end()));
      if (!decoded.ok()) {
        return absl::DataLossError(
            absl::StrCat(where, ": rank ", r, "'s manifest: ", decoded.status().message()));
      }
      manifests.push_back(*std::move(decoded));
    }
    // Rank 0 keeps the store alive until every rank has read the manifests (a refused group
    // would otherwise tear the store down under a slower rank).
    store.set(CheckedKey(options.rank), ToBytes("1"));
    if (options.rank == 0) {
      std::vector<std::string> checked_keys;
      for (int r = 0; r < options.world_size; ++r) checked_keys.push_back(CheckedKey(r));
      try {
        store.wait(checked_keys, options.timeout);
      } catch (const std::exception& e) {
        return absl::DeadlineExceededError(
            absl::StrCat(where, ": not every rank finished the rendezvous within ",
                         options.timeout.count(), " ms (a peer left during it)"));
      }
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(where, ": store failed: ", ErrorText(e)));
  }
  if (!settings_error.empty()) return absl::FailedPreconditionError(settings_error);
  for (int r = 1; r < options.world_size; ++r) {
    if (std::optional<std::string> difference = FirstDifference(manifests[0], 0, manifests[r], r)) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": parameter sets differ: ", *difference));
    }
  }

  // Which transport: shared memory needs every rank on rank 0's host.
  bool same_host = true;
  for (int r = 1; r < options.world_size; ++r) {
    if (hosts[r] != hosts[0]) {
      same_host = false;
      if (options.transport == Transport::kSharedMemory) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": transport=shm needs every rank on one host, but rank 0 is on '",
                         HostName(hosts[0]), "' and rank ", r, " on '", HostName(hosts[r]),
                         "' (or another boot); use transport=auto or gloo"));
      }
    }
  }
  const bool try_shared =
      options.transport != Transport::kGloo && same_host && options.world_size > 1;

  // 3. The process group (its own rendezvous through the same prefixed store).
  try {
    backend->collectives = std::make_unique<compat::CollectiveGroup>(
        backend->store, options.rank, options.world_size, DeviceHost(options), options.timeout);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the process group did not form within ", options.timeout.count(),
                     " ms: ", ErrorText(e)));
  }
  // 4. The shared-memory segment (one host only): rank 0 creates it under a fresh name, every
  // receiver maps it and says so, rank 0 unlinks the name and announces the decision. Under
  // kAuto a receiver that cannot map it (another /dev/shm) makes the group fall back to Gloo.
  if (try_shared) {
    absl::StatusOr<std::unique_ptr<ShmBucketChannel>> channel = SetUpSharedMemory(
        options, store, std::min(plan->bucket_elements(), plan->num_elements()) * 4, where);
    if (!channel.ok()) return channel.status();
    backend->channel = *std::move(channel);
  }
  auto group = std::unique_ptr<WeightSyncGroup>(
      new WeightSyncGroup(options, *std::move(plan), std::move(backend)));
  group->transport_ = group->backend_->channel ? Transport::kSharedMemory : Transport::kGloo;
  return group;
}

WeightSyncGroup::WeightSyncGroup(GroupOptions options, BucketPlan plan,
                                 std::unique_ptr<Backend> backend)
    : options_(std::move(options)), plan_(std::move(plan)), backend_(std::move(backend)) {}

WeightSyncGroup::~WeightSyncGroup() {
  // Gloo's workers may still sit in the failed collective (until its own timeout) and its pairs
  // to a dead peer are in an error state: never wait for them.
  if (broken_ && backend_ && backend_->collectives) backend_->collectives->Abandon();
}

torch::Tensor WeightSyncGroup::BucketBuffer(int slot, int64_t num_elements) {
  if (!bucket_buffers_[slot].defined()) {
    const int64_t capacity = std::min(plan_.bucket_elements(), plan_.num_elements());
    bucket_buffers_[slot] = AllocateLargeBuffer(capacity, torch::kFloat32);
  }
  return bucket_buffers_[slot].narrow(0, 0, num_elements);
}

torch::Tensor WeightSyncGroup::StagingBuffer() {
  for (const torch::Tensor& buffer : staging_buffers_) {
    if (buffer.storage().use_count() == 1) return buffer;  // every view of it was dropped
  }
  torch::Tensor buffer = AllocateLargeBuffer(plan_.num_elements(), torch::kFloat32);
  if (staging_buffers_.size() < 2) staging_buffers_.push_back(buffer);
  return buffer;
}

absl::Status WeightSyncGroup::Fail(absl::Status status) {
  broken_ = true;
  if (backend_ && backend_->channel) backend_->channel->Abort();
  return status;
}

absl::Status WeightSyncGroup::FailShared(absl::Status status, const std::string& what) {
  const std::string message =
      absl::StrCat("weight-sync group '", options_.group_name, "' rank ", options_.rank, ": ", what,
                   " (shared memory) failed: ", status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return Fail(absl::DeadlineExceededError(
        absl::StrCat(message, " (no progress within ", options_.timeout.count(), " ms)")));
  }
  return Fail(absl::Status(status.code(), message));
}

absl::Status WeightSyncGroup::SendShared(const std::vector<torch::Tensor>& flat,
                                         std::vector<int64_t>& hashes) {
  ShmBucketChannel& channel = *backend_->channel;
  // Chunks published so far, over the whole life of the group; bucket_end[k] = the count once
  // bucket k is complete.
  uint32_t count = next_sequence_;
  std::vector<uint32_t> bucket_end;
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const Bucket& bucket = plan_.bucket(k);
    // Slot k % 2 is free once every receiver has taken bucket k - 2 out. (Send waits for the
    // last chunk of the previous broadcast, so both slots are free when a broadcast starts.)
    if (k >= 2) {
      if (absl::Status s = channel.WaitConsumed(bucket_end[k - 2], Clock::now() + options_.timeout);
          !s.ok()) {
        return FailShared(s, absl::StrCat("bucket ", k));
      }
    }
    float* slot = reinterpret_cast<float*>(channel.slot(static_cast<int>(k % 2)));
    // Copy chunk by chunk, publishing each, so that the receivers copy chunk c out while rank 0
    // writes chunk c + 1 (one memcpy each side, overlapped).
    size_t next_segment = 0;
    for (int64_t begin = 0; begin < bucket.num_elements; begin += kShmChunkElements) {
      const int64_t end = std::min(begin + kShmChunkElements, bucket.num_elements);
      for (size_t i = next_segment; i < bucket.segments.size(); ++i) {
        const Segment& segment = bucket.segments[i];
        const int64_t from = std::max(begin, segment.bucket_offset);
        const int64_t to = std::min(end, segment.bucket_offset + segment.num_elements);
        if (from >= to) {
          if (segment.bucket_offset >= end) break;
          next_segment = i + 1;
          continue;
        }
        const torch::Tensor& source = flat[segment.entry];
        const int64_t source_offset = segment.entry_offset + (from - segment.bucket_offset);
        if (source.scalar_type() == torch::kFloat32 && source.is_contiguous()) {
          std::memcpy(slot + from, source.data_ptr<float>() + source_offset,
                      static_cast<size_t>(to - from) * 4);
        } else {
          torch::from_blob(slot + from, {to - from}, torch::kFloat32)
              .copy_(source.narrow(0, source_offset, to - from));
        }
      }
      channel.Publish(++count);
    }
    bucket_end.push_back(count);
    if (options_.verify) {
      hashes.push_back(
          static_cast<int64_t>(BucketHash(slot, static_cast<size_t>(bucket.num_elements) * 4)));
    }
  }
  next_sequence_ = count;
  // Done when every receiver has every chunk (so the time covers the whole transfer).
  if (absl::Status s = channel.WaitConsumed(count, Clock::now() + options_.timeout); !s.ok()) {
    return FailShared(s, absl::StrCat("bucket ", plan_.num_buckets() - 1));
  }
  return absl::OkStatus();
}

absl::Status WeightSyncGroup::ReceiveShared(torch::Dtype dtype, TensorMap& received,
                                            std::vector<int64_t>& hashes) {
  ShmBucketChannel& channel = *backend_->channel;
  const Manifest& manifest = plan_.manifest();
  torch::Tensor flat;                  // fp32: one staging buffer the returned tensors view
  std::vector<torch::Tensor> outputs;  // otherwise: one tensor per entry, cast chunk by chunk
  if (dtype == torch::kFloat32) {
    flat = StagingBuffer();
  } else {
    for (const auto& [name, shape] : manifest.entries) {
      outputs.push_back(torch::empty(shape, dtype));
      received.emplace(name, outputs.back());
    }
  }
  uint32_t count = next_sequence_;  // chunks taken so far (the same count as rank 0's)
  for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
    const Bucket& bucket = plan_.bucket(k);
    const float* slot = reinterpret_cast<const float*>(channel.slot(static_cast<int>(k % 2)));
    for (int64_t begin = 0; begin < bucket.num_elements; begin += kShmChunkElements) {
      const int64_t end = std::min(begin + kShmChunkElements, bucket.num_elements);
      const bool last = end == bucket.num_elements;
      if (absl::Status s = channel.WaitWritten(count + 1, Clock::now() + options_.timeout);
          !s.ok()) {
        return FailShared(s, absl::StrCat("bucket ", k));
      }
      if (dtype == torch::kFloat32) {
        std::memcpy(flat.data_ptr<float>() + bucket.stream_offset + begin, slot + begin,
                    static_cast<size_t>(end - begin) * 4);
      } else {
        torch::Tensor chunk =
            torch::from_blob(const_cast<float*>(slot), {bucket.num_elements}, torch::kFloat32);
        for (const Segment& segment : bucket.segments) {
          const int64_t from = std::max(begin, segment.bucket_offset);
          const int64_t to = std::min(end, segment.bucket_offset + segment.num_elements);
          if (from >= to) continue;
          outputs[segment.entry]
              .view({-1})
              .narrow(0, segment.entry_offset + (from - segment.bucket_offset), to - from)
              .copy_(chunk.narrow(0, from, to - from));
        }
        // A cast receiver hashes the fp32 bytes it received, before the slot may be reused.
        if (last && options_.verify) {
          hashes.push_back(
              static_cast<int64_t>(BucketHash(slot, static_cast<size_t>(bucket.num_elements) * 4)));
        }
      }
      channel.Release(options_.rank, ++count);
    }
    if (dtype == torch::kFloat32 && options_.verify) {
      // The hash is of what this rank now holds, not of the slot.
      hashes.push_back(
          static_cast<int64_t>(BucketHash(flat.data_ptr<float>() + bucket.stream_offset,
                                          static_cast<size_t>(bucket.num_elements) * 4)));
    }
  }
  next_sequence_ = count;
  if (dtype == torch::kFloat32) {
    for (size_t i = 0; i < manifest.entries.size(); ++i) {
      const auto& [name, shape] = manifest.entries[i];
      int64_t count_elements = 1;
      for (int64_t dim : shape) count_elements *= dim;
      received.emplace(name, flat.narrow(0, plan_.entry_offset(i), count_elements).view(shape));
    }
  }
  return absl::OkStatus();
}

absl::Status WeightSyncGroup::Wait(const c10::intrusive_ptr<c10d::Work>& work,
                                   const std::string& what) {
  try {
    work->wait(options_.timeout);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    const std::string text = ErrorText(e);
    const std::string message = absl::StrCat("weight-sync group '", options_.group_name, "' rank ",
                                             options_.rank, ": ", what, " failed: ", text);
    if (absl::StrContains(text, "imed out") || absl::StrContains(text, "imeout")) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(message, " (no progress within ", options_.timeout.count(), " ms)")));
    }
    return Fail(absl::UnavailableError(absl::StrCat(message, " (a peer left the group)")));
  }
}

absl::Status WeightSyncGroup::CheckUsable(const char* operation, bool sender) const {
  if (broken_) {
    return absl::FailedPreconditionError(
        absl::StrCat("weight-sync group '", options_.group_name,
                     "' is broken by an earlier failure; re-form it with a new group_name"));
  }
  if (sender != (options_.rank == 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        operation, " is for ", sender ? "rank 0" : "ranks >= 1", ", this is rank ", options_.rank));
  }
  return absl::OkStatus();
}

absl::Status WeightSyncGroup::Send(const TensorMap& params, int64_t version) {
  if (absl::Status s = CheckUsable("Send", /*sender=*/true); !s.ok()) return s;
  if (absl::Status s = CheckMatches(plan_.manifest(), params); !s.ok()) return s;
  std::vector<torch::Tensor> flat;  // per manifest entry, flattened, contiguous
  flat.reserve(params.size());
  for (const auto& [name, tensor] : params) {
    if (!tensor.device().is_cpu() && !compat::NcclAvailable()) {
      return absl::UnimplementedError(absl::StrCat(
          "weight sync: tensor '", name, "' is on ", tensor.device().str(),
          "; this build has only the Gloo (CPU) backend (LibTorch without CUDA/NCCL)"));
    }
    flat.push_back(tensor.detach().reshape({-1}));
  }
  const Clock::time_point start = Clock::now();
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor header = torch::tensor(
        std::vector<int64_t>{version, plan_.num_buckets(), plan_.total_bytes()}, torch::kInt64);
    if (absl::Status s = Wait(backend_->collectives->Broadcast(header), "version header");
        !s.ok()) {
      return s;
    }
    std::vector<int64_t> hashes;
    if (backend_->channel) {
      if (absl::Status s = SendShared(flat, hashes); !s.ok()) return s;
    }
    // Gloo: two bucket buffers; bucket k + 1 is packed while bucket k is on the wire.
    std::array<c10::intrusive_ptr<c10d::Work>, 2> in_flight;
    for (int64_t k = 0; k < (backend_->channel ? 0 : plan_.num_buckets()); ++k) {
      const Bucket& bucket = plan_.bucket(k);
      const int slot = static_cast<int>(k % 2);
      if (in_flight[slot]) {
        if (absl::Status s = Wait(in_flight[slot], absl::StrCat("bucket ", k - 2)); !s.ok()) {
          return s;
        }
        in_flight[slot].reset();
      }
      torch::Tensor buffer = BucketBuffer(slot, bucket.num_elements);
      for (const Segment& segment : bucket.segments) {
        buffer.narrow(0, segment.bucket_offset, segment.num_elements)
            .copy_(flat[segment.entry].narrow(0, segment.entry_offset, segment.num_elements));
      }
      if (options_.verify) {
        hashes.push_back(static_cast<int64_t>(
            BucketHash(buffer.data_ptr(), static_cast<size_t>(bucket.num_elements) * 4)));
      }
      in_flight[slot] = backend_->collectives->Broadcast(buffer);
    }
    for (int64_t k = std::max<int64_t>(0, plan_.num_buckets() - 2); k < plan_.num_buckets(); ++k) {
      const int slot = static_cast<int>(k % 2);
      if (!in_flight[slot]) continue;
      if (absl::Status s = Wait(in_flight[slot], absl::StrCat("bucket ", k)); !s.ok()) return s;
      in_flight[slot].reset();
    }
    if (options_.verify) {
      if (absl::Status s = VerifyHashes(hashes); !s.ok()) return s;
    }
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat("weight sync Send: ", ErrorText(e))));
  }
  last_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> WeightSyncGroup::Receive(int64_t expected_version, torch::Dtype dtype) {
  if (absl::Status s = CheckUsable("Receive", /*sender=*/false); !s.ok()) return s;
  if (!c10::isFloatingType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight sync Receive: dtype must be floating-point, got ", c10::toString(dtype)));
  }
  const Manifest& manifest = plan_.manifest();
  const Clock::time_point start = Clock::now();
  TensorMap received;
  int64_t announced_version = 0;
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor header = torch::zeros({3}, torch::kInt64);
    if (absl::Status s = Wait(backend_->collectives->Broadcast(header), "version header");
        !s.ok()) {
      return s;
    }
    announced_version = header[0].item<int64_t>();
    if (header[1].item<int64_t>() != plan_.num_buckets() ||
        header[2].item<int64_t>() != plan_.total_bytes()) {
      return Fail(absl::DataLossError(
          absl::StrCat("weight sync Receive: rank 0 announced ", header[1].item<int64_t>(),
                       " buckets / ", header[2].item<int64_t>(), " bytes, the plan has ",
                       plan_.num_buckets(), " / ", plan_.total_bytes())));
    }
    std::vector<int64_t> hashes;
    if (backend_->channel) {
      if (absl::Status s = ReceiveShared(dtype, received, hashes); !s.ok()) return s;
    } else if (dtype == torch::kFloat32) {
      // fp32: receive straight into one flat buffer that the returned tensors view (no copy).
      torch::Tensor flat = StagingBuffer();
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      std::vector<torch::Tensor> slices;
      for (const Bucket& bucket : plan_.buckets()) {
        slices.push_back(flat.narrow(0, bucket.stream_offset, bucket.num_elements));
        works.push_back(backend_->collectives->Broadcast(slices.back()));
      }
      for (size_t k = 0; k < works.size(); ++k) {
        if (absl::Status s = Wait(works[k], absl::StrCat("bucket ", k)); !s.ok()) return s;
        if (options_.verify) {
          hashes.push_back(static_cast<int64_t>(
              BucketHash(slices[k].data_ptr(), static_cast<size_t>(slices[k].numel()) * 4)));
        }
      }
      for (size_t i = 0; i < manifest.entries.size(); ++i) {
        const auto& [name, shape] = manifest.entries[i];
        int64_t count = 1;
        for (int64_t dim : shape) count *= dim;
        received.emplace(name, flat.narrow(0, plan_.entry_offset(i), count).view(shape));
      }
    } else {
      // Lower precision: two fp32 bucket buffers; bucket k + 1 arrives while k is cast out.
      std::vector<torch::Tensor> outputs;
      for (const auto& [name, shape] : manifest.entries) {
        outputs.push_back(torch::empty(shape, dtype));
        received.emplace(name, outputs.back());
      }
      std::array<c10::intrusive_ptr<c10d::Work>, 2> in_flight;
      auto launch = [&](int64_t k) {
        const int slot = static_cast<int>(k % 2);
        torch::Tensor buffer = BucketBuffer(slot, plan_.bucket(k).num_elements);
        in_flight[slot] = backend_->collectives->Broadcast(buffer);
      };
      if (plan_.num_buckets() > 0) launch(0);
      for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
        if (k + 1 < plan_.num_buckets()) launch(k + 1);
        const int slot = static_cast<int>(k % 2);
        if (absl::Status s = Wait(in_flight[slot], absl::StrCat("bucket ", k)); !s.ok()) return s;
        in_flight[slot].reset();
        const Bucket& bucket = plan_.bucket(k);
        torch::Tensor buffer = BucketBuffer(slot, bucket.num_elements);
        if (options_.verify) {
          hashes.push_back(static_cast<int64_t>(
              BucketHash(buffer.data_ptr(), static_cast<size_t>(bucket.num_elements) * 4)));
        }
        for (const Segment& segment : bucket.segments) {
          outputs[segment.entry]
              .view({-1})
              .narrow(0, segment.entry_offset, segment.num_elements)
              .copy_(buffer.narrow(0, segment.bucket_offset, segment.num_elements));
        }
      }
    }
    if (options_.verify) {
      if (absl::Status s = VerifyHashes(hashes); !s.ok()) return s;
    }
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat("weight sync Receive: ", ErrorText(e))));
  }
  last_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  if (announced_version != expected_version) {
    return absl::FailedPreconditionError(
        absl::StrCat("weight sync Receive: rank 0 sent version ", announced_version, ", expected ",
                     expected_version, " (the weights were not kept)"));
  }
  return received;
}

absl::Status WeightSyncGroup::VerifyHashes(const std::vector<int64_t>& hashes) {
  torch::Tensor local = torch::tensor(hashes, torch::kInt64);
  if (local.numel() == 0) return absl::OkStatus();
  std::vector<torch::Tensor> gathered;
  for (int r = 0; r < options_.world_size; ++r) gathered.push_back(torch::empty_like(local));
  if (absl::Status s = Wait(backend_->collectives->AllGather(gathered, local), "hash exchange");
      !s.ok()) {
    return s;
  }
  for (int r = 1; r < options_.world_size; ++r) {
    const int64_t* reference = gathered[0].data_ptr<int64_t>();
    const int64_t* other = gathered[r].data_ptr<int64_t>();
    for (int64_t k = 0; k < local.numel(); ++k) {
      if (reference[k] != other[k]) {
        return Fail(absl::DataLossError(absl::StrCat(
            "weight-sync group '", options_.group_name, "': bucket ", k, " of ", local.numel(),
            " arrived corrupted on rank ", r, " (hash differs from rank 0's)")));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
