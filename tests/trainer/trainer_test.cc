// Trainer steps on the tiny model: on-policy parity with the generator engine in batch-invariant
// mode, micro-batch split invariance, SFT on a toy task, KL reference, bad inputs.
#include "trainer/trainer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "generator/engine.h"
#include "gtest/gtest.h"
#include "tests/trainer/engine_samples.h"
#include "tests/trainer/trainer_test_util.h"

namespace lockstep::trainer {
namespace {

using testing::BitEqual;
using testing::Generate;
using testing::CloneMap;
using testing::RandomRollouts;
using testing::TinyModel;

std::unique_ptr<Trainer> MakeTrainer(std::shared_ptr<Transformer> model, TrainerOptions options) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(std::move(model), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return std::move(*trainer);
}

TEST(TrainerTest, OnPolicyBatchInvariantRatioIsExactlyOneAndParityIsClean) {
  const double temperature = 0.9;
  std::vector<generator::SampleOutput> samples =
      Generate(TinyModel(7, NumericMode::kBatchInvariant), temperature, 3, 2);
  ASSERT_EQ(samples.size(), 6u);
  std::vector<Rollout> rollouts = testing::RolloutsFrom(samples);
  const int64_t num_tokens = testing::CompletionTokens(rollouts);
  TrainerOptions options;
  options.mode = NumericMode::kBatchInvariant;
  options.temperature = temperature;
  options.lr = 1e-3;
  options.micro_batch_tokens = 24;  // several micro-batches
  std::unique_ptr<Trainer> trainer =
      MakeTrainer(TinyModel(7, NumericMode::kBatchInvariant), options);

  // The diagnostic path agrees bit for bit too.
  std::vector<SftExample> sequences;
  for (const Rollout& r : rollouts) sequences.push_back({r.prompt_tokens, r.completion_tokens});
  absl::StatusOr<std::vector<std::vector<float>>> logprobs =
      trainer->ComputeLogprobs(sequences, temperature);
  ASSERT_TRUE(logprobs.ok()) << logprobs.status();
  for (size_t i = 0; i < rollouts.size(); ++i) {
    ASSERT_EQ((*logprobs)[i].size(), rollouts[i].behaviour_logprobs.size());
    for (size_t j = 0; j < (*logprobs)[i].size(); ++j) {
      EXPECT_EQ(std::memcmp(&(*logprobs)[i][j], &rollouts[i].behaviour_logprobs[j], 4), 0)
          << "sequence " << i << " token " << j;
    }
  }

  const TensorMap before = CloneMap(trainer->Parameters());
  absl::StatusOr<StepMetrics> m = trainer->TrainStep(rollouts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->micro_batches, 1);
  EXPECT_EQ(m->tokens, num_tokens);
  EXPECT_EQ(m->ratio_min, 1.0);
  EXPECT_EQ(m->ratio_max, 1.0);
  EXPECT_EQ(m->ratio_mean, 1.0);
  EXPECT_EQ(m->clipped_fraction, 0.0);
  EXPECT_EQ(m->parity.tokens_compared, num_tokens);
  EXPECT_EQ(m->parity.tokens_mismatched, 0);
  EXPECT_FALSE(m->parity.has_mismatch);
  EXPECT_EQ(m->parity.max_abs_diff, 0.0);
  EXPECT_EQ(m->parity.k3, 0.0);
  EXPECT_GT(m->grad_norm, 0.0);
  EXPECT_GT(m->entropy, 0.0);
  EXPECT_EQ(m->step, 1);
  EXPECT_EQ(m->weight_version, 1);
  EXPECT_FALSE(BitEqual(before, trainer->Parameters()));

  // The same rollouts are now one version stale: no parity comparison, ratios move off 1.
  absl::StatusOr<StepMetrics> stale = trainer->TrainStep(rollouts);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->parity.tokens_compared, 0);
  EXPECT_NE(stale->ratio_min, stale->ratio_max);
}

TEST(TrainerTest, ParityReportsTheFirstMismatch) {
  std::vector<Rollout> rollouts = RandomRollouts(3, 4, /*version=*/0);
  TrainerOptions options;
  options.lr = 1e-4;
  std::unique_ptr<Trainer> trainer = MakeTrainer(TinyModel(3, NumericMode::kFast), options);
  rollouts[1].loss_mask.assign(rollouts[1].completion_tokens.size(), 1);
  rollouts[1].loss_mask[0] = 0;  // environment token: neither loss nor parity
  absl::StatusOr<StepMetrics> m = trainer->TrainStep(rollouts);
  ASSERT_TRUE(m.ok()) << m.status();
  int64_t expected = -1;
  for (const Rollout& r : rollouts) expected += static_cast<int64_t>(r.completion_tokens.size());
  EXPECT_EQ(m->parity.tokens_compared, expected);
  EXPECT_EQ(m->parity.tokens_mismatched, expected);  // random behaviour log-probs
  EXPECT_TRUE(m->parity.has_mismatch);
  EXPECT_EQ(m->parity.mismatch_rollout, 0);
  EXPECT_EQ(m->parity.mismatch_position, 0);
  EXPECT_EQ(m->parity.mismatch_generator_logprob, rollouts[0].behaviour_logprobs[0]);
  EXPECT_GT(m->parity.max_abs_diff, 0.0);
  EXPECT_GT(m->parity.k3, 0.0);
  EXPECT_EQ(m->tokens, expected);
}

// Δ = trainer − generator, and k3 = mean(exp(Δ) − 1 − Δ) estimates KL(generator ‖ trainer)
// from the generator's samples (model/parity.h). Generator log-probs set 0.25 below the
// trainer's own: mean Δ = +0.25, k3 = e^0.25 − 1.25 = 0.0340254; the reversed estimator would
// read e^−0.25 − 0.75 = 0.0288008.
TEST(TrainerTest, ParityDeltaIsTrainerMinusGeneratorAndK3EstimatesTheGeneratorsKl) {
  std::vector<Rollout> rollouts = RandomRollouts(2, 3, /*version=*/0);
  TrainerOptions options;
  options.mode = NumericMode::kBatchInvariant;
  options.lr = 1e-4;
  std::unique_ptr<Trainer> trainer =
      MakeTrainer(TinyModel(3, NumericMode::kBatchInvariant), options);
  std::vector<SftExample> sequences;
  for (const Rollout& r : rollouts) sequences.push_back({r.prompt_tokens, r.completion_tokens});
  absl::StatusOr<std::vector<std::vector<float>>> own = trainer->ComputeLogprobs(sequences, 1.0);
  ASSERT_TRUE(own.ok()) << own.status();
  for (size_t i = 0; i < rollouts.size(); ++i) {
    for (size_t j = 0; j < rollouts[i].behaviour_logprobs.size(); ++j) {
      rollouts[i].behaviour_logprobs[j] = (*own)[i][j] - 0.25f;
    }
  }
  absl::StatusOr<StepMetrics> m = trainer->TrainStep(rollouts);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->parity.tokens_mismatched, m->parity.tokens_compared);
  EXPECT_NEAR(m->parity.mean_diff, 0.25, 1e-5);
  EXPECT_NEAR(m->parity.max_abs_diff, 0.25, 1e-5);
  EXPECT_NEAR(m->parity.k3, 0.0340254167, 1e-5);
  EXPECT_NEAR(m->parity.mismatch_trainer_logprob - m->parity.mismatch_generator_logprob, 0.25,
              1e-5);
  std::vector<int64_t> every_rollout(rollouts.size());
  for (size_t i = 0; i < rollouts.size(); ++i) every_rollout[i] = static_cast<int64_t>(i);
  EXPECT_EQ(m->parity.mismatched_rollouts, every_rollout);
}

TEST(TrainerTest, MicroBatchSplitDoesNotChangeTheUpdate) {
  for (Aggregation aggregation :
       {Aggregation::kTokenMean, Aggregation::kSeqMeanTokenMean, Aggregation::kConstant}) {
    std::vector<Rollout> rollouts = RandomRollouts(11, 8, 0);
    std::map<int64_t, TensorMap> results;
    std::map<int64_t, StepMetrics> metrics;
    for (int64_t budget : {4096, 20}) {
      TrainerOptions options;
      options.lr = 1e-3;
      options.grad_clip = 0;
      options.aggregation = aggregation;
      options.constant_normalizer = 16;
      options.micro_batch_tokens = budget;
      std::unique_ptr<Trainer> trainer = MakeTrainer(TinyModel(5, NumericMode::kFast), options);
      absl::StatusOr<StepMetrics> m = trainer->TrainStep(rollouts);
      ASSERT_TRUE(m.ok()) << m.status();
      metrics[budget] = *m;
      // After one AdamW step exp_avg = (1 - beta1) * g: the summed gradient itself (the updated
      // weights are not compared: Adam's first step is lr * sign(g) where g is ~0).
      results[budget] = CloneMap(trainer->OptimizerState());
    }
    EXPECT_EQ(metrics[4096].micro_batches, 1);
    EXPECT_GT(metrics[20].micro_batches, 3);
    EXPECT_NEAR(metrics[20].loss, metrics[4096].loss, 1e-5 * std::abs(metrics[4096].loss) + 1e-7);
    EXPECT_NEAR(metrics[20].grad_norm, metrics[4096].grad_norm, 1e-4 * metrics[4096].grad_norm);
    for (const auto& [name, t] : results[4096]) {
      if (name.rfind("exp_avg.", 0) != 0) continue;
      const double scale = t.abs().max().item<double>();
      EXPECT_GT(scale, 0.0) << name;
      EXPECT_LE((results[20].at(name) - t).abs().max().item<double>(), 1e-4 * scale) << name;
    }
  }
}

TEST(TrainerTest, LossOptionsRunAndKlStartsAtZero) {
  TrainerOptions options;
  options.lr = 1e-3;
  options.loss = LossKind::kGspo;
  options.tis_cap = 2.0;
  options.kl_coef = 0.1;
  options.clip_eps_high = 0.28;
  std::unique_ptr<Trainer> trainer = MakeTrainer(TinyModel(9, NumericMode::kFast), options);
  absl::StatusOr<StepMetrics> first = trainer->TrainStep(RandomRollouts(1, 4, 0));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kl, 0.0);  // the reference is the initial weights
  absl::StatusOr<StepMetrics> second = trainer->TrainStep(RandomRollouts(2, 4, 1));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->kl, 0.0);
  EXPECT_TRUE(std::isfinite(second->loss));
}

// Reverse a 4-digit string: prompt "d1 d2 d3 d4 SEP", completion "d4 d3 d2 d1 EOS".
std::vector<SftExample> ReverseDigits(at::Generator& g, int64_t count) {
  std::vector<SftExample> batch;
  for (int64_t i = 0; i < count; ++i) {
    torch::Tensor digits = 10 + torch::randint(10, {4}, g, torch::kInt64);
    SftExample e;
    for (int64_t j = 0; j < 4; ++j) e.prompt_tokens.push_back(digits[j].item<int64_t>());
    e.prompt_tokens.push_back(1);
    for (int64_t j = 3; j >= 0; --j) e.completion_tokens.push_back(digits[j].item<int64_t>());
    e.completion_tokens.push_back(2);
    batch.push_back(std::move(e));
  }
  return batch;
}

TEST(TrainerTest, SftOnReversalDrivesTheLossBelowAThirdOfItsStart) {
  TrainerOptions options;
  options.lr = 3e-3;
  options.warmup_steps = 3;
  options.micro_batch_tokens = 100;
  std::unique_ptr<Trainer> trainer = MakeTrainer(TinyModel(21, NumericMode::kFast), options);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1234);
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    absl::StatusOr<StepMetrics> m = trainer->SftStep(ReverseDigits(g, 16));
    ASSERT_TRUE(m.ok()) << m.status();
    losses.push_back(m->loss);
  }
  const double start = losses.front();
  const double end = (losses[37] + losses[38] + losses[39]) / 3;
  std::printf("SFT reverse-digits loss: first step %.4f, mean of steps 38-40 %.4f\n", start, end);
  EXPECT_GT(start, 5.0);  // ~ln(512) for a random model
  EXPECT_LT(end, start / 3) << "start " << start << " end " << end;
  EXPECT_EQ(trainer->step(), 40);
}

TEST(TrainerTest, BadInputIsRejectedAndStateUntouched) {
  TrainerOptions options;
  options.max_sequence_length = 40;
  std::unique_ptr<Trainer> trainer = MakeTrainer(TinyModel(4, NumericMode::kFast), options);
  ASSERT_TRUE(trainer->TrainStep(RandomRollouts(8, 2, 0)).ok());  // now at version 1
  const TensorMap weights = CloneMap(trainer->Parameters());
  const TensorMap optimizer = CloneMap(trainer->OptimizerState());
  struct Case {
    std::string name;
    std::function<void(std::vector<Rollout>&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty batch", [](auto& b) { b.clear(); }, "empty batch"},
      {"logprob length", [](auto& b) { b[2].behaviour_logprobs.pop_back(); }, "rollout 2: "},
      {"version length", [](auto& b) { b[1].weight_versions.push_back(0); }, "weight versions"},
      {"mask length", [](auto& b) { b[0].loss_mask = {1}; }, "loss-mask"},
      {"too long", [](auto& b) { b[3].prompt_tokens.assign(40, 1); }, "over the maximum length 40"},
      {"token id", [](auto& b) { b[1].completion_tokens[0] = 512; }, "outside the vocabulary"},
      {"negative id", [](auto& b) { b[1].prompt_tokens[0] = -1; }, "outside the vocabulary"},
      {"nan advantage", [](auto& b) { b[2].advantage = NAN; }, "advantage is not finite"},
      {"inf advantage", [](auto& b) { b[0].advantage = -INFINITY; }, "advantage is not finite"},
      {"unknown version", [](auto& b) { b[3].weight_versions[0] = 2; }, "unknown to the trainer"},
      {"empty completion",
       [](auto& b) {
         b[1].completion_tokens.clear();
         b[1].behaviour_logprobs.clear();
         b[1].weight_versions.clear();
       },
       "empty completion"},
      {"nothing to learn",
       [](auto& b) {
         for (auto& r : b) r.loss_mask.assign(r.completion_tokens.size(), 0);
       },
       "no loss tokens"},
  };
  for (const Case& c : cases) {
    std::vector<Rollout> batch = RandomRollouts(9, 4, 1);
    c.mutate(batch);
    absl::StatusOr<StepMetrics> m = trainer->TrainStep(batch);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(m.status().message().find(c.message), std::string::npos)
        << c.name << ": " << m.status();
  }
  EXPECT_EQ(trainer->SftStep({}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status sft = trainer->SftStep({{{1, 2}, {600}}}).status();
  EXPECT_NE(sft.message().find("SFT example 0"), std::string::npos) << sft;
  EXPECT_EQ(trainer->step(), 1);
  EXPECT_EQ(trainer->weight_version(), 1);
  EXPECT_TRUE(BitEqual(weights, trainer->Parameters()));
  EXPECT_TRUE(BitEqual(optimizer, trainer->OptimizerState()));
}

TEST(TrainerTest, CreateRejectsAModeMismatch) {
  TrainerOptions options;
  options.mode = NumericMode::kBatchInvariant;
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(TinyModel(1, NumericMode::kFast), options);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("mode"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::trainer
