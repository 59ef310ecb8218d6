#include "rewards/reward_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "rewards/reward_convert.h"

namespace lockstep::rewards {

RewardService::RewardService(std::unique_ptr<Reward> reward, RewardServiceOptions options)
    : reward_(std::move(reward)), options_(std::move(options)) {}

grpc::ServerUnaryReactor* RewardService::Score(grpc::CallbackServerContext* context,
                                               const v1::ScoreRequest* request,
                                               v1::ScoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  if (options_.max_batch_size != 0 &&
      static_cast<size_t>(request->items_size()) > options_.max_batch_size) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("batch of ", request->items_size(),
                                  " items exceeds the limit of ", options_.max_batch_size)));
    return reactor;
  }
  response->mutable_scores()->Reserve(request->items_size());
  for (const v1::RewardItem& item : request->items()) {
    ToProto(item.id(), reward_->Score(FromProto(item)), response->add_scores());
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace lockstep::rewards
