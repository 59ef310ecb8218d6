// The orchestrator's client of a trainer service (lockstep.v1.Trainer): one method per RPC,
// each with the job's auth token and a deadline, returning absl::Status errors that name the
// trainer's address and the RPC ("trainer 127.0.0.1:4101 TrainStep: ...").
//
// Thread safety: all methods are thread-safe (a gRPC stub is); calls may run concurrently, e.g.
// PublishWeights on one thread while the generators' ReceiveWeights run on others.
#ifndef LOCKSTEP_ORCHESTRATOR_TRAINER_CLIENT_H_
#define LOCKSTEP_ORCHESTRATOR_TRAINER_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/service_client.h"
#include "proto/trainer.grpc.pb.h"

namespace lockstep::orchestrator {

// GetStatus, JoinWeightSync and address() are ServiceClient's.
class TrainerClient final
    : public ServiceClient<v1::Trainer, v1::TrainerStatusRequest, v1::TrainerStatusResponse> {
 public:
  // Connects lazily to `address` ("host:port"); `auth_token` may be empty (auth off).
  TrainerClient(std::string address, std::string auth_token, std::string tls_ca_file = "");

  absl::StatusOr<v1::TrainStepResponse> TrainStep(const v1::TrainStepRequest& request,
                                                  absl::Duration timeout = absl::Minutes(10));
  absl::StatusOr<v1::TrainStepResponse> SftStep(const v1::SftStepRequest& request,
                                                absl::Duration timeout = absl::Minutes(10));
  // `background`: answered once the trainer has copied its state (SaveCheckpointRequest).
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(
      const std::string& data_cursor, bool background = false,
      absl::Duration timeout = absl::Minutes(5));
  absl::StatusOr<v1::WeightSyncResponse> PublishWeights(int64_t version, absl::Duration timeout);
};

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_TRAINER_CLIENT_H_
