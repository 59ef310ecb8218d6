#include "model/transformer.h"

#include <filesystem>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/random_sequences.h"
#include "model/checkpoint.h"
#include "model/simple_decoder.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

ModelConfig TinyConfig(Architecture arch) {
  absl::StatusOr<ModelConfig> config = PresetConfig(arch, "tiny");
  EXPECT_TRUE(config.ok());
  config->num_hidden_layers =
      2;  // keep tests fast; shapes stay those of the preset
  return *config;
}

using ::lockstep::testing::RandomSequences;

// The name of an MLP weight of `layer` ("up_proj", ...): in a Qwen3-MoE layer, expert 0's.
std::string MlpWeight(Architecture arch, int layer, const std::string& proj) {
  const std::string mlp = "model.layers." + std::to_string(layer) + ".mlp.";
  return mlp + (arch == Architecture::kQwen3Moe ? "experts.0." : "") + proj + ".weight";
}

// A per-architecture folder under the test temp dir.
std::filesystem::path TestDir(const std::string& prefix, Architecture arch) {
  return std::filesystem::path(::testing::TempDir()) /
         (prefix + std::to_string(static_cast<int>(arch)));
}

torch::Tensor TrainingLogits(Transformer& model,
                             const std::vector<std::vector<int64_t>>& seqs) {
  torch::NoGradGuard no_grad;
  absl::StatusOr<PackedBatch> batch = PackSequences(seqs);
  EXPECT_TRUE(batch.ok());
  absl::StatusOr<torch::Tensor> hidden =
      model.Hidden(*batch, TrainingAttention{});
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  return model.Logits(*hidden, ForwardKind::kTraining);
}

// max |a - b| / max |b|: the relative error measure used throughout the model
// tests.
double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

class TransformerTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(TransformerTest, ParameterNamesAreHuggingFaceNames) {
  ModelConfig config = TinyConfig(GetParam());
  Transformer model(config);
  std::set<std::string> names;
  for (const auto& item : model.named_parameters()) names.insert(item.key());
  EXPECT_TRUE(names.count("model.embed_tokens.weight"));
  EXPECT_TRUE(names.count("model.norm.weight"));
  EXPECT_TRUE(names.count("model.layers.1.self_attn.o_proj.weight"));
  EXPECT_TRUE(names.count(MlpWeight(GetParam(), 0, "gate_proj")));
  EXPECT_TRUE(names.count("model.layers.0.post_attention_layernorm.weight"));
  EXPECT_EQ(names.count("model.layers.0.self_attn.q_norm.weight"),
            config.HasQkNorm() ? 1u : 0u);
  EXPECT_EQ(names.count("model.layers.1.mlp.gate.weight"),
            GetParam() == Architecture::kQwen3Moe ? 1u : 0u);
  EXPECT_EQ(names.count("lm_head.weight"),
            config.tie_word_embeddings ? 0u : 1u);
  int64_t total = 0;
  for (const auto& item : model.named_parameters())
    total += item.value().numel();
  EXPECT_EQ(total, config.NumParameters());
}

TEST_P(TransformerTest, PackedBatchMatchesEachSequenceAlone) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/3);
  auto sequences = RandomSequences({1, 5, 37, 12}, config.vocab_size, 11);
  torch::Tensor packed = TrainingLogits(*model, sequences);
  int64_t offset = 0;
  for (const auto& sequence : sequences) {
    torch::Tensor alone = TrainingLogits(*model, {sequence});
    const int64_t n = static_cast<int64_t>(sequence.size());
    EXPECT_LT(RelativeError(packed.narrow(0, offset, n), alone), 1e-5);
    offset += n;
  }
}

TEST_P(TransformerTest, PagedPrefillAndDecodeMatchTrainingForward) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/4);
  torch::NoGradGuard no_grad;
  auto sequences = RandomSequences({23, 9}, config.vocab_size, 12);
  torch::Tensor expected = TrainingLogits(*model, sequences);

  // Sequence 0 (23 tokens) needs 6 blocks of 4, sequence 1 (9 tokens) needs 3;
  // the block ids are out of order and interleaved between the two sequences.
  PagedKvCache cache = AllocatePagedKvCache(config, /*num_blocks=*/10,
                                            /*block_size=*/4, torch::kFloat32);
  const std::vector<std::vector<int32_t>> tables = {{6, 0, 3, 5, 9, 1},
                                                    {2, 8, 4}};

  // Prefill sequence 0 in chunks of 7 tokens and sequence 1 in one go, then
  // decode both token by token in one batch; compare every position's logits
  // with the training forward.
  std::vector<torch::Tensor> rows(2);
  std::vector<int64_t> cursor = {0, 0};
  auto step = [&](const std::vector<int64_t>& take) {
    std::vector<std::vector<int64_t>> tokens;
    std::vector<int64_t> starts;
    std::vector<int> which;
    PagedAttention step_paged{&cache, {}};
    for (int s = 0; s < 2; ++s) {
      if (take[s] == 0) continue;
      tokens.emplace_back(sequences[s].begin() + cursor[s],
                          sequences[s].begin() + cursor[s] + take[s]);
      starts.push_back(cursor[s]);
      step_paged.block_tables.push_back(tables[s]);
      which.push_back(s);
    }
    absl::StatusOr<PackedBatch> batch = PackContinuations(tokens, starts);
    ASSERT_TRUE(batch.ok());
    absl::StatusOr<torch::Tensor> hidden = model->Hidden(*batch, step_paged);
    ASSERT_TRUE(hidden.ok()) << hidden.status();
    torch::Tensor logits = model->Logits(*hidden, step_paged.kind);
    for (size_t i = 0; i < which.size(); ++i) {
      const int s = which[i];
      torch::Tensor part =
          logits.narrow(0, batch->cu_seqlens[i], batch->sequence_length(i));
      rows[s] = rows[s].defined() ? torch::cat({rows[s], part}) : part;
      cursor[s] += take[s];
    }
  };
  step({7, 5});
  step({7, 0});
  while (cursor[0] < 23 || cursor[1] < 9) {
    step({cursor[0] < 23 ? 1 : 0, cursor[1] < 9 ? 1 : 0});
  }
  EXPECT_LT(RelativeError(rows[0], expected.narrow(0, 0, 23)), 1e-5);
  EXPECT_LT(RelativeError(rows[1], expected.narrow(0, 23, 9)), 1e-5);
}

TEST_P(TransformerTest, TargetLogProbsInChunksEqualFullLogSoftmax) {
  ModelConfig config = TinyConfig(GetParam());
  ModelOptions options;
  options.logits_chunk_tokens = 7;
  auto model = CreateRandomModel(config, /*seed=*/5, options);
  torch::NoGradGuard no_grad;
  auto sequences = RandomSequences({30, 4}, config.vocab_size, 13);
  absl::StatusOr<PackedBatch> batch = PackSequences(sequences);
  ASSERT_TRUE(batch.ok());
  torch::Tensor hidden = *model->Hidden(*batch, TrainingAttention{});
  torch::Tensor targets = batch->token_ids.roll(-1);
  torch::Tensor chunked =
      model->TargetLogProbs(hidden, targets, /*temperature=*/0.7);
  torch::Tensor full = torch::log_softmax(model->Logits(hidden, ForwardKind::kTraining) / 0.7, -1)
                           .gather(1, targets.unsqueeze(1))
                           .squeeze(1);
  // Fast mode: the LM head matmul over 7 rows need not round like the one over 34 rows (that
  // is what batch-invariant mode fixes), so compare to fp32 precision here.
  EXPECT_LT(RelativeError(chunked, full), 1e-6);
}

TEST_P(TransformerTest, GradientsReachEveryParameter) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/6);
  // Enough tokens that every expert of a Qwen3-MoE layer is chosen by some (an expert no token
  // chose gets no gradient).
  const bool moe = GetParam() == Architecture::kQwen3Moe;
  auto sequences = RandomSequences(moe ? std::vector<int64_t>{60, 40} : std::vector<int64_t>{10, 6},
                                   config.vocab_size, 14);
  absl::StatusOr<PackedBatch> batch = PackSequences(sequences);
  ASSERT_TRUE(batch.ok());
  torch::Tensor hidden = *model->Hidden(*batch, TrainingAttention{});
  torch::Tensor loss =
      -model->TargetLogProbs(hidden, batch->token_ids.roll(-1)).mean();
  loss.backward();
  for (const auto& item : model->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0.0)
        << item.key();
  }
}

TEST_P(TransformerTest, SaveAndLoadRoundTripIsExact) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/7);
  const std::filesystem::path dir = TestDir("roundtrip_", GetParam());
  ASSERT_TRUE(SaveModel(*model, dir, /*max_shard_bytes=*/200000).ok());
  EXPECT_TRUE(std::filesystem::exists(
      dir / "model.safetensors.index.json"));  // sharded
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto original = StateDict(*model);
  for (const auto& [name, tensor] : StateDict(**loaded)) {
    EXPECT_TRUE(torch::equal(tensor, original.at(name))) << name;
  }
}

TEST_P(TransformerTest,
       LoadStateDictNamesMissingUnexpectedAndMisshapedTensors) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/8);
  TensorMap tensors = StateDict(*model);

  TensorMap missing = tensors;
  const std::string up = MlpWeight(GetParam(), 1, "up_proj");
  missing.erase(up);
  absl::Status s = LoadStateDict(*model, missing, "ckpt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'" + up + "' is missing"));

  TensorMap extra = tensors;
  extra["model.layers.9.mlp.up_proj.weight"] = torch::zeros({1});
  s = LoadStateDict(*model, extra, "ckpt");
  EXPECT_THAT(
      s.message(),
      HasSubstr("unexpected tensor 'model.layers.9.mlp.up_proj.weight'"));

  TensorMap misshaped = tensors;
  misshaped["model.norm.weight"] = torch::ones({config.hidden_size + 1});
  s = LoadStateDict(*model, misshaped, "ckpt");
  EXPECT_THAT(s.message(), HasSubstr("'model.norm.weight' has shape"));
}

// LoadModel reads the file straight into the parameters; it reports the same three errors.
TEST_P(TransformerTest, LoadModelNamesMissingUnexpectedAndMisshapedTensors) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/8);
  const std::filesystem::path dir = TestDir("load_errors_", GetParam());
  auto write = [&](const TensorMap& tensors) {
    ASSERT_TRUE(SaveModel(*model, dir).ok());  // config.json
    ASSERT_TRUE(WriteSafetensorsDir(dir, tensors, int64_t{1} << 30).ok());
  };
  TensorMap missing = StateDict(*model);
  const std::string up = MlpWeight(GetParam(), 1, "up_proj");
  missing.erase(up);
  write(missing);
  absl::StatusOr<std::shared_ptr<Transformer>> loaded = LoadModel(dir);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("tensor '" + up + "' is missing"));

  TensorMap extra = StateDict(*model);
  extra["model.layers.9.mlp.up_proj.weight"] = torch::zeros({1});
  write(extra);
  loaded = LoadModel(dir);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("unexpected tensor 'model.layers.9.mlp.up_proj.weight'"));

  TensorMap misshaped = StateDict(*model);
  misshaped["model.norm.weight"] = torch::ones({config.hidden_size + 1});
  write(misshaped);
  loaded = LoadModel(dir);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("tensor 'model.norm.weight' has shape [" +
                        std::to_string(config.hidden_size + 1) + "], the model config expects"));
  std::filesystem::remove_all(dir);
}

TEST_P(TransformerTest, RejectsBadBatchesAndContexts) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/9);
  torch::NoGradGuard no_grad;
  absl::StatusOr<PackedBatch> out_of_vocab =
      PackSequences({{1, 2, config.vocab_size}});
  ASSERT_TRUE(out_of_vocab.ok());
  absl::Status s = model->Hidden(*out_of_vocab, TrainingAttention{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token id out of range"));

  absl::StatusOr<PackedBatch> continuation = PackContinuations({{1, 2}}, {5});
  ASSERT_TRUE(continuation.ok());
  EXPECT_THAT(
      model->Hidden(*continuation, TrainingAttention{}).status().message(),
      HasSubstr("starts at position 5"));

  PagedKvCache cache = AllocatePagedKvCache(config, 2, 4, torch::kFloat32);
  PagedAttention too_few_blocks{&cache,
                                {{0}}};  // 7 positions need 2 blocks of 4
  EXPECT_THAT(model->Hidden(*continuation, too_few_blocks).status().message(),
              HasSubstr("needs 2 blocks"));
  PagedAttention bad_block{&cache, {{0, 5}}};
  EXPECT_THAT(model->Hidden(*continuation, bad_block).status().message(),
              HasSubstr("names block 5"));
}

TEST_P(TransformerTest, SimpleDecoderGreedyMatchesTrainingArgmax) {
  ModelConfig config = TinyConfig(GetParam());
  auto model = CreateRandomModel(config, /*seed=*/10);
  auto prompts = RandomSequences({6, 3}, config.vocab_size, 15);
  SimpleDecodeOptions options;
  options.max_new_tokens = 5;
  options.block_size = 4;
  absl::StatusOr<SimpleDecodeResult> decoded =
      DecodeGreedyOrSampled(*model, prompts, options);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  for (size_t s = 0; s < prompts.size(); ++s) {
    std::vector<int64_t> full = prompts[s];
    full.insert(full.end(), decoded->tokens[s].begin(),
                decoded->tokens[s].end());
    torch::Tensor logits = TrainingLogits(*model, {full});
    torch::Tensor logprobs = torch::log_softmax(logits, -1);
    for (size_t j = 0; j < decoded->tokens[s].size(); ++j) {
      const int64_t row = static_cast<int64_t>(prompts[s].size() + j) - 1;
      EXPECT_EQ(logits[row].argmax().item<int64_t>(), decoded->tokens[s][j]);
      EXPECT_NEAR(logprobs[row][decoded->tokens[s][j]].item<float>(),
                  decoded->logprobs[s][j], 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, TransformerTest,
                         ::testing::Values(Architecture::kQwen3,
                                           Architecture::kLlama,
                                           Architecture::kQwen3Moe),
                         [](const auto& info) {
                           switch (info.param) {
                             case Architecture::kQwen3: return "Qwen3";
                             case Architecture::kLlama: return "Llama";
                             case Architecture::kQwen3Moe: return "Qwen3Moe";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace lockstep
