// What a step gives `lockstep diagnose`: the rollouts that mismatched, and the weights they
// were scored with, saved before the update (and only when something mismatched).
#include <filesystem>

#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "tests/trainer/trainer_test_util.h"

namespace lockstep::trainer {
namespace {

TEST(MismatchWeightsTest, MismatchedRolloutsAreListedAndPreUpdateWeightsSaved) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("mismatch_weights_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  TrainerOptions options;
  options.mode = NumericMode::kBatchInvariant;
  options.lr = 1e-2;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(testing::TinyModel(3, NumericMode::kBatchInvariant), options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->TrainStep(testing::RandomRollouts(4, 2, 0)).ok());  // now at version 1
  const TensorMap before = testing::CloneMap((*trainer)->Parameters());

  std::vector<Rollout> rollouts = testing::RandomRollouts(5, 4, (*trainer)->weight_version());
  rollouts[2].weight_versions.assign(rollouts[2].completion_tokens.size(), 0);  // policy age 1
  absl::StatusOr<StepMetrics> step = (*trainer)->TrainStep(rollouts, (dir / "v0").string());
  ASSERT_TRUE(step.ok()) << step.status();
  // Random behaviour log-probs mismatch everywhere they are compared: rollouts 0, 1 and 3.
  EXPECT_EQ(step->parity.mismatched_rollouts, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_FALSE(std::filesystem::exists(dir / "v0.tmp"));
  absl::StatusOr<std::shared_ptr<Transformer>> saved = LoadModel(dir / "v0");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_TRUE(testing::BitEqual(StateDict(**saved), before));  // not the updated weights
  EXPECT_FALSE(testing::BitEqual((*trainer)->Parameters(), before));

  // Nothing mismatches (nothing is age 0): nothing is written.
  for (Rollout& r : rollouts) r.weight_versions.assign(r.completion_tokens.size(), 0);
  step = (*trainer)->TrainStep(rollouts, (dir / "v1").string());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->parity.mismatched_rollouts.empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "v1"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::trainer
