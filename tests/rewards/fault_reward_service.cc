#include "tests/rewards/fault_reward_service.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "common/auth.h"

namespace lockstep::rewards::testing {

grpc::Status FaultRewardService::Score(grpc::ServerContext* context,
                                       const v1::ScoreRequest* request,
                                       v1::ScoreResponse* response) {
  if (grpc::Status auth = CheckAuth(*context, options_.token); !auth.ok()) return auth;
  const int call_index = num_calls_++;
  if (options_.die_after_calls >= 0 && call_index >= options_.die_after_calls) {
    kill(getpid(), SIGKILL);
  }
  num_items_ += request->items_size();
  const int now_concurrent = ++concurrent_;
  int seen = max_concurrent_.load();
  while (now_concurrent > seen && !max_concurrent_.compare_exchange_weak(seen, now_concurrent)) {
  }
  if (options_.delay.count() > 0) std::this_thread::sleep_for(options_.delay);
  --concurrent_;
  if (call_index < options_.fail_first_calls) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected: warming up");
  }
  const int num_scores = request->items_size() - (options_.drop_last_score ? 1 : 0);
  for (int i = 0; i < num_scores; ++i) {
    const v1::RewardItem& item = request->items(i);
    v1::ItemScore* score = response->add_scores();
    score->set_id(item.id());
    if (item.completion() == "fail") {
      score->set_error("injected item error");
      continue;
    }
    score->set_reward(std::strtod(item.completion().c_str(), nullptr));
    (*score->mutable_sub_scores())["length"] = static_cast<double>(item.completion().size());
  }
  return grpc::Status::OK;
}

}  // namespace lockstep::rewards::testing
