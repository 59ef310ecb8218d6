#include "rewards/environment_service.h"

#include <utility>

#include "common/auth.h"
#include "common/grpc_status.h"
#include "rewards/environment_convert.h"

namespace lockstep::rewards {
namespace {

bool IsCallerMistake(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsAlreadyExists(status) ||
         absl::IsInvalidArgument(status);
}

// The caller's mistakes keep their code; anything else is the environment's failure (INTERNAL,
// so that a client never retries it).
grpc::Status Answer(const absl::Status& status) {
  if (status.ok() || IsCallerMistake(status)) return ToGrpcStatus(status);
  return ToGrpcStatus(absl::InternalError(status.ToString()));
}

}  // namespace

EnvironmentService::EnvironmentService(std::unique_ptr<Environment> environment,
                                       EnvironmentServiceOptions options)
    : environment_(std::move(environment)), options_(std::move(options)) {}

grpc::ServerUnaryReactor* EnvironmentService::Reset(grpc::CallbackServerContext* context,
                                                    const v1::ResetRequest* request,
                                                    v1::ResetResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  absl::StatusOr<ResetResult> result = environment_->Reset(FromProto(*request));
  if (!result.ok()) {
    reactor->Finish(Answer(result.status()));
    return reactor;
  }
  ToProto(*result, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* EnvironmentService::Step(grpc::CallbackServerContext* context,
                                                   const v1::StepRequest* request,
                                                   v1::StepResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  absl::StatusOr<StepResult> result = environment_->Step(FromProto(*request));
  if (!result.ok()) {
    if (IsCallerMistake(result.status())) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return reactor;
    }
    response->set_error(result.status().ToString());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  ToProto(*result, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* EnvironmentService::Close(grpc::CallbackServerContext* context,
                                                    const v1::CloseRequest* request,
                                                    v1::CloseResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  reactor->Finish(Answer(environment_->Close(request->episode_id())));
  return reactor;
}

}  // namespace lockstep::rewards
