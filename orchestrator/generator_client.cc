#include "orchestrator/generator_client.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "common/server.h"

namespace lockstep::orchestrator {
namespace {

// One streaming Generate call; deletes itself when the call is done.
class GenerateCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateCall(std::string what, int64_t num_samples, GenerateDone done)
      : what_(std::move(what)), num_samples_(num_samples), done_(std::move(done)) {}

  grpc::ClientContext* context() { return &context_; }
  v1::GenerateRequest* request() { return &request_; }

  void Start() {
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    samples_.push_back(std::move(response_));
    response_.Clear();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::Status result = FromGrpcStatus(status, what_);
    if (result.ok() && static_cast<int64_t>(samples_.size()) != num_samples_) {
      result = absl::InternalError(absl::StrCat(what_, ": stream ended after ", samples_.size(),
                                                " of ", num_samples_, " samples"));
    }
    if (result.ok()) {
      std::sort(samples_.begin(), samples_.end(),
                [](const v1::GenerateResponse& a, const v1::GenerateResponse& b) {
                  return a.sample_index() < b.sample_index();
                });
      done_(std::move(samples_));
    } else {
      done_(result);
    }
    delete this;
  }

 private:
  const std::string what_;
  const int64_t num_samples_;
  GenerateDone done_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  std::vector<v1::GenerateResponse> samples_;
};

}  // namespace

GeneratorClient::GeneratorClient(std::string address, std::string auth_token,
                                 std::string tls_ca_file)
    : address_(std::move(address)),
      auth_token_(std::move(auth_token)),
      stub_(v1::Generator::NewStub(MakeChannel(address_, tls_ca_file))) {}

void GeneratorClient::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  AttachAuthToken(context, auth_token_);
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

void GeneratorClient::GenerateAsync(const v1::GenerateRequest& request, absl::Duration timeout,
                                    GenerateDone done) {
  auto* call = new GenerateCall(absl::StrCat("generator ", address_, " Generate"),
                                std::max<int64_t>(request.n(), 1), std::move(done));
  *call->request() = request;
  Prepare(call->context(), timeout);
  stub_->async()->Generate(call->context(), call->request(), call);
  call->Start();
}

absl::StatusOr<std::vector<v1::GenerateResponse>> GeneratorClient::Generate(
    const v1::GenerateRequest& request, absl::Duration timeout) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<absl::StatusOr<std::vector<v1::GenerateResponse>>> result;
  GenerateAsync(request, timeout, [&](absl::StatusOr<std::vector<v1::GenerateResponse>> r) {
    std::lock_guard<std::mutex> lock(mu);
    result = std::move(r);
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return result.has_value(); });
  return *std::move(result);
}

absl::StatusOr<v1::GetStatusResponse> GeneratorClient::GetStatus(absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::GetStatusResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->GetStatus(&context, v1::GetStatusRequest(), &response),
                     absl::StrCat("generator ", address_, " GetStatus"));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::JoinWeightSyncResponse> GeneratorClient::JoinWeightSync(
    const v1::JoinWeightSyncRequest& request, absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::JoinWeightSyncResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->JoinWeightSync(&context, request, &response),
                     absl::StrCat("generator ", address_, " JoinWeightSync"));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::WeightSyncResponse> GeneratorClient::ReceiveWeights(int64_t version,
                                                                       absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::ReceiveWeightsRequest request;
  request.set_version(version);
  v1::WeightSyncResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->ReceiveWeights(&context, request, &response),
                     absl::StrCat("generator ", address_, " ReceiveWeights"));
  if (!status.ok()) return status;
  return response;
}

}  // namespace lockstep::orchestrator
