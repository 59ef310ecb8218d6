// Conversions between lockstep.v1 generator messages and the engine's structs (status codes go
// through common/grpc_status.h).
#ifndef LOCKSTEP_GENERATOR_GENERATOR_CONVERT_H_
#define LOCKSTEP_GENERATOR_GENERATOR_CONVERT_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "generator/engine.h"
#include "generator/engine_loop.h"
#include "proto/generator.pb.h"

namespace lockstep::generator {

// Returns the engine request for `proto`. Unset temperature / top_p mean 1.0, n 0 means 1;
// `eos_token_id` (the model's) stops a sample unless sampling.ignore_eos. Range checks are the
// engine's (AddRequest); this only rejects what the engine cannot see: InvalidArgument for
// unknown fields in `sampling` (a client newer than the server) or a negative n.
absl::StatusOr<Request> FromProto(const v1::GenerateRequest& proto,
                                  std::optional<int64_t> eos_token_id);

void ToProto(const SampleOutput& sample, v1::GenerateResponse* proto);
void ToProto(const EngineLoopStatus& status, v1::GetStatusResponse* proto);
v1::FinishReason ToProto(FinishReason reason);


}  // namespace lockstep::generator

#endif  // LOCKSTEP_GENERATOR_GENERATOR_CONVERT_H_
