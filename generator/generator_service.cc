#include "generator/generator_service.h"

#include <deque>
#include <memory>
#include <mutex>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/grpc_status.h"
#include "generator/generator_convert.h"
#include "model/safetensors.h"
#include "weight_sync/weights_digest.h"

namespace lockstep::generator {
namespace {

// One Generate stream. Samples arrive from the loop thread; gRPC allows one write in flight, so
// they queue here. Every decision is made under `mu`; StartWrite / Finish are called after
// unlocking (a reaction may run inline), which is safe because the reactor cannot be done
// before Finish, and only the thread that set `finish_called` calls it.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(EngineLoop* loop, absl::StatusOr<Request> request)
      : loop_(loop), stream_(std::make_shared<Stream>()) {
    stream_->reactor = this;
    if (!request.ok()) {
      stream_->finish_called = true;
      Finish(ToGrpcStatus(request.status()));
      return;
    }
    std::shared_ptr<Stream> stream = stream_;
    RequestCallbacks callbacks;
    callbacks.on_sample = [stream](SampleOutput sample) {
      auto response = std::make_unique<v1::GenerateResponse>();
      ToProto(sample, response.get());
      std::unique_lock<std::mutex> lock(stream->mu);
      stream->pending.push_back(std::move(response));
      Act(stream.get(), lock);
    };
    callbacks.on_done = [stream](absl::Status status) {
      std::unique_lock<std::mutex> lock(stream->mu);
      stream->done_status = ToGrpcStatus(status);
      stream->done = true;
      Act(stream.get(), lock);
    };
    ticket_ = loop_->Submit(*std::move(request), std::move(callbacks));
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(stream_->mu);
    stream_->write_in_flight = false;
    if (!ok) stream_->cancelled = true;
    Act(stream_.get(), lock);
  }

  void OnCancel() override {
    {
      std::unique_lock<std::mutex> lock(stream_->mu);
      stream_->cancelled = true;
      Act(stream_.get(), lock);
    }
    if (ticket_ >= 0) loop_->Cancel(ticket_);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(stream_->mu);
      stream_->reactor = nullptr;
    }
    delete this;
  }

 private:
  struct Stream {
    std::mutex mu;
    GenerateReactor* reactor = nullptr;  // null once done
    std::deque<std::unique_ptr<v1::GenerateResponse>> pending;
    std::unique_ptr<v1::GenerateResponse> writing;  // must live until OnWriteDone
    bool write_in_flight = false;
    bool done = false;
    grpc::Status done_status;
    bool cancelled = false;
    bool finish_called = false;
  };

  // Starts the next write, or finishes when everything is written (or the call is cancelled).
  // Called with `lock` held; releases it.
  static void Act(Stream* stream, std::unique_lock<std::mutex>& lock) {
    GenerateReactor* reactor = stream->reactor;
    if (reactor == nullptr || stream->finish_called || stream->write_in_flight) return;
    if (!stream->cancelled && !stream->pending.empty()) {
      stream->writing = std::move(stream->pending.front());
      stream->pending.pop_front();
      stream->write_in_flight = true;
      const v1::GenerateResponse* message = stream->writing.get();
      lock.unlock();
      reactor->StartWrite(message);
      return;
    }
    if (stream->cancelled || stream->done) {
      stream->finish_called = true;
      grpc::Status status = stream->cancelled
                                ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                                : stream->done_status;
      lock.unlock();
      reactor->Finish(status);
    }
  }

  EngineLoop* const loop_;
  const std::shared_ptr<Stream> stream_;
  int64_t ticket_ = -1;
};

}  // namespace

GeneratorService::GeneratorService(EngineLoop* loop, GeneratorServiceOptions options)
    : loop_(loop), options_(std::move(options)) {}

grpc::ServerWriteReactor<v1::GenerateResponse>* GeneratorService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (!auth.ok()) {
    return new GenerateReactor(loop_, absl::UnauthenticatedError(auth.error_message()));
  }
  return new GenerateReactor(loop_, FromProto(*request, options_.eos_token_id));
}

grpc::ServerUnaryReactor* GeneratorService::GetStatus(grpc::CallbackServerContext* context,
                                                      const v1::GetStatusRequest* request,
                                                      v1::GetStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (auth.ok()) {
    ToProto(loop_->status(), response);
    if (request->with_weights_sha256()) {
      // Hashes a snapshot of handles to the current weights, which a swap never changes in place.
      auto [version, weights] = loop_->WeightsSnapshot();
      response->set_weights_sha256(weight_sync::WeightsSha256(weights));
      response->set_weights_sha256_version(version);
    }
  }
  reactor->Finish(auth);
  return reactor;
}

GeneratorService::~GeneratorService() = default;

void GeneratorService::RunSyncCall(grpc::ServerUnaryReactor* reactor,
                                   std::function<absl::Status()> work) {
  // The collectives block for up to the group's timeout: never on a gRPC callback thread.
  auto run = [this, reactor, work = std::move(work)] {
    {
      // The previous call's thread clears sync_busy_ just after it finishes its RPC, so the
      // orchestrator's next call (Join, then at once ReceiveWeights) may arrive a moment early:
      // wait a little for it instead of refusing.
      std::unique_lock<std::mutex> lock(sync_mu_);
      if (!sync_idle_.wait_for(lock, std::chrono::seconds(5),
                               [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !sync_busy_; })) {
        lock.unlock();
        reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
            "another weight-sync call (JoinWeightSync/ReceiveWeights) is in progress")));
        return;
      }
      sync_busy_ = true;
    }
    const absl::Status status = work();
    reactor->Finish(ToGrpcStatus(status));
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      sync_busy_ = false;
    }
    sync_idle_.notify_all();
  };
  if (!sync_threads_.TrySubmit(std::move(run))) {
    reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
        "another weight-sync call (JoinWeightSync/ReceiveWeights) is in progress, and one more "
        "waits for it")));
  }
}

grpc::ServerUnaryReactor* GeneratorService::JoinWeightSync(grpc::CallbackServerContext* context,
                                                           const v1::JoinWeightSyncRequest* request,
                                                           v1::JoinWeightSyncResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  RunSyncCall(reactor, [this, request, response] { return DoJoin(*request, response); });
  return reactor;
}

grpc::ServerUnaryReactor* GeneratorService::ReceiveWeights(grpc::CallbackServerContext* context,
                                                           const v1::ReceiveWeightsRequest* request,
                                                           v1::WeightSyncResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status auth = CheckAuth(*context, options_.auth_token);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  RunSyncCall(reactor, [this, request, response] { return DoReceive(*request, response); });
  return reactor;
}

absl::Status GeneratorService::DoJoin(const v1::JoinWeightSyncRequest& request,
                                      v1::JoinWeightSyncResponse* response) {
  if (options_.weight_manifest.entries.empty()) {
    return absl::FailedPreconditionError("this generator was started without a weight manifest");
  }
  if (request.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: a generator is rank >= 1 (0 is the trainer), got ", request.rank()));
  }
  if (request.timeout_ms() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout_ms must be >= 0, got ", request.timeout_ms()));
  }
  weight_sync::GroupOptions options;
  options.store_host = request.store_host().empty() ? "127.0.0.1" : request.store_host();
  options.store_port = request.store_port();
  options.rank = request.rank();
  options.world_size = request.world_size();
  if (!request.group_name().empty()) options.group_name = request.group_name();
  if (request.timeout_ms() > 0) options.timeout = std::chrono::milliseconds(request.timeout_ms());
  if (request.bucket_bytes() != 0) options.bucket_bytes = request.bucket_bytes();
  options.verify = request.verify();
  options.transport = static_cast<weight_sync::Transport>(request.transport());
  options.cuda_device = options_.weight_cuda_device;
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  // A re-formed group replaces the old one (a broken one is abandoned) and keeps its staging
  // buffers: the sync that follows a restart elsewhere then faults in no fresh memory here.
  std::vector<torch::Tensor> staging;
  if (group_ != nullptr) staging = group_->TakeStagingBuffers();
  group_.reset();
  absl::StatusOr<std::unique_ptr<weight_sync::WeightSyncGroup>> group =
      weight_sync::WeightSyncGroup::Join(options, options_.weight_manifest);
  if (!group.ok()) return group.status();
  group_ = *std::move(group);
  group_->AdoptStagingBuffers(std::move(staging));
  response->set_num_parameters(static_cast<int64_t>(group_->manifest().entries.size()));
  response->set_num_buckets(group_->num_buckets());
  response->set_total_bytes(group_->total_bytes());
  return absl::OkStatus();
}

absl::Status GeneratorService::DoReceive(const v1::ReceiveWeightsRequest& request,
                                         v1::WeightSyncResponse* response) {
  if (group_ == nullptr) {
    return absl::FailedPreconditionError("no weight-sync group: call JoinWeightSync first");
  }
  // The engine keeps generating meanwhile: Receive fills a staging copy, not the model.
  absl::StatusOr<TensorMap> staged = group_->Receive(request.version(), options_.weight_dtype);
  if (!staged.ok()) return staged.status();
  const double seconds = group_->last_seconds();
  absl::StatusOr<double> pause_ms = loop_->SwapWeights(*std::move(staged), request.version());
  if (!pause_ms.ok()) return pause_ms.status();
  response->set_version(request.version());
  response->set_bytes(group_->total_bytes());
  response->set_seconds(seconds);
  response->set_swap_pause_ms(*pause_ms);
  return absl::OkStatus();
}

}  // namespace lockstep::generator
