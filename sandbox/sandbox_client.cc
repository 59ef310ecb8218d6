#include "sandbox/sandbox_client.h"

#include <cmath>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "common/server.h"
#include "sandbox/sandbox_convert.h"

namespace lockstep::sandbox {
namespace {

absl::Status ValidateOptions(const SandboxClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("sandbox client: address is empty");
  if (options.deadline_margin.count() <= 0) {
    return absl::InvalidArgumentError("sandbox client: deadline_margin must be > 0");
  }
  if (options.compile_allowance.count() < 0) {
    return absl::InvalidArgumentError("sandbox client: compile_allowance must be >= 0");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("sandbox client: max_attempts must be >= 1");
  }
  if (options.initial_backoff.count() < 0) {
    return absl::InvalidArgumentError("sandbox client: initial_backoff must be >= 0");
  }
  if (!(options.backoff_multiplier >= 1)) {
    return absl::InvalidArgumentError("sandbox client: backoff_multiplier must be >= 1");
  }
  return absl::OkStatus();
}

// Worth another attempt: the service is down or restarting, or its queue is full. Anything else
// (a wrong token, a bad request, a program past its deadline) would fail the same way again.
bool IsRetryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SandboxClient>> SandboxClient::Create(SandboxClientOptions options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  std::unique_ptr<v1::Sandbox::Stub> stub =
      v1::Sandbox::NewStub(MakeChannel(options.address, options.tls_ca_file));
  return std::unique_ptr<SandboxClient>(new SandboxClient(std::move(options), std::move(stub)));
}

absl::StatusOr<ExecResult> SandboxClient::Execute(const ExecRequest& request) {
  v1::ExecuteRequest proto;
  ToProto(request, &proto);
  std::chrono::milliseconds deadline =
      std::chrono::milliseconds(request.limits.wall_ms) + options_.deadline_margin;
  if (request.language == "cpp") deadline += options_.compile_allowance;

  grpc::Status status;
  int num_attempts = 0;
  while (true) {
    ++num_attempts;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    AttachAuthToken(&context, options_.auth_token);
    v1::ExecuteResponse response;
    status = stub_->Execute(&context, proto, &response);
    if (status.ok()) {
      absl::StatusOr<ExecResult> result = FromProto(response);
      if (!result.ok()) {
        return absl::InternalError(
            absl::StrCat("sandbox service ", options_.address, ": ", result.status().message()));
      }
      return result;
    }
    if (!IsRetryable(status.error_code()) || num_attempts >= options_.max_attempts) break;
    const double wait_ms = static_cast<double>(options_.initial_backoff.count()) *
                           std::pow(options_.backoff_multiplier, num_attempts - 1);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait_ms));
  }
  return FromGrpcStatus(status, absl::StrCat("sandbox service ", options_.address, " (after ",
                                              num_attempts,
                                              num_attempts == 1 ? " attempt)" : " attempts)"));
}

absl::StatusOr<std::shared_ptr<Executor>> ConnectSandbox(const std::string& address,
                                                         const std::string& auth_token) {
  SandboxClientOptions options;
  options.address = address;
  options.auth_token = auth_token;
  absl::StatusOr<std::unique_ptr<SandboxClient>> client = SandboxClient::Create(options);
  if (!client.ok()) return client.status();
  return std::shared_ptr<Executor>(*std::move(client));
}

}  // namespace lockstep::sandbox
