#include "sandbox/sandbox_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "sandbox/sandbox_convert.h"

namespace lockstep::sandbox {

absl::StatusOr<std::unique_ptr<SandboxService>> SandboxService::Create(
    std::shared_ptr<Executor> executor, SandboxServiceOptions options) {
  if (executor == nullptr) return absl::InvalidArgumentError("sandbox service: no executor");
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sandbox service: max_concurrency must be >= 1, got ", options.max_concurrency));
  }
  if (options.max_queue < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox service: max_queue must be >= 0, got ", options.max_queue));
  }
  return std::unique_ptr<SandboxService>(new SandboxService(std::move(executor), options));
}

SandboxService::SandboxService(std::shared_ptr<Executor> executor, SandboxServiceOptions options)
    : executor_(std::move(executor)),
      options_(std::move(options)),
      queue_({.num_workers = options_.max_concurrency, .max_queued = options_.max_queue}) {}

grpc::ServerUnaryReactor* SandboxService::Execute(grpc::CallbackServerContext* context,
                                                  const v1::ExecuteRequest* request,
                                                  v1::ExecuteResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  const auto accepted_at = std::chrono::steady_clock::now();
  const bool accepted = queue_.TrySubmit([this, context, request, response, reactor,
                                          accepted_at] {
    const double queue_ms = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - accepted_at)
                                .count();
    RunCall(context, request, response, reactor, queue_ms);
  });
  if (!accepted) {
    const WorkQueueStats stats = queue_.stats();
    reactor->Finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("sandbox busy: ", stats.running, " running and ", stats.queued,
                     " queued (max_concurrency ", options_.max_concurrency, ", max_queue ",
                     options_.max_queue, "); retry later")));
  }
  return reactor;
}

void SandboxService::RunCall(grpc::CallbackServerContext* context,
                             const v1::ExecuteRequest* request, v1::ExecuteResponse* response,
                             grpc::ServerUnaryReactor* reactor, double queue_ms) const {
  if (context->IsCancelled()) {  // the client gave up (or its deadline passed) while it waited
    reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while queued"));
    return;
  }
  absl::StatusOr<ExecResult> result = executor_->Execute(FromProto(*request));
  if (!result.ok()) {
    reactor->Finish(ToGrpcStatus(result.status()));
    return;
  }
  ToProto(*result, response);
  response->set_queue_ms(queue_ms);
  ++num_executed_;
  reactor->Finish(grpc::Status::OK);
}

}  // namespace lockstep::sandbox
