// Qwen3-MoE in the shared model: routing (tie rule, row invariance, gradients), the sparse block
// (Hugging Face's per-token sum, batch invariance bit for bit), the layer layout, the routing
// hook (RoutingRecorder) and the auxiliary losses.
#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/kernels/moe_routing_ops.h"
#include "model/routing_recorder.h"
#include "model/transformer.h"
#include "tests/model/random_sequences.h"

namespace lockstep {
namespace {

ModelConfig TinyMoe() {
  ModelConfig config = *PresetConfig(Architecture::kQwen3Moe, "tiny");
  config.num_hidden_layers = 2;
  return config;
}

bool BitIdentical(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() &&
         torch::equal(a.contiguous().view(torch::kInt32), b.contiguous().view(torch::kInt32));
}

TEST(MoeRoutingTest, PicksTheMostProbableExpertsWithTheLowestIndexWinningTies) {
  const torch::Tensor logits = torch::tensor({{1.0f, 3.0f, 3.0f, 0.0f, 3.0f},
                                              {0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
                                              {-1.0f, 2.0f, 5.0f, 4.0f, -9.0f}});
  const kernels::TopKRouting plain = kernels::FixedOrderTopKRouting(logits, 2, false);
  EXPECT_TRUE(torch::equal(plain.experts, torch::tensor({{1, 2}, {0, 1}, {2, 3}})))
      << plain.experts;
  const torch::Tensor probs = torch::softmax(logits, -1);
  EXPECT_TRUE(torch::allclose(plain.weights, probs.gather(1, plain.experts), 1e-6, 0));
  const kernels::TopKRouting normalized = kernels::FixedOrderTopKRouting(logits, 2, true);
  EXPECT_TRUE(torch::equal(normalized.experts, plain.experts));
  EXPECT_TRUE(torch::allclose(normalized.weights.sum(1), torch::ones({3}), 1e-6, 0));
  EXPECT_FLOAT_EQ(normalized.weights[1][0].item<float>(), 0.5f);
  // Rank order: the larger weight first.
  EXPECT_GT(normalized.weights[2][0].item<float>(), normalized.weights[2][1].item<float>());
}

TEST(MoeRoutingTest, ARowsRoutingDoesNotDependOnTheOtherRows) {
  torch::manual_seed(1);
  const torch::Tensor logits = torch::randn({57, 16});
  const kernels::TopKRouting all = kernels::FixedOrderTopKRouting(logits, 4, true);
  for (int64_t r : {0, 13, 56}) {
    const kernels::TopKRouting alone =
        kernels::FixedOrderTopKRouting(logits.narrow(0, r, 1), 4, true);
    EXPECT_TRUE(torch::equal(alone.experts, all.experts.narrow(0, r, 1))) << r;
    EXPECT_TRUE(BitIdentical(alone.weights, all.weights.narrow(0, r, 1))) << r;
  }
}

TEST(MoeRoutingTest, GradientIsTheSoftmaxFormulasGradient) {
  torch::manual_seed(2);
  for (bool normalize : {false, true}) {
    const torch::Tensor base = torch::randn({9, 8});
    const torch::Tensor upstream = torch::randn({9, 3});
    torch::Tensor kernel_logits = base.clone().requires_grad_(true);
    const kernels::TopKRouting routing =
        kernels::FixedOrderTopKRouting(kernel_logits, 3, normalize);
    (routing.weights * upstream).sum().backward();
    torch::Tensor formula_logits = base.clone().requires_grad_(true);
    const torch::Tensor formula =
        kernels::TopKRoutingWeightsFormula(formula_logits, routing.experts, normalize);
    (formula * upstream).sum().backward();
    EXPECT_TRUE(torch::allclose(routing.weights, formula.detach(), 1e-6, 1e-7));
    EXPECT_TRUE(torch::allclose(kernel_logits.grad(), formula_logits.grad(), 1e-5, 1e-7));
    EXPECT_GT(kernel_logits.grad().abs().sum().item<double>(), 0.0);
  }
}

// out_t = sum_r w_tr * expert_{e_tr}(x_t), each expert's SwiGLU in float64 from the weights.
torch::Tensor ReferenceMoe(MoeBlockImpl& block, const torch::Tensor& x, bool normalize) {
  const torch::Tensor xd = x.to(torch::kFloat64);
  const torch::Tensor probs =
      torch::softmax(xd.matmul(block.gate->weight.to(torch::kFloat64).t()), -1);
  const auto [top, chosen] = probs.topk(block.top_k(), -1);
  const torch::Tensor weights = normalize ? top / top.sum(-1, true) : top;
  torch::Tensor out = torch::zeros_like(xd);
  for (int64_t t = 0; t < x.size(0); ++t) {
    for (int64_t r = 0; r < block.top_k(); ++r) {
      auto* expert = block.experts[chosen[t][r].item<int64_t>()]->as<MlpImpl>();
      const torch::Tensor row = xd[t];
      const torch::Tensor gate = row.matmul(expert->gate_proj->weight.to(torch::kFloat64).t());
      const torch::Tensor up = row.matmul(expert->up_proj->weight.to(torch::kFloat64).t());
      out[t] += weights[t][r] *
                (torch::silu(gate) * up).matmul(expert->down_proj->weight.to(torch::kFloat64).t());
    }
  }
  return out;
}

TEST(MoeBlockTest, EachTokenIsTheWeightedSumOfItsExperts) {
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    for (bool normalize : {false, true}) {
      ModelConfig config = TinyMoe();
      config.norm_topk_prob = normalize;
      ModelOptions options;
      options.numeric_mode = mode;
      auto model = CreateRandomModel(config, /*seed=*/3, options);
      auto* block = model->model->layers[0]->as<DecoderLayerImpl>()->moe.get();
      ASSERT_NE(block, nullptr);
      torch::NoGradGuard no_grad;
      torch::manual_seed(4);
      const torch::Tensor x = torch::randn({23, config.hidden_size});
      const torch::Tensor out = block->forward(x, ForwardKind::kTraining);
      const torch::Tensor expected = ReferenceMoe(*block, x, normalize);
      const double rel =
          ((out.to(torch::kFloat64) - expected).abs().max() / expected.abs().max()).item<double>();
      EXPECT_LT(rel, 1e-5) << NumericModeName(mode) << " normalize " << normalize;
    }
  }
}

TEST(MoeBlockTest, BatchInvariantTokenOutputIsTheSameBitsInAnyBatch) {
  ModelOptions options;
  options.numeric_mode = NumericMode::kBatchInvariant;
  auto model = CreateRandomModel(TinyMoe(), /*seed=*/5, options);
  auto* block = model->model->layers[1]->as<DecoderLayerImpl>()->moe.get();
  torch::NoGradGuard no_grad;
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({200, model->config().hidden_size});
  const torch::Tensor batch = block->forward(x, ForwardKind::kTraining);
  const torch::Tensor paged = block->forward(x.narrow(0, 50, 100), ForwardKind::kPaged);
  EXPECT_TRUE(BitIdentical(paged, batch.narrow(0, 50, 100)));
  for (int64_t t : {0, 77, 199}) {
    EXPECT_TRUE(
        BitIdentical(block->forward(x.narrow(0, t, 1), ForwardKind::kPaged), batch.narrow(0, t, 1)))
        << "token " << t;
  }
}

TEST(MoeLayoutTest, SparseLayersFollowHuggingFacesRule) {
  ModelConfig config = *PresetConfig(Architecture::kQwen3Moe, "tiny");
  config.num_hidden_layers = 6;
  config.decoder_sparse_step = 2;
  config.mlp_only_layers = {3};
  ASSERT_TRUE(ValidateConfig(config).ok());
  EXPECT_EQ(config.SparseLayers(), (std::vector<int64_t>{1, 5}));  // (i + 1) % 2 == 0, minus 3

  Transformer model(config);
  std::set<std::string> names;
  int64_t total = 0;
  for (const auto& item : model.named_parameters()) {
    names.insert(item.key());
    total += item.value().numel();
  }
  EXPECT_EQ(total, config.NumParameters());
  EXPECT_TRUE(names.count("model.layers.1.mlp.gate.weight"));
  EXPECT_TRUE(names.count("model.layers.5.mlp.experts.7.down_proj.weight"));
  EXPECT_TRUE(names.count("model.layers.3.mlp.gate_proj.weight"));
  EXPECT_FALSE(names.count("model.layers.3.mlp.gate.weight"));
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_EQ(model.named_parameters()["model.layers.1.mlp.experts.0.up_proj.weight"].sizes(),
            torch::IntArrayRef({config.moe_intermediate_size, config.hidden_size}));
  EXPECT_EQ(model.named_parameters()["model.layers.3.mlp.up_proj.weight"].sizes(),
            torch::IntArrayRef({config.intermediate_size, config.hidden_size}));
}

TEST(RoutingRecorderTest, RecordsEverySparseLayersChoicesAndLoad) {
  ModelConfig config = TinyMoe();
  auto model = CreateRandomModel(config, /*seed=*/7);
  const auto sequences = testing::RandomSequences({11, 4, 20}, config.vocab_size, 8);
  PackedBatch batch = *PackSequences(sequences);
  RoutingRecorder recorder;
  ASSERT_TRUE(model->Hidden(batch, TrainingAttention{}, &recorder).ok());
  ASSERT_EQ(recorder.layers().size(), 2u);
  const int64_t tokens = batch.num_tokens(), k = config.num_experts_per_tok;
  for (size_t i = 0; i < 2; ++i) {
    const RoutingRecorder::Layer& layer = recorder.layers()[i];
    EXPECT_EQ(layer.layer, static_cast<int64_t>(i));
    EXPECT_EQ(layer.router_logits.sizes(), torch::IntArrayRef({tokens, config.num_experts}));
    EXPECT_TRUE(layer.router_logits.requires_grad());  // the aux loss can differentiate it
    EXPECT_EQ(layer.routing.experts.sizes(), torch::IntArrayRef({tokens, k}));
    EXPECT_FALSE(layer.routing.weights.requires_grad());
    // Rank 0 is the arg max of the logits; the load counts every (token, rank) once.
    EXPECT_TRUE(torch::equal(layer.routing.experts.select(1, 0), layer.router_logits.argmax(1)));
    EXPECT_TRUE(torch::equal(layer.routing.load, torch::bincount(layer.routing.experts.flatten(),
                                                                 {}, config.num_experts)));
    EXPECT_EQ(layer.routing.load.sum().item<int64_t>(), tokens * k);
    EXPECT_GE(ExpertLoadImbalance(layer.routing.load), 1.0);
  }
  EXPECT_EQ(recorder.RouterLogits().size(), 2u);
  recorder.Clear();
  EXPECT_TRUE(recorder.layers().empty());

  // A dense model reports no routing.
  auto dense = CreateRandomModel(*PresetConfig(Architecture::kQwen3, "tiny"), 7);
  ASSERT_TRUE(dense->Hidden(batch, TrainingAttention{}, &recorder).ok());
  EXPECT_TRUE(recorder.layers().empty());
}

TEST(RoutingRecorderTest, CompareRoutingNamesTheFirstDisagreement) {
  auto record = [](RoutingRecorder& recorder, int64_t layer, std::vector<int64_t> experts) {
    const torch::Tensor choices = torch::tensor(experts, torch::kInt64).view({-1, 2});
    recorder.OnRouting(layer, {choices, torch::ones(choices.sizes()), torch::Tensor()});
  };
  RoutingRecorder reference, candidate;
  record(reference, 1, {0, 1, 2, 3});
  record(reference, 3, {4, 5, 6, 7, 0, 2});
  record(candidate, 1, {0, 1});  // the same rows in two steps, as a generator records them
  record(candidate, 1, {2, 3});
  record(candidate, 3, {4, 5, 7, 6, 0, 2});  // row 1 swaps its ranks: a disagreement
  EXPECT_EQ(reference.SparseLayers(), (std::vector<int64_t>{1, 3}));
  absl::StatusOr<RoutingAgreement> agreement = CompareRouting(reference, candidate);
  ASSERT_TRUE(agreement.ok()) << agreement.status();
  EXPECT_EQ(agreement->tokens_compared, 5);
  EXPECT_EQ(agreement->tokens_disagreeing, 1);
  EXPECT_EQ(agreement->first_layer, 3);
  EXPECT_EQ(agreement->first_row, 1);
  EXPECT_THAT(agreement->ToString(), ::testing::HasSubstr("first: layer 3 row 1"));
  EXPECT_TRUE(CompareRouting(reference, reference)->identical());
  record(candidate, 3, {1, 2});  // one row more
  EXPECT_EQ(CompareRouting(reference, candidate).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MoeLossTest, LoadBalancingLossFollowsHuggingFacesFormula) {
  // Two layers of two tokens over 3 experts, top-1. Choices: layer 0 -> 0, 2; layer 1 -> 0, 0.
  const torch::Tensor a = torch::tensor({{2.0, 0.0, 0.0}, {0.0, 0.0, 1.0}});
  const torch::Tensor b = torch::tensor({{1.0, 0.5, 0.0}, {3.0, 1.0, 2.0}});
  const torch::Tensor p = torch::softmax(torch::cat({a, b}), -1);
  const torch::Tensor f = torch::tensor({3.0 / 4, 0.0, 1.0 / 4}, torch::kFloat64);
  const double expected = 3.0 * (f * p.mean(0)).sum().item<double>();
  torch::Tensor la = a.to(torch::kFloat32).requires_grad_(true);
  torch::Tensor lb = b.to(torch::kFloat32).requires_grad_(true);
  torch::Tensor loss = LoadBalancingLoss({la, lb}, 3, 1);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
  loss.backward();
  EXPECT_GT(la.grad().abs().sum().item<double>(), 0.0);
  // Uniform router probabilities give k whatever the choices.
  EXPECT_NEAR(LoadBalancingLoss({torch::zeros({5, 4})}, 4, 2).item<double>(), 2.0, 1e-6);
  EXPECT_EQ(LoadBalancingLoss({}, 4, 2).item<double>(), 0.0);
  EXPECT_NEAR(RouterZLoss({torch::zeros({3, 4})}).item<double>(), std::pow(std::log(4.0), 2), 1e-5);
}

TEST(MoeLossTest, AuxiliaryLossGradientReachesEveryRouter) {
  ModelConfig config = TinyMoe();
  auto model = CreateRandomModel(config, /*seed=*/9);
  PackedBatch batch = *PackSequences(testing::RandomSequences({15, 9}, config.vocab_size, 10));
  RoutingRecorder recorder;
  ASSERT_TRUE(model->Hidden(batch, TrainingAttention{}, &recorder).ok());
  LoadBalancingLoss(recorder.RouterLogits(), config.num_experts, config.num_experts_per_tok)
      .backward();
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const torch::Tensor grad =
        model->named_parameters()["model.layers." + std::to_string(layer) + ".mlp.gate.weight"]
            .grad();
    ASSERT_TRUE(grad.defined()) << layer;
    EXPECT_GT(grad.abs().sum().item<double>(), 0.0) << layer;
  }
}

}  // namespace
}  // namespace lockstep
