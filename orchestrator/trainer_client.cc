#include "orchestrator/trainer_client.h"

#include <utility>

namespace lockstep::orchestrator {

TrainerClient::TrainerClient(std::string address, std::string auth_token, std::string tls_ca_file)
    : channel_("trainer", std::move(address), std::move(auth_token), tls_ca_file) {}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::TrainStep(
    const v1::TrainStepRequest& request, absl::Duration timeout) {
  return channel_.Call(&v1::Trainer::Stub::TrainStep, "TrainStep", request, timeout);
}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::SftStep(const v1::SftStepRequest& request,
                                                             absl::Duration timeout) {
  return channel_.Call(&v1::Trainer::Stub::SftStep, "SftStep", request, timeout);
}

absl::StatusOr<v1::SaveCheckpointResponse> TrainerClient::SaveCheckpoint(
    const std::string& data_cursor, bool background, absl::Duration timeout) {
  v1::SaveCheckpointRequest request;
  request.set_data_cursor(data_cursor);
  request.set_background(background);
  return channel_.Call(&v1::Trainer::Stub::SaveCheckpoint, "SaveCheckpoint", request, timeout);
}

absl::StatusOr<v1::TrainerStatusResponse> TrainerClient::GetStatus(absl::Duration timeout) {
  return channel_.Call(&v1::Trainer::Stub::GetStatus, "GetStatus", v1::TrainerStatusRequest(),
                       timeout);
}

absl::StatusOr<v1::JoinWeightSyncResponse> TrainerClient::JoinWeightSync(
    const v1::JoinWeightSyncRequest& request, absl::Duration timeout) {
  return channel_.Call(&v1::Trainer::Stub::JoinWeightSync, "JoinWeightSync", request, timeout);
}

absl::StatusOr<v1::WeightSyncResponse> TrainerClient::PublishWeights(int64_t version,
                                                                     absl::Duration timeout) {
  v1::PublishWeightsRequest request;
  request.set_version(version);
  return channel_.Call(&v1::Trainer::Stub::PublishWeights, "PublishWeights", request, timeout);
}

}  // namespace lockstep::orchestrator
