#include "rewards/reward_convert.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::rewards {

RewardInput FromProto(const v1::RewardItem& item) {
  RewardInput input;
  input.prompt = item.prompt();
  input.completion = item.completion();
  input.completion_token_ids.assign(item.completion_token_ids().begin(),
                                    item.completion_token_ids().end());
  input.reference = item.reference_answer();
  input.metadata.insert(item.metadata().begin(), item.metadata().end());
  return input;
}

void ToProto(const RewardInput& input, absl::string_view id, v1::RewardItem* item) {
  item->Clear();
  item->set_id(std::string(id));
  item->set_prompt(input.prompt);
  item->set_completion(input.completion);
  item->mutable_completion_token_ids()->Add(input.completion_token_ids.begin(),
                                            input.completion_token_ids.end());
  item->set_reference_answer(input.reference);
  item->mutable_metadata()->insert(input.metadata.begin(), input.metadata.end());
}

void ToProto(absl::string_view id, const absl::StatusOr<RewardResult>& result,
             v1::ItemScore* score) {
  score->Clear();
  score->set_id(std::string(id));
  if (!result.ok()) {
    score->set_error(result.status().ToString());
    return;
  }
  if (!std::isfinite(result->reward)) {
    score->set_error(absl::StrCat("non-finite reward ", result->reward));
    return;
  }
  score->set_reward(result->reward);
  for (const auto& [name, value] : result->sub_scores) {
    (*score->mutable_sub_scores())[name] = value;
  }
}

}  // namespace lockstep::rewards
