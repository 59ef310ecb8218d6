#include "weight_sync/sync_group.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/large_buffer.h"

namespace lockstep::weight_sync {
namespace {

using Clock = std::chrono::steady_clock;

std::string ManifestKey(int rank) { return absl::StrCat("manifest/", rank); }
std::string CheckedKey(int rank) { return absl::StrCat("checked/", rank); }
std::string SettingsKey(int rank) { return absl::StrCat("settings/", rank); }

// What every rank must agree on besides the manifest (else the collectives would not match).
std::string Settings(const GroupOptions& options) {
  return absl::StrCat("bucket_bytes=", options.bucket_bytes, " verify=", options.verify ? 1 : 0);
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

}  // namespace

struct WeightSyncGroup::Backend {
  c10::intrusive_ptr<c10d::Store> store;  // prefixed with the group name
  std::unique_ptr<compat::CollectiveGroup> collectives;
};

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
  std::string settings_error;
  try {
    store.set(SettingsKey(options.rank), ToBytes(Settings(options)));
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

  // 3. The process group (its own rendezvous through the same prefixed store).
  try {
    backend->collectives = std::make_unique<compat::CollectiveGroup>(
        backend->store, options.rank, options.world_size, DeviceHost(options), options.timeout);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the process group did not form within ", options.timeout.count(),
                     " ms: ", ErrorText(e)));
  }
  return std::unique_ptr<WeightSyncGroup>(
      new WeightSyncGroup(options, *std::move(plan), std::move(backend)));
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
  return status;
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
    // Two bucket buffers: bucket k + 1 is packed while bucket k is on the wire.
    std::array<c10::intrusive_ptr<c10d::Work>, 2> in_flight;
    std::vector<int64_t> hashes;
    for (int64_t k = 0; k < plan_.num_buckets(); ++k) {
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
    if (dtype == torch::kFloat32) {
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
