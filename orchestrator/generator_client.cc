#include "orchestrator/generator_client.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

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
    : ServiceClient("generator", std::move(address), std::move(auth_token), tls_ca_file) {}

void GeneratorClient::GenerateAsync(const v1::GenerateRequest& request, absl::Duration timeout,
                                    GenerateDone done) {
  auto* call = new GenerateCall(channel().What("Generate"), std::max<int64_t>(request.n(), 1),
                                std::move(done));
  *call->request() = request;
  channel().Prepare(call->context(), timeout);
  channel().stub()->async()->Generate(call->context(), call->request(), call);
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

absl::StatusOr<v1::WeightSyncResponse> GeneratorClient::ReceiveWeights(int64_t version,
                                                                       absl::Duration timeout) {
  return CallWithVersion(&v1::Generator::Stub::ReceiveWeights, "ReceiveWeights", version, timeout);
}

}  // namespace lockstep::orchestrator
