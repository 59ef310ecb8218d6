// The direction of one policy-gradient step on a tiny case (a GRPO step raises the log-prob of
// completions with a positive advantage and lowers those with a negative one, on-policy and in
// a near-saturated group), and the separate SFT learning rate (TrainerOptions::sft_lr).
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/advantages.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {
namespace {

using testing::TinyModel;

std::unique_ptr<Trainer> MakeTrainer(TrainerOptions options, uint64_t seed = 5) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(TinyModel(seed, options.mode), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return std::move(*trainer);
}

// Sum over the completion of log p(token | prefix), one per sequence.
std::vector<double> SequenceLogprobs(Trainer& trainer, const std::vector<SftExample>& sequences) {
  absl::StatusOr<std::vector<std::vector<float>>> logprobs = trainer.ComputeLogprobs(sequences);
  EXPECT_TRUE(logprobs.ok()) << logprobs.status();
  std::vector<double> sums;
  for (const std::vector<float>& row : *logprobs) {
    sums.push_back(std::accumulate(row.begin(), row.end(), 0.0));
  }
  return sums;
}

// On-policy rollouts of `completions` after `prompt`: behaviour log-probs from the trainer itself.
std::vector<Rollout> OnPolicy(Trainer& trainer, const std::vector<int64_t>& prompt,
                              const std::vector<std::vector<int64_t>>& completions,
                              const std::vector<double>& advantages) {
  std::vector<SftExample> sequences;
  for (const auto& c : completions) sequences.push_back({prompt, c});
  absl::StatusOr<std::vector<std::vector<float>>> logprobs = trainer.ComputeLogprobs(sequences);
  EXPECT_TRUE(logprobs.ok()) << logprobs.status();
  std::vector<Rollout> rollouts;
  for (size_t i = 0; i < completions.size(); ++i) {
    Rollout r;
    r.prompt_tokens = prompt;
    r.completion_tokens = completions[i];
    r.behaviour_logprobs = (*logprobs)[i];
    r.weight_versions.assign(completions[i].size(), trainer.weight_version());
    r.advantage = advantages[i];
    rollouts.push_back(std::move(r));
  }
  return rollouts;
}

TEST(PolicyDirectionTest, GrpoStepRaisesPositiveAndLowersNegativeCompletions) {
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    TrainerOptions options;
    options.mode = mode;
    options.lr = 1e-3;
    std::unique_ptr<Trainer> trainer = MakeTrainer(options);
    const std::vector<int64_t> prompt = {51, 43, 53, 61};  // "3+5="
    const std::vector<std::vector<int64_t>> completions = {{56, 256}, {55, 256}};
    std::vector<SftExample> sequences = {{prompt, completions[0]}, {prompt, completions[1]}};
    const std::vector<double> before = SequenceLogprobs(*trainer, sequences);
    absl::StatusOr<StepMetrics> m =
        trainer->TrainStep(OnPolicy(*trainer, prompt, completions, {1.0, -1.0}));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_DOUBLE_EQ(m->ratio_mean, 1.0);
    const std::vector<double> after = SequenceLogprobs(*trainer, sequences);
    EXPECT_GT(after[0], before[0] + 1e-3) << "positive advantage must become more likely";
    EXPECT_LT(after[1], before[1] - 1e-3) << "negative advantage must become less likely";
  }
}

// A group of 8 where 7 samples are right and 1 is wrong (the common case of a warm-started
// policy): GRPO gives the wrong one a large negative advantage; the step still raises the right
// answer and lowers the wrong one.
TEST(PolicyDirectionTest, NearSaturatedGroupStillMovesTowardsTheRightAnswer) {
  TrainerOptions options;
  options.lr = 1e-3;
  std::unique_ptr<Trainer> trainer = MakeTrainer(options, 9);
  const std::vector<int64_t> prompt = {55, 43, 52, 61};  // "7+4="
  const std::vector<int64_t> right = {49, 49, 256}, wrong = {49, 50, 256};
  std::vector<std::vector<int64_t>> completions(7, right);
  completions.push_back(wrong);
  std::vector<double> rewards(7, 1.0);
  rewards.push_back(0.0);
  absl::StatusOr<std::vector<double>> advantages = GroupAdvantages(rewards, AdvantageOptions{});
  ASSERT_TRUE(advantages.ok()) << advantages.status();
  EXPECT_LT(advantages->back(), -2.0);
  std::vector<SftExample> sequences = {{prompt, right}, {prompt, wrong}};
  const std::vector<double> before = SequenceLogprobs(*trainer, sequences);
  absl::StatusOr<StepMetrics> m =
      trainer->TrainStep(OnPolicy(*trainer, prompt, completions, *advantages));
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<double> after = SequenceLogprobs(*trainer, sequences);
  EXPECT_GT(after[0], before[0]);
  EXPECT_LT(after[1], before[1]);
}

TEST(SftLrTest, SftStepsRunAtTheirOwnRateAndTrainStepsFollowTheSchedule) {
  TrainerOptions options;
  options.lr = 1e-4;
  options.sft_lr = 2e-3;
  std::unique_ptr<Trainer> trainer = MakeTrainer(options);
  const std::vector<int64_t> prompt = {51, 43, 53, 61};
  absl::StatusOr<StepMetrics> sft = trainer->SftStep({{prompt, {56, 256}}});
  ASSERT_TRUE(sft.ok()) << sft.status();
  EXPECT_DOUBLE_EQ(sft->lr, 2e-3);
  absl::StatusOr<StepMetrics> rl =
      trainer->TrainStep(OnPolicy(*trainer, prompt, {{56, 256}, {55, 256}}, {1.0, -1.0}));
  ASSERT_TRUE(rl.ok()) << rl.status();
  EXPECT_DOUBLE_EQ(rl->lr, 1e-4);
  EXPECT_EQ(trainer->step(), 2);

  // sft_lr = 0: SFT follows the schedule (here a warm-up over 4 steps: lr * 1/4 at step 0).
  options.sft_lr = 0;
  options.warmup_steps = 4;
  std::unique_ptr<Trainer> scheduled = MakeTrainer(options);
  absl::StatusOr<StepMetrics> first = scheduled->SftStep({{prompt, {56, 256}}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_DOUBLE_EQ(first->lr, 1e-4 / 4);
}

TEST(SftLrTest, JsonRoundTripAndValidation) {
  absl::StatusOr<TrainerOptions> options = TrainerOptionsFromJson(R"({"sft_lr": 0.003})");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->sft_lr, 0.003);
  absl::StatusOr<TrainerOptions> again = TrainerOptionsFromJson(TrainerOptionsToJson(*options));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_DOUBLE_EQ(again->sft_lr, 0.003);
  absl::StatusOr<TrainerOptions> bad = TrainerOptionsFromJson(R"({"sft_lr": -1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sft_lr"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace lockstep::trainer
