#include "orchestrator/trainer_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "common/server.h"

namespace lockstep::orchestrator {

TrainerClient::TrainerClient(std::string address, std::string auth_token, std::string tls_ca_file)
    : address_(std::move(address)),
      auth_token_(std::move(auth_token)),
      stub_(v1::Trainer::NewStub(MakeChannel(address_, tls_ca_file))) {}

void TrainerClient::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  AttachAuthToken(context, auth_token_);
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

absl::Status TrainerClient::Check(const grpc::Status& status, const char* rpc) const {
  return FromGrpcStatus(status, absl::StrCat("trainer ", address_, " ", rpc));
}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::TrainStep(
    const v1::TrainStepRequest& request, absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::TrainStepResponse response;
  absl::Status status = Check(stub_->TrainStep(&context, request, &response), "TrainStep");
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::TrainStepResponse> TrainerClient::SftStep(const v1::SftStepRequest& request,
                                                             absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::TrainStepResponse response;
  absl::Status status = Check(stub_->SftStep(&context, request, &response), "SftStep");
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::SaveCheckpointResponse> TrainerClient::SaveCheckpoint(
    const std::string& data_cursor, bool background, absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::SaveCheckpointRequest request;
  request.set_data_cursor(data_cursor);
  request.set_background(background);
  v1::SaveCheckpointResponse response;
  absl::Status status =
      Check(stub_->SaveCheckpoint(&context, request, &response), "SaveCheckpoint");
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::TrainerStatusResponse> TrainerClient::GetStatus(absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::TrainerStatusResponse response;
  absl::Status status =
      Check(stub_->GetStatus(&context, v1::TrainerStatusRequest(), &response), "GetStatus");
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::JoinWeightSyncResponse> TrainerClient::JoinWeightSync(
    const v1::JoinWeightSyncRequest& request, absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::JoinWeightSyncResponse response;
  absl::Status status =
      Check(stub_->JoinWeightSync(&context, request, &response), "JoinWeightSync");
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::WeightSyncResponse> TrainerClient::PublishWeights(int64_t version,
                                                                     absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::PublishWeightsRequest request;
  request.set_version(version);
  v1::WeightSyncResponse response;
  absl::Status status =
      Check(stub_->PublishWeights(&context, request, &response), "PublishWeights");
  if (!status.ok()) return status;
  return response;
}

}  // namespace lockstep::orchestrator
