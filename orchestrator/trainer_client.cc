#include "orchestrator/trainer_client.h"

#include <utility>

namespace lockstep::orchestrator {

TrainerClient::TrainerClient(std::string address, std::string auth_token, std::string tls_ca_file)
    : ServiceClient("trainer", std::move(address), std::move(auth_token), tls_ca_file) {}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::TrainStep(
    const v1::TrainStepRequest& request, absl::Duration timeout) {
  return channel().Call(&v1::Trainer::Stub::TrainStep, "TrainStep", request, timeout);
}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::SftStep(const v1::SftStepRequest& request,
                                                             absl::Duration timeout) {
  return channel().Call(&v1::Trainer::Stub::SftStep, "SftStep", request, timeout);
}

absl::StatusOr<v1::SaveCheckpointResponse> TrainerClient::SaveCheckpoint(
    const std::string& data_cursor, bool background, absl::Duration timeout) {
  v1::SaveCheckpointRequest request;
  request.set_data_cursor(data_cursor);
  request.set_background(background);
  return channel().Call(&v1::Trainer::Stub::SaveCheckpoint, "SaveCheckpoint", request, timeout);
}

absl::StatusOr<v1::WeightSyncResponse> TrainerClient::PublishWeights(int64_t version,
                                                                     absl::Duration timeout) {
  return CallWithVersion(&v1::Trainer::Stub::PublishWeights, "PublishWeights", version, timeout);
}

}  // namespace lockstep::orchestrator
