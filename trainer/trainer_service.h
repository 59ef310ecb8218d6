// gRPC adapter that serves a Trainer as lockstep.v1.Trainer (callback API). Each RPC converts
// the request (trainer_convert.h), calls the trainer, converts the result back and finishes.
//
// Threading: the Trainer is not thread-safe and its calls are long (a train step takes seconds),
// so every call that touches it (TrainStep, SftStep, ComputeLogprobs, SaveCheckpoint,
// JoinWeightSync, PublishWeights) is queued to one worker thread owned by the service and runs
// there in arrival order, off the gRPC callback threads. GetStatus answers at once from a
// snapshot taken after each call, so it stays responsive during a step; GetStatus with
// with_weights_sha256 is queued like the others (the digest reads the weights).
//
// Weight sync: JoinWeightSync forms the weight-sync group as rank 0 (the trainer hosts the
// store) with the manifest of Trainer::Parameters(); PublishWeights(v) broadcasts the fp32
// master weights when v is the trainer's current weight version (FailedPrecondition otherwise,
// or when no group was joined).
//
//   TrainerService service(trainer.get(), {.auth_token = token});
//   absl::StatusOr<RunningServer> running = StartServer({.port = 0}, {&service});
//   ...
//   running->server->Shutdown();  // before the service and the trainer go away
#ifndef LOCKSTEP_TRAINER_TRAINER_SERVICE_H_
#define LOCKSTEP_TRAINER_TRAINER_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "proto/trainer.grpc.pb.h"
#include "trainer/trainer.h"
#include "weight_sync/sync_group.h"

namespace lockstep::trainer {

struct TrainerServiceOptions {
  // When non-empty, every call must carry it (common/auth.h); others get UNAUTHENTICATED.
  std::string auth_token;
};

class TrainerService final : public v1::Trainer::CallbackService {
 public:
  // `trainer` is not owned; it must outlive the service, and nothing else may use it while the
  // service exists. Shut the server down before destroying the service: the destructor runs the
  // calls still queued, then joins the worker.
  TrainerService(Trainer* trainer, TrainerServiceOptions options);
  ~TrainerService() override;

  TrainerService(const TrainerService&) = delete;
  TrainerService& operator=(const TrainerService&) = delete;

  // One optimizer step; INVALID_ARGUMENT from the trainer (naming the rollout and the problem)
  // passes through, and the trainer is then unchanged.
  grpc::ServerUnaryReactor* TrainStep(grpc::CallbackServerContext* context,
                                      const v1::TrainStepRequest* request,
                                      v1::TrainStepResponse* response) override;
  grpc::ServerUnaryReactor* SftStep(grpc::CallbackServerContext* context,
                                    const v1::SftStepRequest* request,
                                    v1::TrainStepResponse* response) override;
  grpc::ServerUnaryReactor* ComputeLogprobs(grpc::CallbackServerContext* context,
                                            const v1::ComputeLogprobsRequest* request,
                                            v1::ComputeLogprobsResponse* response) override;
  grpc::ServerUnaryReactor* SaveCheckpoint(grpc::CallbackServerContext* context,
                                           const v1::SaveCheckpointRequest* request,
                                           v1::SaveCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::TrainerStatusRequest* request,
                                      v1::TrainerStatusResponse* response) override;
  // INVALID_ARGUMENT unless rank is 0 (the trainer) and world_size >= 1; the group errors of
  // weight_sync/sync_group.h otherwise. A successful join replaces any earlier group.
  grpc::ServerUnaryReactor* JoinWeightSync(grpc::CallbackServerContext* context,
                                           const v1::JoinWeightSyncRequest* request,
                                           v1::JoinWeightSyncResponse* response) override;
  grpc::ServerUnaryReactor* PublishWeights(grpc::CallbackServerContext* context,
                                           const v1::PublishWeightsRequest* request,
                                           v1::WeightSyncResponse* response) override;

 private:
  // What GetStatus reports; refreshed on the worker after every call.
  struct Snapshot {
    int64_t step = 0;
    int64_t weight_version = 0;
    std::string data_cursor;
    std::string resumed_from;
    int64_t num_parameters = 0;
  };

  // Checks auth, then queues `work` (which returns the call's status) to the worker; finishes
  // the call with its status.
  grpc::ServerUnaryReactor* Enqueue(grpc::CallbackServerContext* context,
                                    std::function<absl::Status()> work);
  void WorkerLoop();
  void RefreshSnapshot();  // on the worker

  Trainer* const trainer_;  // used on the worker thread only
  const TrainerServiceOptions options_;
  std::unique_ptr<weight_sync::WeightSyncGroup> sync_group_;  // worker thread only

  std::mutex snapshot_mu_;
  Snapshot snapshot_ ABSL_GUARDED_BY(snapshot_mu_);

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread worker_;  // last: starts after everything above is constructed
};

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_TRAINER_SERVICE_H_
