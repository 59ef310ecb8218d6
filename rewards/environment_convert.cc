#include "rewards/environment_convert.h"

#include <string>

namespace lockstep::rewards {

Observation FromProto(const v1::Observation& proto) {
  Observation observation;
  observation.role = proto.role();
  if (proto.has_token_ids()) {
    observation.token_ids.emplace(proto.token_ids().ids().begin(), proto.token_ids().ids().end());
  } else {
    observation.text = proto.text();
  }
  return observation;
}

void ToProto(const Observation& observation, v1::Observation* proto) {
  proto->Clear();
  proto->set_role(observation.role);
  if (observation.token_ids) {
    proto->mutable_token_ids()->mutable_ids()->Add(observation.token_ids->begin(),
                                                   observation.token_ids->end());
  } else {
    proto->set_text(observation.text);
  }
}

EpisodeStart FromProto(const v1::ResetRequest& proto) {
  EpisodeStart start;
  start.episode_id = proto.episode_id();
  start.prompt = proto.prompt();
  for (const v1::ChatMessage& message : proto.messages()) {
    start.messages.emplace_back(message.role(), message.content());
  }
  start.reference = proto.reference_answer();
  start.metadata.insert(proto.metadata().begin(), proto.metadata().end());
  start.seed = proto.seed();
  return start;
}

void ToProto(const EpisodeStart& start, v1::ResetRequest* proto) {
  proto->Clear();
  proto->set_episode_id(start.episode_id);
  proto->set_prompt(start.prompt);
  for (const auto& [role, content] : start.messages) {
    v1::ChatMessage* message = proto->add_messages();
    message->set_role(role);
    message->set_content(content);
  }
  proto->set_reference_answer(start.reference);
  proto->mutable_metadata()->insert(start.metadata.begin(), start.metadata.end());
  proto->set_seed(start.seed);
}

ResetResult FromProto(const v1::ResetResponse& proto) {
  ResetResult result;
  if (proto.has_observation()) result.observation = FromProto(proto.observation());
  result.max_turns = proto.max_turns();
  return result;
}

void ToProto(const ResetResult& result, v1::ResetResponse* proto) {
  proto->Clear();
  ToProto(result.observation, proto->mutable_observation());
  proto->set_max_turns(result.max_turns);
}

StepInput FromProto(const v1::StepRequest& proto) {
  StepInput input;
  input.episode_id = proto.episode_id();
  input.action = proto.action();
  input.action_token_ids.assign(proto.action_token_ids().begin(), proto.action_token_ids().end());
  return input;
}

void ToProto(const StepInput& input, v1::StepRequest* proto) {
  proto->Clear();
  proto->set_episode_id(input.episode_id);
  proto->set_action(input.action);
  proto->mutable_action_token_ids()->Add(input.action_token_ids.begin(),
                                         input.action_token_ids.end());
}

StepResult FromProto(const v1::StepResponse& proto) {
  StepResult result;
  if (proto.has_observation()) result.observation = FromProto(proto.observation());
  result.reward = proto.reward();
  result.sub_scores.insert(proto.sub_scores().begin(), proto.sub_scores().end());
  result.done = proto.done();
  return result;
}

void ToProto(const StepResult& result, v1::StepResponse* proto) {
  proto->Clear();
  ToProto(result.observation, proto->mutable_observation());
  proto->set_reward(result.reward);
  proto->mutable_sub_scores()->insert(result.sub_scores.begin(), result.sub_scores.end());
  proto->set_done(result.done);
}

}  // namespace lockstep::rewards
