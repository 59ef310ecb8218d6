// Conversions between lockstep.v1 trainer messages and the trainer library's structs (status
// codes go through common/grpc_status.h). The conversions are total: range and consistency
// checks are the library's (Trainer validates every batch), so that the error a client sees
// names the rollout index and the problem exactly as the library does.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_TRAINER_TRAINER_CONVERT_H_
#define LOCKSTEP_TRAINER_TRAINER_CONVERT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/trainer.pb.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {

// Rollouts in request order (loss_mask bools become 0/1 bytes; an empty mask stays empty).
std::vector<Rollout> FromProto(const v1::TrainStepRequest& proto);
std::vector<SftExample> FromProto(const v1::SftStepRequest& proto);

// The sequences of a ComputeLogprobs request and its temperature (0 means 1.0).
// InvalidArgument for a negative or non-finite temperature.
struct LogprobsQuery {
  std::vector<SftExample> sequences;
  double temperature = 1.0;
};
absl::StatusOr<LogprobsQuery> FromProto(const v1::ComputeLogprobsRequest& proto);

void ToProto(const StepMetrics& metrics, v1::StepMetrics* proto);
void ToProto(const ParityStats& parity, v1::ParityStats* proto);
void ToProto(const std::vector<std::vector<float>>& logprobs, v1::ComputeLogprobsResponse* proto);


}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_TRAINER_CONVERT_H_
