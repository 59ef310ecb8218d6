#include "model/config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

nlohmann::json Qwen3Json() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"vocab_size", 151936},
          {"hidden_size", 1024},
          {"intermediate_size", 3072},
          {"num_hidden_layers", 28},
          {"num_attention_heads", 16},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"max_position_embeddings", 40960},
          {"rope_theta", 1000000},
          {"rope_scaling", nullptr},
          {"rms_norm_eps", 1e-6},
          {"tie_word_embeddings", true},
          {"attention_bias", false},
          {"hidden_act", "silu"},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 151643},
          {"eos_token_id", 151645}};
}

nlohmann::json Llama3Json() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 128256},
          {"hidden_size", 2048},
          {"intermediate_size", 8192},
          {"num_hidden_layers", 16},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"max_position_embeddings", 131072},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"factor", 32.0},
            {"high_freq_factor", 4.0},
            {"low_freq_factor", 1.0},
            {"original_max_position_embeddings", 8192},
            {"rope_type", "llama3"}}},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", true},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 128000},
          {"eos_token_id", {128001, 128008, 128009}}};
}

// Qwen3-30B-A3B's MoE fields on a Qwen3 body.
nlohmann::json Qwen3MoeJson() {
  nlohmann::json json = Qwen3Json();
  json["architectures"] = {"Qwen3MoeForCausalLM"};
  json["num_experts"] = 128;
  json["num_experts_per_tok"] = 8;
  json["moe_intermediate_size"] = 768;
  json["norm_topk_prob"] = true;
  json["decoder_sparse_step"] = 1;
  json["mlp_only_layers"] = nlohmann::json::array();
  json["router_aux_loss_coef"] = 0.001;
  json["output_router_logits"] = false;
  return json;
}

absl::Status ParseError(const nlohmann::json& json) {
  return ParseConfigJson(json.dump(), "test/config.json").status();
}

struct BadField {
  const char* field;
  nlohmann::json value;
  const char* message_part;
};

TEST(ConfigTest, ParsesQwen3) {
  absl::StatusOr<ModelConfig> c = ParseConfigJson(Qwen3Json().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->NumQueriesPerKv(), 2);
  EXPECT_TRUE(c->HasQkNorm());
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->torch_dtype, StorageDtype::kBFloat16);
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_EQ(*c->eos_token_id, 151645);
}

TEST(ConfigTest, ParsesLlama3WithRopeScalingAndDerivedHeadDim) {
  absl::StatusOr<ModelConfig> c = ParseConfigJson(Llama3Json().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->head_dim, 64);  // hidden_size / num_attention_heads
  EXPECT_FALSE(c->HasQkNorm());
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c->rope_scaling->factor, 32.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(*c->eos_token_id, 128001);  // first of the list
}

TEST(ConfigTest, ParsesQwen3MoeWithHuggingFaceDefaults) {
  absl::StatusOr<ModelConfig> c = ParseConfigJson(Qwen3MoeJson().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen3Moe);
  EXPECT_TRUE(c->HasQkNorm());
  EXPECT_EQ(c->num_experts, 128);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 768);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_DOUBLE_EQ(c->router_aux_loss_coef, 0.001);
  EXPECT_TRUE(c->IsSparseLayer(0));
  EXPECT_TRUE(c->IsSparseLayer(27));

  nlohmann::json json = Qwen3MoeJson();
  for (const char* field : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",
                            "router_aux_loss_coef"}) {
    json.erase(field);
  }
  json["mlp_only_layers"] = nullptr;
  c = ParseConfigJson(json.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->norm_topk_prob);  // Qwen3MoeConfig's defaults
  EXPECT_EQ(c->decoder_sparse_step, 1);
  EXPECT_TRUE(c->mlp_only_layers.empty());
  EXPECT_DOUBLE_EQ(c->router_aux_loss_coef, 0.001);

  json = Qwen3MoeJson();
  json["decoder_sparse_step"] = 2;
  json["mlp_only_layers"] = {1, 5};
  c = ParseConfigJson(json.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<int64_t> sparse;
  for (int64_t layer = 0; layer < 8; ++layer) {
    if (c->IsSparseLayer(layer)) sparse.push_back(layer);
  }
  EXPECT_EQ(sparse, (std::vector<int64_t>{3, 7}));  // odd layers, less 1 and 5
  json["num_experts"] = 0;  // Hugging Face: no experts, every layer dense
  c = ParseConfigJson(json.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->IsSparseLayer(3));
}

TEST(ConfigTest, RejectsBadQwen3MoeFieldsNamingTheField) {
  const BadField cases[] = {
      {"num_experts_per_tok", 129, "'num_experts_per_tok'"},
      {"num_experts_per_tok", 0, "'num_experts_per_tok'"},
      {"num_experts", -1, "'num_experts'"},
      {"moe_intermediate_size", 0, "'moe_intermediate_size'"},
      {"decoder_sparse_step", 0, "'decoder_sparse_step'"},
      {"mlp_only_layers", {0, 28}, "'mlp_only_layers' names layer 28"},
      {"mlp_only_layers", "all", "'mlp_only_layers' must be a list"},
      {"norm_topk_prob", 1, "'norm_topk_prob'"},
      {"router_aux_loss_coef", -0.5, "'router_aux_loss_coef'"},
  };
  for (const BadField& bad : cases) {
    nlohmann::json json = Qwen3MoeJson();
    json[bad.field] = bad.value;
    absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.field;
    EXPECT_THAT(s.message(), HasSubstr(bad.message_part)) << bad.field << ": " << s.message();
  }
  EXPECT_EQ(ParseArchitectureName("qwen3_moe").value(), Architecture::kQwen3Moe);
  EXPECT_EQ(ParseArchitectureName("Qwen3MoeForCausalLM").value(), Architecture::kQwen3Moe);
}

TEST(ConfigTest, JsonRoundTripKeepsEveryField) {
  for (Architecture arch : {Architecture::kQwen3, Architecture::kLlama, Architecture::kQwen3Moe}) {
    absl::StatusOr<ModelConfig> preset = PresetConfig(arch, "small");
    ASSERT_TRUE(preset.ok());
    absl::StatusOr<ModelConfig> back = ParseConfigJson(ConfigToJson(*preset));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ConfigToJson(*back), ConfigToJson(*preset));
    EXPECT_EQ(back->rope_scaling.has_value(), preset->rope_scaling.has_value());
  }
}

TEST(ConfigTest, PresetSizesMatchTheirNames) {
  const std::pair<const char*, double> expected[] = {
      {"tiny", 1e6}, {"small", 10e6}, {"base", 100e6}};
  for (const auto& [name, params] : expected) {
    absl::StatusOr<ModelConfig> c = PresetConfig(Architecture::kQwen3, name);
    ASSERT_TRUE(c.ok());
    EXPECT_GT(c->NumParameters(), params * 0.7) << name;
    EXPECT_LT(c->NumParameters(), params * 1.3) << name;
  }
  EXPECT_EQ(PresetConfig(Architecture::kQwen3, "huge").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConfigTest, RejectsUnsupportedArchitectureNamingTheField) {
  nlohmann::json json = Qwen3Json();
  json["architectures"] = {"MixtralForCausalLM"};
  absl::Status s = ParseError(json);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'architectures'"));
  EXPECT_THAT(s.message(), HasSubstr("MixtralForCausalLM"));
  EXPECT_THAT(s.message(), HasSubstr("test/config.json"));
}

TEST(ConfigTest, RejectsInconsistentValuesNamingTheField) {
  const BadField cases[] = {
      {"num_key_value_heads", 5, "'num_key_value_heads'"},
      {"hidden_size", 0, "'hidden_size'"},
      {"vocab_size", "big", "'vocab_size' must be an integer"},
      {"head_dim", 63, "'head_dim' must be even"},
      {"rms_norm_eps", 0.0, "'rms_norm_eps'"},
      {"rope_theta", -1.0, "'rope_theta'"},
      {"torch_dtype", "float8", "'torch_dtype'"},
      {"tie_word_embeddings", "yes", "'tie_word_embeddings'"},
      {"eos_token_id", 999999, "'eos_token_id'"},
      {"hidden_act", "gelu", "'hidden_act'"},
      {"rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 4.0}},
       "'rope_scaling.rope_type'"},
      {"rope_scaling",
       {{"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 4.0},
        {"high_freq_factor", 1.0},
        {"original_max_position_embeddings", 8192}},
       "'rope_scaling.high_freq_factor'"},
  };
  for (const BadField& bad : cases) {
    nlohmann::json json = Qwen3Json();
    json[bad.field] = bad.value;
    absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.field;
    EXPECT_THAT(s.message(), HasSubstr(bad.message_part))
        << bad.field << ": " << s.message();
  }
}

TEST(ConfigTest, RejectsMissingFieldAndBadJson) {
  nlohmann::json json = Qwen3Json();
  json.erase("num_hidden_layers");
  EXPECT_THAT(ParseError(json).message(),
              HasSubstr("'num_hidden_layers' is missing"));
  absl::Status s = ParseConfigJson("{not json", "x/config.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("x/config.json: invalid JSON"));
  EXPECT_EQ(LoadConfig("/nonexistent/dir").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
