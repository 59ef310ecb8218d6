// The generated reward protocol code links and its messages round-trip through the wire format.
#include <string>

#include "gtest/gtest.h"
#include "proto/reward.grpc.pb.h"
#include "proto/reward.pb.h"

namespace lockstep::v1 {
namespace {

TEST(RewardProtoTest, ScoreRequestRoundTrips) {
  ScoreRequest request;
  RewardItem* item = request.add_items();
  item->set_id("item-0");
  item->set_prompt("What is 2+2?");
  ChatMessage* message = item->add_messages();
  message->set_role("user");
  message->set_content("What is 2+2?");
  item->set_completion("\\boxed{4}");
  item->add_completion_token_ids(59);
  item->add_completion_token_ids(151643);
  item->set_reference_answer("4");
  (*item->mutable_metadata())["task"] = "gsm8k";

  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  ScoreRequest decoded;
  ASSERT_TRUE(decoded.ParseFromString(wire));
  ASSERT_EQ(decoded.items_size(), 1);
  const RewardItem& got = decoded.items(0);
  EXPECT_EQ(got.id(), "item-0");
  EXPECT_EQ(got.messages(0).role(), "user");
  EXPECT_EQ(got.completion(), "\\boxed{4}");
  ASSERT_EQ(got.completion_token_ids_size(), 2);
  EXPECT_EQ(got.completion_token_ids(1), 151643);
  EXPECT_EQ(got.reference_answer(), "4");
  EXPECT_EQ(got.metadata().at("task"), "gsm8k");
}

TEST(RewardProtoTest, ItemErrorIsDistinctFromAbsent) {
  ScoreResponse response;
  ItemScore* scored = response.add_scores();
  scored->set_reward(1.0);
  (*scored->mutable_sub_scores())["format"] = 1.0;
  response.add_scores()->set_error("");  // present but empty still means failed

  ScoreResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(response.SerializeAsString()));
  EXPECT_FALSE(decoded.scores(0).has_error());
  EXPECT_EQ(decoded.scores(0).sub_scores().at("format"), 1.0);
  EXPECT_TRUE(decoded.scores(1).has_error());
}

TEST(RewardProtoTest, ObservationIsTextOrTokens) {
  StepResponse step;
  step.mutable_observation()->set_text("result: 4");
  step.mutable_observation()->set_role("tool");
  step.set_done(false);
  StepResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(step.SerializeAsString()));
  EXPECT_EQ(decoded.observation().content_case(), Observation::kText);
  EXPECT_EQ(decoded.observation().role(), "tool");

  step.mutable_observation()->mutable_token_ids()->add_ids(7);
  ASSERT_TRUE(decoded.ParseFromString(step.SerializeAsString()));
  EXPECT_EQ(decoded.observation().content_case(), Observation::kTokenIds);
  EXPECT_EQ(decoded.observation().token_ids().ids(0), 7);
}

TEST(RewardProtoTest, ServiceStubsExist) {
  // Linking against the generated service code: method names are part of the contract.
  EXPECT_STREQ(Reward::service_full_name(), "lockstep.v1.Reward");
  EXPECT_STREQ(Environment::service_full_name(), "lockstep.v1.Environment");
}

}  // namespace
}  // namespace lockstep::v1
