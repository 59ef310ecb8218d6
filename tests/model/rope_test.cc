// RopeTable::Apply: the fused kernel (no-grad float32) gives the stock formula's bits (the graph
// path), for plain and Llama 3 scaled tables, odd shapes and repeated positions.
#include "model/rope.h"

#include <gtest/gtest.h>

#include "model/config.h"

namespace lockstep {
namespace {

void ExpectKernelEqualsFormula(const ModelConfig& config, int64_t tokens, int64_t heads,
                               uint64_t seed) {
  const RopeTable rope(config);
  torch::manual_seed(seed);
  const torch::Tensor x = torch::randn({tokens, heads, config.head_dim}) * 3;
  const torch::Tensor positions =
      torch::randint(0, config.max_position_embeddings, {tokens}, torch::kInt64);
  // Requiring grad keeps the stock formula; under NoGradGuard the kernel runs.
  const torch::Tensor formula = rope.Apply(x.clone().requires_grad_(), positions).detach();
  torch::Tensor fused;
  {
    torch::NoGradGuard no_grad;
    fused = rope.Apply(x, positions);
  }
  ASSERT_EQ(fused.sizes(), formula.sizes());
  EXPECT_TRUE(torch::equal(fused.view(torch::kInt32), formula.view(torch::kInt32)))
      << "max diff " << (fused - formula).abs().max().item<float>();
}

TEST(RopeTest, FusedKernelGivesTheFormulasBits) {
  for (Architecture arch : {Architecture::kQwen3, Architecture::kLlama}) {
    absl::StatusOr<ModelConfig> config = PresetConfig(arch, "small");
    ASSERT_TRUE(config.ok()) << config.status();
    ExpectKernelEqualsFormula(*config, 1, 1, 1);
    ExpectKernelEqualsFormula(*config, 37, config->num_attention_heads, 2);
    ExpectKernelEqualsFormula(*config, 300, config->num_key_value_heads, 3);
  }
}

TEST(RopeTest, LlamaScaledTableToo) {
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kLlama, "small");
  ASSERT_TRUE(config.ok());
  config->rope_scaling = Llama3RopeScaling{};
  config->rope_scaling->factor = 8.0;
  config->rope_scaling->low_freq_factor = 1.0;
  config->rope_scaling->high_freq_factor = 4.0;
  config->rope_scaling->original_max_position_embeddings = 64;
  ExpectKernelEqualsFormula(*config, 50, 3, 4);
}

TEST(RopeTest, PositionOutsideTheTableIsRefused) {
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, "tiny");
  ASSERT_TRUE(config.ok());
  const RopeTable rope(*config);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({2, 1, config->head_dim});
  const torch::Tensor positions =
      torch::tensor({int64_t{0}, config->max_position_embeddings}, torch::kInt64);
  EXPECT_THROW(rope.Apply(x, positions), c10::Error);
}

}  // namespace
}  // namespace lockstep
