// gRPC adapter that serves one in-process reward (a built-in or any Reward) as
// lockstep.v1.Reward. Each RPC converts proto -> RewardInput, scores, converts back, finishes.
//
//   RewardService service(std::move(*CreateBuiltinReward("math")), {.token = "secret"});
//   grpc::ServerBuilder builder;
//   builder.AddListeningPort("127.0.0.1:50051", grpc::InsecureServerCredentials());
//   builder.RegisterService(&service);
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
#ifndef LOCKSTEP_REWARDS_REWARD_SERVICE_H_
#define LOCKSTEP_REWARDS_REWARD_SERVICE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "proto/reward.grpc.pb.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

struct RewardServiceOptions {
  // When non-empty, every call must carry call metadata "authorization: Bearer <token>";
  // others fail with UNAUTHENTICATED.
  std::string token;
  // Batches larger than this fail with INVALID_ARGUMENT (0: no limit).
  size_t max_batch_size = 4096;
};

class RewardService final : public v1::Reward::CallbackService {
 public:
  RewardService(std::unique_ptr<Reward> reward, RewardServiceOptions options);

  // Scores every item on the calling gRPC thread (built-ins take microseconds per item). An item
  // that fails, or whose reward is not finite, gets `error` set; the batch still succeeds.
  // Thread safety: called concurrently by gRPC; Reward::Score is thread-safe.
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const v1::ScoreRequest* request,
                                  v1::ScoreResponse* response) override;

 private:
  const std::unique_ptr<Reward> reward_;
  const RewardServiceOptions options_;
};

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_SERVICE_H_
