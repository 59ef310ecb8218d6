// Conversions between the wire protocol (proto/reward.proto) and the reward library's structs.
// The only place in rewards/ besides service adapters that includes generated proto code.
#ifndef LOCKSTEP_REWARDS_REWARD_CONVERT_H_
#define LOCKSTEP_REWARDS_REWARD_CONVERT_H_

#include "absl/status/statusor.h"
#include "proto/reward.pb.h"
#include "rewards/reward.h"

namespace lockstep::rewards {

// Copies an item's prompt, completion (text and token ids), reference and metadata. The chat
// messages have no counterpart in RewardInput and are not copied.
RewardInput FromProto(const v1::RewardItem& item);

// Client side: writes `input` as the request item with id `id` (the inverse of FromProto).
void ToProto(const RewardInput& input, absl::string_view id, v1::RewardItem* item);

// Writes `result` (or, when it is an error or its reward is not finite, the error) into `score`
// for the item with id `id`. A non-finite reward becomes an error: it must never reach the
// advantage computation as a number.
void ToProto(absl::string_view id, const absl::StatusOr<RewardResult>& result,
             v1::ItemScore* score);

}  // namespace lockstep::rewards

#endif  // LOCKSTEP_REWARDS_REWARD_CONVERT_H_
