#include "rewards/environment_client.h"

#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "rewards/environment_convert.h"
#include "rewards/rpc_retry.h"

namespace lockstep::rewards {
namespace {

// A Step that may have reached the server is not repeated (see the header).
bool IsStepRetryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EnvironmentClient>> EnvironmentClient::Create(
    EnvironmentClientOptions options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("environment client: address is empty");
  }
  if (options.deadline.count() <= 0) {
    return absl::InvalidArgumentError("environment client: deadline must be > 0");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("environment client: max_attempts must be >= 1");
  }
  if (options.initial_backoff.count() < 0) {
    return absl::InvalidArgumentError("environment client: initial_backoff must be >= 0");
  }
  if (!(options.backoff_multiplier >= 1)) {
    return absl::InvalidArgumentError("environment client: backoff_multiplier must be >= 1");
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeRetryFriendlyChannel(options.address, options.tls_ca_file);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Environment::NewStub(*std::move(channel));
  return std::unique_ptr<EnvironmentClient>(
      new EnvironmentClient(std::move(options), std::move(stub)));
}

EnvironmentClient::EnvironmentClient(EnvironmentClientOptions options,
                                     std::unique_ptr<v1::Environment::Stub> stub)
    : options_(std::move(options)), stub_(std::move(stub)) {}

std::string EnvironmentClient::name() const {
  return absl::StrCat("environment server ", options_.address);
}

grpc::Status EnvironmentClient::CallWithRetries(
    const std::function<grpc::Status(grpc::ClientContext*)>& attempt,
    bool (*retryable)(grpc::StatusCode), const std::function<void()>& before_retry) {
  grpc::Status status;
  for (int num_attempts = 1;; ++num_attempts) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.deadline);
    AttachAuthToken(&context, options_.auth_token);
    ++rpcs_;
    if (num_attempts > 1) ++retries_;
    status = attempt(&context);
    if (status.ok()) return status;
    ++rpcs_failed_;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) ++deadline_exceeded_;
    if (!retryable(status.error_code()) || num_attempts >= options_.max_attempts) return status;
    std::this_thread::sleep_for(
        Backoff(options_.initial_backoff, options_.backoff_multiplier, num_attempts));
    if (before_retry) before_retry();
  }
}

absl::StatusOr<ResetResult> EnvironmentClient::Reset(const EpisodeStart& start) {
  v1::ResetRequest request;
  ToProto(start, &request);
  v1::ResetResponse response;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) { return stub_->Reset(context, request, &response); },
      &IsRetryable,
      // The lost attempt may have created the episode; a retry must not meet ALREADY_EXISTS.
      [&] { Close(start.episode_id).IgnoreError(); });
  if (!status.ok()) {
    return FromGrpcStatus(status, absl::StrCat(name(), ": Reset of episode ", start.episode_id));
  }
  return FromProto(response);
}

absl::StatusOr<StepResult> EnvironmentClient::Step(const StepInput& input) {
  v1::StepRequest request;
  ToProto(input, &request);
  v1::StepResponse response;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) { return stub_->Step(context, request, &response); },
      &IsStepRetryable, nullptr);
  if (!status.ok()) {
    return FromGrpcStatus(status, absl::StrCat(name(), ": Step of episode ", input.episode_id));
  }
  if (response.has_error()) {
    ++step_errors_;
    return absl::AbortedError(absl::StrCat(name(), ": Step of episode ", input.episode_id,
                                           " failed: ", response.error()));
  }
  if (!std::isfinite(response.reward())) {
    ++step_errors_;
    return absl::AbortedError(absl::StrCat(name(), ": Step of episode ", input.episode_id,
                                           " returned a non-finite reward ", response.reward()));
  }
  return FromProto(response);
}

absl::Status EnvironmentClient::Close(absl::string_view episode_id) {
  v1::CloseRequest request;
  request.set_episode_id(std::string(episode_id));
  v1::CloseResponse response;
  grpc::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) { return stub_->Close(context, request, &response); },
      &IsRetryable, nullptr);
  return FromGrpcStatus(status, absl::StrCat(name(), ": Close of episode ", episode_id));
}

EnvironmentClientMetrics EnvironmentClient::metrics() const {
  EnvironmentClientMetrics metrics;
  metrics.rpcs = rpcs_.load();
  metrics.retries = retries_.load();
  metrics.rpcs_failed = rpcs_failed_.load();
  metrics.deadline_exceeded = deadline_exceeded_.load();
  metrics.step_errors = step_errors_.load();
  return metrics;
}

}  // namespace lockstep::rewards
