#include "weight_sync/sync_group.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "weight_sync/bucket_transport.h"
#include "weight_sync/c10d_compat.h"
#include "weight_sync/gloo_transport.h"
#include "weight_sync/large_buffer.h"
#include "weight_sync/rendezvous.h"

namespace lockstep::weight_sync {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Where a rank of a group formed with `options` keeps its weights.
torch::Device WeightDevice(const GroupOptions& options) {
  if (options.cuda_device < 0) return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.cuda_device));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSyncGroup>> WeightSyncGroup::Join(const GroupOptions& options,
                                                                       const Manifest& manifest) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(manifest, options.bucket_bytes);
  if (!plan.ok()) return plan.status();
  auto group = std::unique_ptr<WeightSyncGroup>(new WeightSyncGroup(options, *std::move(plan)));
  // The transports keep a reference to the group's plan, which lives as long as they do.
  absl::StatusOr<Connection> connection = Rendezvous(options, group->plan_);
  if (!connection.ok()) return connection.status();
  group->connection_ = std::make_unique<Connection>(*std::move(connection));
  return group;
}

WeightSyncGroup::WeightSyncGroup(GroupOptions options, BucketPlan plan)
    : options_(std::move(options)), plan_(std::move(plan)) {}

WeightSyncGroup::~WeightSyncGroup() {
  // Gloo's workers may still sit in the failed collective (until its own timeout) and its pairs
  // to a dead peer are in an error state: never wait for them.
  if (broken_ && connection_ && connection_->control) connection_->control->Abandon();
}

Transport WeightSyncGroup::transport() const { return connection_->transport->kind(); }

torch::Tensor WeightSyncGroup::StagingBuffer() {
  for (const torch::Tensor& buffer : staging_buffers_) {
    if (buffer.storage().use_count() == 1) return buffer;  // every view of it was dropped
  }
  torch::Tensor buffer =
      options_.cuda_device < 0
          ? AllocateLargeBuffer(plan_.num_elements(), torch::kFloat32)
          : torch::empty({plan_.num_elements()},
                         torch::TensorOptions().dtype(torch::kFloat32).device(WeightDevice(options_)));
  if (staging_buffers_.size() < 2) staging_buffers_.push_back(buffer);
  return buffer;
}

void WeightSyncGroup::AdoptStagingBuffers(std::vector<torch::Tensor> buffers) {
  for (torch::Tensor& buffer : buffers) {
    if (staging_buffers_.size() < 2 && buffer.scalar_type() == torch::kFloat32 &&
        buffer.numel() == plan_.num_elements() && buffer.device() == WeightDevice(options_)) {
      staging_buffers_.push_back(std::move(buffer));
    }
  }
}

absl::Status WeightSyncGroup::Fail(absl::Status status) {
  broken_ = true;
  if (connection_ && connection_->transport) connection_->transport->Abort();
  return status;
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
    if (tensor.device() != WeightDevice(options_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weight sync Send: tensor '", name, "' is on ", tensor.device().str(),
          ", but the group was formed for weights on ", WeightDevice(options_).str(),
          " (cuda_device=", options_.cuda_device, ", transport=", TransportName(transport()),
          ")"));
    }
    flat.push_back(tensor.detach().reshape({-1}));
  }
  const Clock::time_point start = Clock::now();
  c10d_compat::CollectiveGroup& control = *connection_->control;
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor header = torch::tensor(
        std::vector<int64_t>{version, plan_.num_buckets(), plan_.total_bytes()}, torch::kInt64);
    if (absl::Status s =
            WaitCollective(options_, control, control.StartBroadcast(header), "version header");
        !s.ok()) {
      return Fail(s);
    }
    BucketSource source(plan_, std::move(flat), options_.verify);
    if (absl::Status s = connection_->transport->SendBuckets(source); !s.ok()) return Fail(s);
    if (options_.verify) {
      if (absl::Status s = VerifyHashes(source.hashes()); !s.ok()) return Fail(s);
    }
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat("weight sync Send: ", c10d_compat::ErrorText(e))));
  }
  last_seconds_ = SecondsSince(start);
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> WeightSyncGroup::Receive(int64_t expected_version, torch::Dtype dtype) {
  if (absl::Status s = CheckUsable("Receive", /*sender=*/false); !s.ok()) return s;
  if (!c10::isFloatingType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight sync Receive: dtype must be floating-point, got ", c10::toString(dtype)));
  }
  const Clock::time_point start = Clock::now();
  c10d_compat::CollectiveGroup& control = *connection_->control;
  TensorMap received;
  int64_t announced_version = 0;
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor header = torch::zeros({3}, torch::kInt64);
    if (absl::Status s =
            WaitCollective(options_, control, control.StartBroadcast(header), "version header");
        !s.ok()) {
      return Fail(s);
    }
    announced_version = header[0].item<int64_t>();
    if (header[1].item<int64_t>() != plan_.num_buckets() ||
        header[2].item<int64_t>() != plan_.total_bytes()) {
      return Fail(absl::DataLossError(
          absl::StrCat("weight sync Receive: rank 0 announced ", header[1].item<int64_t>(),
                       " buckets / ", header[2].item<int64_t>(), " bytes, the plan has ",
                       plan_.num_buckets(), " / ", plan_.total_bytes())));
    }
    BucketSink sink(plan_, dtype, dtype == torch::kFloat32 ? StagingBuffer() : torch::Tensor(),
                    options_.verify, WeightDevice(options_));
    if (absl::Status s = connection_->transport->ReceiveBuckets(sink); !s.ok()) return Fail(s);
    if (options_.verify) {
      if (absl::Status s = VerifyHashes(sink.hashes()); !s.ok()) return Fail(s);
    }
    received = sink.Finish();
  } catch (const std::exception& e) {
    return Fail(
        absl::InternalError(absl::StrCat("weight sync Receive: ", c10d_compat::ErrorText(e))));
  }
  last_seconds_ = SecondsSince(start);
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
  c10d_compat::CollectiveGroup& control = *connection_->control;
  if (absl::Status s = WaitCollective(options_, control, control.StartAllGather(gathered, local),
                                      "hash exchange");
      !s.ok()) {
    return s;
  }
  for (int r = 1; r < options_.world_size; ++r) {
    const int64_t* reference = gathered[0].data_ptr<int64_t>();
    const int64_t* other = gathered[r].data_ptr<int64_t>();
    for (int64_t k = 0; k < local.numel(); ++k) {
      if (reference[k] != other[k]) {
        return absl::DataLossError(absl::StrCat(
            "weight-sync group '", options_.group_name, "': bucket ", k, " of ", local.numel(),
            " arrived corrupted on rank ", r, " (hash differs from rank 0's)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::weight_sync
