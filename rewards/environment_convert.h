// Conversions between the Environment messages of proto/reward.proto and the structs of
// rewards/environment.h, both directions (the service uses one, the client the other).
#ifndef LOCKSTEP_REWARDS_ENVIRONMENT_CONVERT_H_
#define LOCKSTEP_REWARDS_ENVIRONMENT_CONVERT_H_

#include "proto/reward.pb.h"
#include "rewards/environment.h"

namespace lockstep::rewards {

Observation FromProto(const v1::Observation& proto);
void ToProto(const Observation& observation, v1::Observation* proto);

EpisodeStart FromProto(const v1::ResetRequest& proto);
void ToProto(const EpisodeStart& start, v1::ResetRequest* proto);

ResetResult FromProto(const v1::ResetResponse& proto);
void ToProto(const ResetResult& result, v1::ResetResponse* proto);

StepInput FromProto(const v1::StepRequest& proto);
void ToProto(const StepInput& input, v1::StepRequest* proto);

// The `error` field is not read here: the client turns it into a status first.
StepResult FromProto(const v1::StepResponse& proto);
void ToProto(const StepResult& result, v1::StepResponse* proto);

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_ENVIRONMENT_CONVERT_H_
