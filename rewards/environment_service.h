// gRPC adapter that serves one in-process Environment (a built-in such as guess_number, or any
// rewards::Environment) as lockstep.v1.Environment. Each RPC converts proto -> struct, calls the
// environment, converts back, finishes.
//
// Status mapping: NotFound, AlreadyExists and InvalidArgument from the environment become the
// same gRPC codes (the caller's mistake); any other Step error is reported in
// StepResponse.error (the step could not be processed; the episode is failed), any other Reset
// or Close error as INTERNAL.
#ifndef LOCKSTEP_REWARDS_ENVIRONMENT_SERVICE_H_
#define LOCKSTEP_REWARDS_ENVIRONMENT_SERVICE_H_

#include <memory>
#include <string>

#include "proto/reward.grpc.pb.h"
#include "rewards/environment.h"

namespace lockstep::rewards {

struct EnvironmentServiceOptions {
  // When non-empty, every call must carry "authorization: Bearer <token>" (common/auth.h);
  // others fail with UNAUTHENTICATED.
  std::string token;
};

class EnvironmentService final : public v1::Environment::CallbackService {
 public:
  EnvironmentService(std::unique_ptr<Environment> environment, EnvironmentServiceOptions options);

  // Thread safety: called concurrently by gRPC; Environment implementations are thread-safe.
  grpc::ServerUnaryReactor* Reset(grpc::CallbackServerContext* context,
                                  const v1::ResetRequest* request,
                                  v1::ResetResponse* response) override;
  grpc::ServerUnaryReactor* Step(grpc::CallbackServerContext* context,
                                 const v1::StepRequest* request,
                                 v1::StepResponse* response) override;
  grpc::ServerUnaryReactor* Close(grpc::CallbackServerContext* context,
                                  const v1::CloseRequest* request,
                                  v1::CloseResponse* response) override;

 private:
  const std::unique_ptr<Environment> environment_;
  const EnvironmentServiceOptions options_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_ENVIRONMENT_SERVICE_H_
