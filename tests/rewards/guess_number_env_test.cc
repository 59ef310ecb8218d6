// guess_number in-process: secrets, hints, limits, reproducibility, option errors.
#include "rewards/guess_number_env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rewards/builtin_environments.h"

namespace lockstep::rewards {
namespace {

using ::testing::HasSubstr;

StepInput Guess(const std::string& episode, const std::string& text) {
  StepInput input;
  input.episode_id = episode;
  input.action = text;
  return input;
}

TEST(GuessNumberTest, LastIntegerReadsTheFinalNumber) {
  EXPECT_EQ(LastInteger("I say 12, no, 47."), 47);
  EXPECT_EQ(LastInteger("-3"), -3);
  EXPECT_EQ(LastInteger("x7y"), 7);
  EXPECT_EQ(LastInteger("none"), std::nullopt);
  EXPECT_EQ(LastInteger(""), std::nullopt);
}

TEST(GuessNumberTest, HintsUntilSolved) {
  GuessNumberEnvironment environment;
  EpisodeStart start;
  start.episode_id = "a";
  start.reference = "42";
  absl::StatusOr<ResetResult> reset = environment.Reset(start);
  ASSERT_TRUE(reset.ok());
  EXPECT_EQ(reset->max_turns, 7);
  EXPECT_THAT(reset->observation.text, HasSubstr("from 1 to 100"));
  absl::StatusOr<StepResult> step = environment.Step(Guess("a", "maybe 10"));
  ASSERT_TRUE(step.ok());
  EXPECT_FALSE(step->done);
  EXPECT_THAT(step->observation.text, HasSubstr("Higher."));
  EXPECT_EQ(step->observation.role, "user");
  step = environment.Step(Guess("a", "60"));
  EXPECT_THAT(step->observation.text, HasSubstr("Lower."));
  step = environment.Step(Guess("a", "no idea"));
  EXPECT_EQ(step->sub_scores.at("invalid"), 1.0);
  step = environment.Step(Guess("a", "It is 42"));
  EXPECT_TRUE(step->done);
  EXPECT_EQ(step->reward, 1.0);
  EXPECT_EQ(step->sub_scores.at("guesses"), 4.0);
  EXPECT_TRUE(absl::IsNotFound(environment.Step(Guess("a", "42")).status()));
}

TEST(GuessNumberTest, SeedDecidesTheSecretWhenThereIsNoReference) {
  // Two environments, same seed: the same hints for the same guesses.
  auto hints = [](uint64_t seed) {
    GuessNumberEnvironment environment({.min = 1, .max = 1000000, .max_guesses = 50});
    EpisodeStart start;
    start.episode_id = "s";
    start.seed = seed;
    EXPECT_TRUE(environment.Reset(start).ok());
    std::string all;
    for (int guess : {500000, 250000, 750000, 100000, 900000}) {
      all += environment.Step(Guess("s", std::to_string(guess)))->observation.text.substr(0, 1);
    }
    return all;
  };
  EXPECT_EQ(hints(3), hints(3));
  bool any_differs = false;
  for (uint64_t seed = 4; seed < 12; ++seed) any_differs |= hints(seed) != hints(3);
  EXPECT_TRUE(any_differs);
}

TEST(GuessNumberTest, BuiltinRegistryValidatesOptions) {
  EXPECT_TRUE(CreateBuiltinEnvironment("guess_number").ok());
  EXPECT_TRUE(CreateBuiltinEnvironment("guess_number", {{"max", 10}, {"max_guesses", 3}}).ok());
  EXPECT_THAT(CreateBuiltinEnvironment("guess_number", {{"maxx", 10}}).status().message(),
              HasSubstr("unknown option 'maxx'"));
  EXPECT_THAT(CreateBuiltinEnvironment("guess_number", {{"min", 5}, {"max", 1}}).status().message(),
              HasSubstr("'min' must be <= 'max'"));
  EXPECT_THAT(CreateBuiltinEnvironment("guess_number", {{"max", "ten"}}).status().message(),
              HasSubstr("must be an integer"));
  EXPECT_TRUE(absl::IsNotFound(CreateBuiltinEnvironment("chess").status()));
}

}  // namespace
}  // namespace lockstep::rewards
