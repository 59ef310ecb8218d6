#include "generator/generator_service.h"

#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "common/auth.h"
#include "generator/generator_convert.h"

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
  if (auth.ok()) ToProto(loop_->status(), response);
  reactor->Finish(auth);
  return reactor;
}

}  // namespace lockstep::generator
