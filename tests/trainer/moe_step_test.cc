// Training a mixture-of-experts model (issue 24, item 3): the step reports expert load for every
// routed token, the load-balancing and z-losses reach the router only through their
// coefficients, and dense models report nothing.
#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "tests/trainer/engine_samples.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/trainer.h"

namespace lockstep::trainer {
namespace {

using testing::CloneMap;
using testing::Generate;
using testing::RandomRollouts;
using testing::TinyModel;

std::shared_ptr<Transformer> TinyMoe(uint64_t seed, NumericMode mode = NumericMode::kFast) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3Moe, "tiny");
  config.num_hidden_layers = 2;
  ModelOptions options;
  options.numeric_mode = mode;
  return CreateRandomModel(config, seed, options);
}

// One step; returns its metrics and the optimizer's state after it (exp_avg = (1 - beta1) * g).
std::pair<StepMetrics, TensorMap> Step(std::shared_ptr<Transformer> model, TrainerOptions options,
                                       const std::vector<Rollout>& rollouts) {
  options.lr = 1e-3;
  options.grad_clip = 0;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(std::move(model), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<StepMetrics> metrics = (*trainer)->TrainStep(rollouts);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return {metrics.ok() ? *metrics : StepMetrics{}, CloneMap((*trainer)->OptimizerState())};
}

TEST(MoeStepTest, ExpertLoadCountsEveryRoutedTokenOfEverySparseLayer) {
  const std::vector<Rollout> rollouts = RandomRollouts(3, 6, 0);
  int64_t rows = 0;
  for (const Rollout& r : rollouts) {
    rows += static_cast<int64_t>(r.prompt_tokens.size() + r.completion_tokens.size());
  }
  TrainerOptions options;
  options.micro_batch_tokens = 24;  // several micro-batches: their loads add up
  const auto [metrics, state] = Step(TinyMoe(1), options, rollouts);
  EXPECT_GT(metrics.micro_batches, 1);
  ASSERT_TRUE(metrics.moe.has_value());
  const ModelConfig config = *PresetConfig(Architecture::kQwen3Moe, "tiny");
  EXPECT_EQ(metrics.moe->sparse_layers, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(metrics.moe->expert_load.size(), 2u);
  for (const std::vector<int64_t>& load : metrics.moe->expert_load) {
    ASSERT_EQ(static_cast<int64_t>(load.size()), config.num_experts);
    EXPECT_EQ(std::accumulate(load.begin(), load.end(), int64_t{0}),
              rows * config.num_experts_per_tok);
  }
  EXPECT_GE(metrics.moe->load_imbalance_max, 1.0);
  // E * sum_e f_e P_e over k choices: positive, about k for a near-uniform router.
  EXPECT_GT(metrics.moe->aux_loss, 0.0);
  EXPECT_GT(metrics.moe->z_loss, 0.0);
  EXPECT_TRUE(std::isfinite(metrics.loss));
}

TEST(MoeStepTest, AuxLossesMoveTheRoutersAndNothingDownstreamOfThem) {
  const std::vector<Rollout> rollouts = RandomRollouts(4, 4, 0);
  TrainerOptions off, on;
  on.moe_aux_loss_coef = 0.5;
  on.moe_z_loss_coef = 0.1;
  const auto [metrics_off, state_off] = Step(TinyMoe(2), off, rollouts);
  const auto [metrics_on, state_on] = Step(TinyMoe(2), on, rollouts);
  // The same forward: the figures do not depend on the coefficients.
  EXPECT_EQ(metrics_off.loss, metrics_on.loss);
  EXPECT_EQ(metrics_off.moe->aux_loss, metrics_on.moe->aux_loss);
  // Every router's gradient changes; the last layer's experts and the LM head lie after every
  // router, so theirs do not.
  for (const char* name : {"exp_avg.model.layers.0.mlp.gate.weight",
                           "exp_avg.model.layers.1.mlp.gate.weight"}) {
    ASSERT_TRUE(state_on.count(name)) << name;
    EXPECT_GT((state_on.at(name) - state_off.at(name)).abs().max().item<double>(), 1e-6) << name;
  }
  for (const char* name : {"exp_avg.model.layers.1.mlp.experts.0.down_proj.weight",
                           "exp_avg.lm_head.weight"}) {
    ASSERT_TRUE(state_on.count(name)) << name;
    const double scale = state_off.at(name).abs().max().item<double>();
    EXPECT_GT(scale, 0.0) << name;
    EXPECT_LE((state_on.at(name) - state_off.at(name)).abs().max().item<double>(), 1e-6 * scale)
        << name;
  }
}

// The generator reports each sampled token's routing; in batch-invariant mode the trainer's
// forward of the same tokens (packed, other micro-batches) routes every one of them alike, and
// a changed id is found and named.
TEST(MoeStepTest, TrainerRoutesEveryOnPolicyTokenAsTheGeneratorDid) {
  const double temperature = 0.9;
  const std::vector<generator::SampleOutput> samples =
      Generate(TinyMoe(7, NumericMode::kBatchInvariant), temperature, 3, 2);
  ASSERT_EQ(samples.size(), 6u);
  const ModelConfig config = TinyMoe(7)->config();
  const int64_t per_token = RoutedPerToken(config);
  EXPECT_EQ(per_token, 2 * config.num_experts_per_tok);
  for (const generator::SampleOutput& s : samples) {
    EXPECT_EQ(static_cast<int64_t>(s.routed_experts.size()),
              static_cast<int64_t>(s.tokens.size()) * per_token);
  }
  std::vector<Rollout> rollouts = testing::RolloutsFrom(samples);
  const int64_t num_tokens = testing::CompletionTokens(rollouts);
  TrainerOptions options;
  options.mode = NumericMode::kBatchInvariant;
  options.temperature = temperature;
  options.micro_batch_tokens = 24;
  const auto [agree, state] = Step(TinyMoe(7, NumericMode::kBatchInvariant), options, rollouts);
  ASSERT_TRUE(agree.moe.has_value());
  EXPECT_GT(agree.micro_batches, 1);
  EXPECT_EQ(agree.parity.tokens_mismatched, 0);
  EXPECT_EQ(agree.moe->routing_tokens_compared, num_tokens);
  EXPECT_EQ(agree.moe->routing_tokens_disagreeing, 0);
  EXPECT_EQ(agree.moe->first_disagreement_layer, -1);

  // Token 2 of rollout 1: its second sparse layer's rank-0 expert replaced.
  int32_t& id = rollouts[1].routed_experts[2 * per_token + config.num_experts_per_tok];
  id = static_cast<int32_t>((id + 1) % config.num_experts);
  const auto [differ, state2] = Step(TinyMoe(7, NumericMode::kBatchInvariant), options, rollouts);
  ASSERT_TRUE(differ.moe.has_value());
  EXPECT_EQ(differ.moe->routing_tokens_compared, num_tokens);
  EXPECT_EQ(differ.moe->routing_tokens_disagreeing, 1);
  EXPECT_EQ(differ.moe->first_disagreement_rollout, 1);
  EXPECT_EQ(differ.moe->first_disagreement_position, 2);
  EXPECT_EQ(differ.moe->first_disagreement_layer, 1);

  // A routing of the wrong size is refused before anything changes.
  rollouts[0].routed_experts.pop_back();
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(TinyMoe(7, NumericMode::kBatchInvariant), options);
  ASSERT_TRUE(trainer.ok());
  absl::StatusOr<StepMetrics> refused = (*trainer)->TrainStep(rollouts);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("routed experts"), std::string::npos)
      << refused.status();
}

TEST(MoeStepTest, DenseModelsReportNoMoeFigures) {
  TrainerOptions options;
  options.moe_aux_loss_coef = 0.5;  // no router: nothing to apply it to
  const auto [metrics, state] = Step(TinyModel(3, NumericMode::kFast), options, RandomRollouts(5, 3, 0));
  EXPECT_FALSE(metrics.moe.has_value());
}

TEST(MoeStepTest, NegativeCoefficientsAreRefused) {
  TrainerOptions options;
  options.moe_aux_loss_coef = -0.1;
  EXPECT_FALSE(Trainer::Create(TinyMoe(1), options).ok());
  options.moe_aux_loss_coef = 0;
  options.moe_z_loss_coef = -1;
  EXPECT_FALSE(Trainer::Create(TinyMoe(1), options).ok());
}

}  // namespace
}  // namespace lockstep::trainer
