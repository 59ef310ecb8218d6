#include "trainer/trainer_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "trainer/trainer_convert.h"
#include "weight_sync/weights_digest.h"

namespace lockstep::trainer {
namespace {

constexpr int64_t kDefaultSyncTimeoutMs = 60000;
constexpr int64_t kDefaultSyncBucketBytes = int64_t{256} << 20;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TrainerService::TrainerService(Trainer* trainer, TrainerServiceOptions options)
    : trainer_(trainer), options_(std::move(options)) {
  RefreshSnapshot();  // before the worker starts: nothing else touches the trainer yet
  worker_ = std::thread([this] { WorkerLoop(); });
}

TrainerService::~TrainerService() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  worker_.join();
}

void TrainerService::WorkerLoop() {
  while (true) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

void TrainerService::RefreshSnapshot() {
  Snapshot snapshot;
  snapshot.step = trainer_->step();
  snapshot.weight_version = trainer_->weight_version();
  snapshot.data_cursor = trainer_->data_cursor();
  snapshot.resumed_from = trainer_->resumed_from();
  for (const auto& [name, tensor] : trainer_->Parameters())
    snapshot.num_parameters += tensor.numel();
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(snapshot);
}

grpc::ServerUnaryReactor* TrainerService::Enqueue(grpc::CallbackServerContext* context,
                                                  std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back([this, reactor, work = std::move(work)] {
      absl::Status status;
      try {
        status = work();
      } catch (const std::exception& error) {  // LibTorch throws c10::Error
        status = absl::InternalError(absl::StrCat("trainer: ", error.what()));
      }
      RefreshSnapshot();
      reactor->Finish(ToGrpcStatus(status));
    });
  }
  queue_cv_.notify_one();
  return reactor;
}

grpc::ServerUnaryReactor* TrainerService::TrainStep(grpc::CallbackServerContext* context,
                                                    const v1::TrainStepRequest* request,
                                                    v1::TrainStepResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    absl::StatusOr<StepMetrics> metrics =
        trainer_->TrainStep(FromProto(*request), request->mismatch_weights_dir());
    if (!metrics.ok()) return metrics.status();
    ToProto(*metrics, response->mutable_metrics());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TrainerService::SftStep(grpc::CallbackServerContext* context,
                                                  const v1::SftStepRequest* request,
                                                  v1::TrainStepResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    absl::StatusOr<StepMetrics> metrics = trainer_->SftStep(FromProto(*request));
    if (!metrics.ok()) return metrics.status();
    ToProto(*metrics, response->mutable_metrics());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TrainerService::ComputeLogprobs(grpc::CallbackServerContext* context,
                                                          const v1::ComputeLogprobsRequest* request,
                                                          v1::ComputeLogprobsResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    absl::StatusOr<LogprobsQuery> query = FromProto(*request);
    if (!query.ok()) return query.status();
    absl::StatusOr<std::vector<std::vector<float>>> logprobs =
        trainer_->ComputeLogprobs(query->sequences, query->temperature);
    if (!logprobs.ok()) return logprobs.status();
    ToProto(*logprobs, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TrainerService::SaveCheckpoint(grpc::CallbackServerContext* context,
                                                         const v1::SaveCheckpointRequest* request,
                                                         v1::SaveCheckpointResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    absl::StatusOr<std::string> path =
        trainer_->SaveCheckpoint(request->data_cursor(), request->background());
    if (!path.ok()) return path.status();
    response->set_path(*path);
    response->set_step(trainer_->step());
    const CheckpointTimes& times = trainer_->last_checkpoint_times();
    response->set_blocking_ms(times.blocking_ms);
    response->set_write_ms(times.write_ms.value_or(0));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TrainerService::GetStatus(grpc::CallbackServerContext* context,
                                                    const v1::TrainerStatusRequest* request,
                                                    v1::TrainerStatusResponse* response) {
  auto fill = [this, response] {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    response->set_step(snapshot_.step);
    response->set_weight_version(snapshot_.weight_version);
    response->set_data_cursor(snapshot_.data_cursor);
    response->set_resumed_from(snapshot_.resumed_from);
    response->set_num_parameters(snapshot_.num_parameters);
  };
  if (request->with_weights_sha256()) {
    // The digest reads the weights: on the worker, between calls, consistent with the snapshot.
    return Enqueue(context, [this, response, fill]() -> absl::Status {
      RefreshSnapshot();
      fill();
      response->set_weights_sha256(weight_sync::WeightsSha256(trainer_->Parameters()));
      return absl::OkStatus();
    });
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (auth.ok()) fill();
  reactor->Finish(auth);
  return reactor;
}

grpc::ServerUnaryReactor* TrainerService::JoinWeightSync(grpc::CallbackServerContext* context,
                                                         const v1::JoinWeightSyncRequest* request,
                                                         v1::JoinWeightSyncResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    if (request->rank() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank: the trainer is rank 0 of the weight-sync group, got ", request->rank()));
    }
    if (request->timeout_ms() < 0 || request->bucket_bytes() < 0) {
      return absl::InvalidArgumentError("timeout_ms and bucket_bytes must be >= 0 (0 = default)");
    }
    weight_sync::GroupOptions group_options;
    group_options.store_host = request->store_host();
    group_options.store_port = request->store_port();
    group_options.rank = 0;
    group_options.world_size = request->world_size();
    group_options.group_name = request->group_name();
    group_options.timeout = std::chrono::milliseconds(
        request->timeout_ms() == 0 ? kDefaultSyncTimeoutMs : request->timeout_ms());
    group_options.bucket_bytes =
        request->bucket_bytes() == 0 ? kDefaultSyncBucketBytes : request->bucket_bytes();
    group_options.verify = request->verify();
    group_options.transport = static_cast<weight_sync::Transport>(request->transport());
    // The group moves the trainer's own parameters: its device is theirs (-1: host memory, as
    // every trainer today), which decides what auto picks and which transports are allowed.
    const TensorMap parameters = trainer_->Parameters();
    absl::StatusOr<int> cuda_device = weight_sync::WeightsCudaDevice(parameters);
    if (!cuda_device.ok()) return cuda_device.status();
    group_options.cuda_device = *cuda_device;
    absl::Status valid = group_options.Validate();
    if (!valid.ok()) return valid;
    sync_group_.reset();  // leave the old group (if any) before re-forming
    absl::StatusOr<std::unique_ptr<weight_sync::WeightSyncGroup>> group =
        weight_sync::WeightSyncGroup::Join(group_options, weight_sync::ManifestOf(parameters));
    if (!group.ok()) return group.status();
    sync_group_ = *std::move(group);
    response->set_num_parameters(static_cast<int64_t>(sync_group_->manifest().entries.size()));
    response->set_num_buckets(sync_group_->num_buckets());
    response->set_total_bytes(sync_group_->total_bytes());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TrainerService::PublishWeights(grpc::CallbackServerContext* context,
                                                         const v1::PublishWeightsRequest* request,
                                                         v1::WeightSyncResponse* response) {
  return Enqueue(context, [this, request, response]() -> absl::Status {
    if (sync_group_ == nullptr) {
      return absl::FailedPreconditionError(
          "no weight-sync group: call JoinWeightSync before PublishWeights");
    }
    if (request->version() != trainer_->weight_version()) {
      return absl::FailedPreconditionError(
          absl::StrCat("version: the trainer holds weight version ", trainer_->weight_version(),
                       ", asked to publish ", request->version()));
    }
    const auto start = std::chrono::steady_clock::now();
    absl::Status sent = sync_group_->Send(trainer_->Parameters(), request->version());
    if (!sent.ok()) {
      if (sync_group_->broken()) sync_group_.reset();  // the orchestrator must re-form it
      return sent;
    }
    response->set_version(request->version());
    response->set_bytes(sync_group_->total_bytes());
    response->set_seconds(SecondsSince(start));
    return absl::OkStatus();
  });
}

}  // namespace lockstep::trainer
