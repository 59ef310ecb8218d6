#include "model/config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

using Json = nlohmann::json;

// Each architecture's names: lockstep's (--arch), Hugging Face's class and model_type.
struct ArchitectureNames {
  Architecture architecture;
  const char* name;
  const char* hf_class;
  const char* model_type;
};
constexpr ArchitectureNames kArchitectures[] = {
    {Architecture::kQwen3, "qwen3", "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kLlama, "llama", "LlamaForCausalLM", "llama"},
    {Architecture::kQwen3Moe, "qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
};

const ArchitectureNames& NamesOf(Architecture architecture) {
  for (const ArchitectureNames& names : kArchitectures) {
    if (names.architecture == architecture) return names;
  }
  return kArchitectures[0];
}

absl::Status FieldError(absl::string_view source, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": field '", field, "' ", why));
}

// Reads an integer field. Missing fields are an error unless a default is given.
absl::Status ReadInt(const Json& json, absl::string_view source, const char* field,
                     int64_t* out, std::optional<int64_t> fallback = std::nullopt) {
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) {
    if (fallback) {
      *out = *fallback;
      return absl::OkStatus();
    }
    return FieldError(source, field, "is missing");
  }
  if (!it->is_number_integer()) return FieldError(source, field, "must be an integer");
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadDouble(const Json& json, absl::string_view source, const char* field,
                        double* out, std::optional<double> fallback = std::nullopt) {
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) {
    if (fallback) {
      *out = *fallback;
      return absl::OkStatus();
    }
    return FieldError(source, field, "is missing");
  }
  if (!it->is_number()) return FieldError(source, field, "must be a number");
  *out = it->get<double>();
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& json, absl::string_view source, const char* field, bool* out,
                      bool fallback) {
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (!it->is_boolean()) return FieldError(source, field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

// A list of integers; missing or null is the empty list.
absl::Status ReadIntList(const Json& json, absl::string_view source, const char* field,
                         std::vector<int64_t>* out) {
  out->clear();
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return FieldError(source, field, "must be a list of integers");
  for (const Json& item : *it) {
    if (!item.is_number_integer()) return FieldError(source, field, "must be a list of integers");
    out->push_back(item.get<int64_t>());
  }
  return absl::OkStatus();
}

// The Qwen3-MoE fields, with Hugging Face's Qwen3MoeConfig defaults where one is missing.
absl::Status ReadMoeFields(const Json& json, absl::string_view source, ModelConfig* c) {
  absl::Status s = ReadInt(json, source, "num_experts", &c->num_experts, 128);
  if (s.ok()) s = ReadInt(json, source, "num_experts_per_tok", &c->num_experts_per_tok, 8);
  if (s.ok()) s = ReadInt(json, source, "moe_intermediate_size", &c->moe_intermediate_size, 768);
  if (s.ok()) s = ReadBool(json, source, "norm_topk_prob", &c->norm_topk_prob, false);
  if (s.ok()) s = ReadInt(json, source, "decoder_sparse_step", &c->decoder_sparse_step, 1);
  if (s.ok()) s = ReadIntList(json, source, "mlp_only_layers", &c->mlp_only_layers);
  if (s.ok()) {
    s = ReadDouble(json, source, "router_aux_loss_coef", &c->router_aux_loss_coef, 0.001);
  }
  return s;
}

// `eos_token_id` may be an integer or a list (Llama 3 instruct); the first entry is kept.
absl::Status ReadTokenId(const Json& json, absl::string_view source, const char* field,
                         std::optional<int64_t>* out) {
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    *out = (*it)[0].get<int64_t>();
  } else {
    return FieldError(source, field, "must be an integer or a list of integers");
  }
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const Json& json, absl::string_view source,
                             std::optional<Llama3RopeScaling>* out) {
  auto it = json.find("rope_scaling");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return FieldError(source, "rope_scaling", "must be an object or null");
  std::string type;
  if (auto t = it->find("rope_type"); t != it->end() && t->is_string()) {
    type = t->get<std::string>();
  } else if (auto t2 = it->find("type"); t2 != it->end() && t2->is_string()) {
    type = t2->get<std::string>();
  }
  if (type == "default") return absl::OkStatus();
  if (type != "llama3") {
    return FieldError(source, "rope_scaling.rope_type",
                      absl::StrCat("'", type, "' is not supported (supported: llama3, default)"));
  }
  Llama3RopeScaling scaling;
  absl::Status s = ReadDouble(*it, source, "factor", &scaling.factor);
  if (s.ok()) s = ReadDouble(*it, source, "low_freq_factor", &scaling.low_freq_factor);
  if (s.ok()) s = ReadDouble(*it, source, "high_freq_factor", &scaling.high_freq_factor);
  if (s.ok()) {
    s = ReadInt(*it, source, "original_max_position_embeddings",
                &scaling.original_max_position_embeddings);
  }
  if (!s.ok()) return FieldError(source, "rope_scaling", s.message());
  *out = scaling;
  return absl::OkStatus();
}

absl::StatusOr<StorageDtype> ParseStorageDtype(const Json& json, absl::string_view source) {
  auto it = json.find("torch_dtype");
  if (it == json.end() || it->is_null()) it = json.find("dtype");  // newer transformers
  if (it == json.end() || it->is_null()) return StorageDtype::kFloat32;
  if (!it->is_string()) return FieldError(source, "torch_dtype", "must be a string");
  const std::string name = it->get<std::string>();
  if (name == "float32") return StorageDtype::kFloat32;
  if (name == "bfloat16") return StorageDtype::kBFloat16;
  if (name == "float16") return StorageDtype::kFloat16;
  return FieldError(source, "torch_dtype",
                    absl::StrCat("'", name, "' is not supported (float32, bfloat16, float16)"));
}

absl::Status Positive(absl::string_view source, const char* field, int64_t value) {
  if (value <= 0) return FieldError(source, field, absl::StrCat("must be > 0, got ", value));
  return absl::OkStatus();
}

absl::Status ValidateMoeFields(const ModelConfig& c, absl::string_view source) {
  if (c.num_experts < 0) return FieldError(source, "num_experts", "must be >= 0");
  if (c.decoder_sparse_step <= 0) {
    return FieldError(source, "decoder_sparse_step",
                      absl::StrCat("must be > 0, got ", c.decoder_sparse_step));
  }
  for (int64_t layer : c.mlp_only_layers) {
    if (layer < 0 || layer >= c.num_hidden_layers) {
      return FieldError(source, "mlp_only_layers",
                        absl::StrCat("names layer ", layer, ", outside [0, num_hidden_layers=",
                                     c.num_hidden_layers, ")"));
    }
  }
  if (!(c.router_aux_loss_coef >= 0)) {
    return FieldError(source, "router_aux_loss_coef", "must be >= 0");
  }
  if (c.num_experts == 0) return absl::OkStatus();  // every layer dense, as in Hugging Face
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts) {
    return FieldError(source, "num_experts_per_tok",
                      absl::StrCat("(", c.num_experts_per_tok, ") must be in [1, num_experts=",
                                   c.num_experts, "]"));
  }
  return Positive(source, "moe_intermediate_size", c.moe_intermediate_size);
}

absl::Status ValidateConfigFrom(const ModelConfig& c, absl::string_view source) {
  absl::Status s = Positive(source, "vocab_size", c.vocab_size);
  if (s.ok()) s = Positive(source, "hidden_size", c.hidden_size);
  if (s.ok()) s = Positive(source, "intermediate_size", c.intermediate_size);
  if (s.ok()) s = Positive(source, "num_hidden_layers", c.num_hidden_layers);
  if (s.ok()) s = Positive(source, "num_attention_heads", c.num_attention_heads);
  if (s.ok()) s = Positive(source, "num_key_value_heads", c.num_key_value_heads);
  if (s.ok()) s = Positive(source, "head_dim", c.head_dim);
  if (s.ok()) s = Positive(source, "max_position_embeddings", c.max_position_embeddings);
  if (!s.ok()) return s;
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return FieldError(source, "num_key_value_heads",
                      absl::StrCat("(", c.num_key_value_heads,
                                   ") must divide num_attention_heads (", c.num_attention_heads,
                                   ")"));
  }
  if (c.head_dim % 2 != 0) {
    return FieldError(source, "head_dim", absl::StrCat("must be even for RoPE, got ", c.head_dim));
  }
  if (!(c.rope_theta > 0)) return FieldError(source, "rope_theta", "must be > 0");
  if (!(c.rms_norm_eps > 0) || c.rms_norm_eps >= 1) {
    return FieldError(source, "rms_norm_eps", "must be in (0, 1)");
  }
  if (c.rope_scaling) {
    const Llama3RopeScaling& r = *c.rope_scaling;
    if (!(r.factor >= 1)) return FieldError(source, "rope_scaling.factor", "must be >= 1");
    if (!(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor)) {
      return FieldError(source, "rope_scaling.high_freq_factor",
                        "must be > low_freq_factor > 0");
    }
    if (r.original_max_position_embeddings <= 0) {
      return FieldError(source, "rope_scaling.original_max_position_embeddings", "must be > 0");
    }
  }
  for (const auto& [name, id] : {std::pair{"bos_token_id", c.bos_token_id},
                                 std::pair{"eos_token_id", c.eos_token_id}}) {
    if (id && (*id < 0 || *id >= c.vocab_size)) {
      return FieldError(source, name,
                        absl::StrCat("(", *id, ") must be in [0, vocab_size=", c.vocab_size, ")"));
    }
  }
  if (c.architecture == Architecture::kQwen3Moe) return ValidateMoeFields(c, source);
  return absl::OkStatus();
}

}  // namespace

int64_t ModelConfig::NumParameters() const {
  const int64_t q = hidden_size * num_attention_heads * head_dim;
  const int64_t kv = 2 * hidden_size * num_key_value_heads * head_dim;
  const int64_t o = num_attention_heads * head_dim * hidden_size;
  const int64_t bias = attention_bias ? (num_attention_heads + 2 * num_key_value_heads) * head_dim : 0;
  const int64_t norms = 2 * hidden_size + (HasQkNorm() ? 2 * head_dim : 0);
  const int64_t dense_mlp = 3 * hidden_size * intermediate_size;
  const int64_t sparse_mlp = num_experts * (hidden_size + 3 * hidden_size * moe_intermediate_size);
  int64_t layers = 0;
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer) {
    layers += q + kv + o + bias + norms + (IsSparseLayer(layer) ? sparse_mlp : dense_mlp);
  }
  const int64_t embed = vocab_size * hidden_size;
  return layers + hidden_size + embed * (tie_word_embeddings ? 1 : 2);
}

bool ModelConfig::IsSparseLayer(int64_t layer) const {
  if (architecture != Architecture::kQwen3Moe || num_experts <= 0) return false;
  for (int64_t dense : mlp_only_layers) {
    if (dense == layer) return false;
  }
  return (layer + 1) % decoder_sparse_step == 0;
}

std::vector<int64_t> ModelConfig::SparseLayers() const {
  std::vector<int64_t> sparse;
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer) {
    if (IsSparseLayer(layer)) sparse.push_back(layer);
  }
  return sparse;
}

absl::Status ValidateConfig(const ModelConfig& config) {
  return ValidateConfigFrom(config, "model config");
}

absl::StatusOr<Architecture> ParseArchitectureName(absl::string_view name) {
  for (const ArchitectureNames& names : kArchitectures) {
    if (name == names.name || name == names.hf_class) return names.architecture;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("architecture '", name, "' is not supported (qwen3, llama, qwen3_moe)"));
}

absl::string_view StorageDtypeName(StorageDtype dtype) {
  switch (dtype) {
    case StorageDtype::kFloat32:
      return "float32";
    case StorageDtype::kBFloat16:
      return "bfloat16";
    case StorageDtype::kFloat16:
      return "float16";
  }
  return "float32";
}

absl::StatusOr<ModelConfig> ParseConfigJson(absl::string_view json_text, absl::string_view source) {
  Json json = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON"));
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  }
  ModelConfig c;
  auto arch = json.find("architectures");
  if (arch == json.end() || !arch->is_array() || arch->size() != 1 || !(*arch)[0].is_string()) {
    return FieldError(source, "architectures", "must be a list with one architecture name");
  }
  const std::string arch_name = (*arch)[0].get<std::string>();
  bool known = false;
  for (const ArchitectureNames& names : kArchitectures) {
    if (arch_name == names.hf_class) c.architecture = names.architecture, known = true;
  }
  if (!known) {
    return FieldError(source, "architectures",
                      absl::StrCat("'", arch_name,
                                   "' is not supported (Qwen3ForCausalLM, LlamaForCausalLM, "
                                   "Qwen3MoeForCausalLM)"));
  }

  absl::Status s = ReadInt(json, source, "vocab_size", &c.vocab_size);
  if (s.ok()) s = ReadInt(json, source, "hidden_size", &c.hidden_size);
  if (s.ok()) s = ReadInt(json, source, "intermediate_size", &c.intermediate_size);
  if (s.ok()) s = ReadInt(json, source, "num_hidden_layers", &c.num_hidden_layers);
  if (s.ok()) s = ReadInt(json, source, "num_attention_heads", &c.num_attention_heads);
  if (s.ok()) {
    s = ReadInt(json, source, "num_key_value_heads", &c.num_key_value_heads,
                c.num_attention_heads);
  }
  if (s.ok() && c.num_attention_heads > 0) {
    // Llama configs usually omit head_dim: hidden_size / num_attention_heads.
    const bool divisible = c.hidden_size % c.num_attention_heads == 0;
    if (!divisible && json.find("head_dim") == json.end()) {
      return FieldError(source, "head_dim",
                        "is missing and hidden_size is not divisible by num_attention_heads");
    }
    s = ReadInt(json, source, "head_dim", &c.head_dim, c.hidden_size / c.num_attention_heads);
  }
  if (s.ok()) s = ReadInt(json, source, "max_position_embeddings", &c.max_position_embeddings);
  if (s.ok()) s = ReadDouble(json, source, "rope_theta", &c.rope_theta, 10000.0);
  if (s.ok()) s = ReadDouble(json, source, "rms_norm_eps", &c.rms_norm_eps);
  if (s.ok()) s = ReadBool(json, source, "tie_word_embeddings", &c.tie_word_embeddings, false);
  if (s.ok()) s = ReadBool(json, source, "attention_bias", &c.attention_bias, false);
  if (s.ok()) s = ReadRopeScaling(json, source, &c.rope_scaling);
  if (s.ok()) s = ReadTokenId(json, source, "bos_token_id", &c.bos_token_id);
  if (s.ok()) s = ReadTokenId(json, source, "eos_token_id", &c.eos_token_id);
  if (s.ok() && c.architecture == Architecture::kQwen3Moe) s = ReadMoeFields(json, source, &c);
  if (!s.ok()) return s;
  if (auto act = json.find("hidden_act"); act != json.end() && act->is_string() &&
                                          act->get<std::string>() != "silu") {
    return FieldError(source, "hidden_act", "must be \"silu\"");
  }
  if (auto bias = json.find("mlp_bias"); bias != json.end() && bias->is_boolean() &&
                                         bias->get<bool>()) {
    return FieldError(source, "mlp_bias", "true is not supported");
  }
  if (auto window = json.find("use_sliding_window"); window != json.end() &&
                                                    window->is_boolean() && window->get<bool>()) {
    return FieldError(source, "use_sliding_window", "true is not supported");
  }
  absl::StatusOr<StorageDtype> dtype = ParseStorageDtype(json, source);
  if (!dtype.ok()) return dtype.status();
  c.torch_dtype = *dtype;
  if (absl::Status v = ValidateConfigFrom(c, source); !v.ok()) return v;
  return c;
}

absl::StatusOr<ModelConfig> LoadConfig(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfigJson(text.str(), path.string());
}

std::string ConfigToJson(const ModelConfig& c) {
  const bool qwen = c.HasQkNorm();  // Qwen3 dense or MoE
  const ArchitectureNames& names = NamesOf(c.architecture);
  Json json = {
      {"architectures", {names.hf_class}},
      {"model_type", names.model_type},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rope_theta", c.rope_theta},
      {"rms_norm_eps", c.rms_norm_eps},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", c.attention_bias},
      {"attention_dropout", 0.0},
      {"hidden_act", "silu"},
      {"initializer_range", 0.02},
      {"use_cache", true},
      {"torch_dtype", std::string(StorageDtypeName(c.torch_dtype))},
  };
  if (qwen) {
    json["use_sliding_window"] = false;
    json["max_window_layers"] = c.num_hidden_layers;
  } else {
    json["mlp_bias"] = false;
    json["pretraining_tp"] = 1;
  }
  if (c.architecture == Architecture::kQwen3Moe) {
    json["num_experts"] = c.num_experts;
    json["num_experts_per_tok"] = c.num_experts_per_tok;
    json["moe_intermediate_size"] = c.moe_intermediate_size;
    json["norm_topk_prob"] = c.norm_topk_prob;
    json["decoder_sparse_step"] = c.decoder_sparse_step;
    json["mlp_only_layers"] = c.mlp_only_layers;
    json["router_aux_loss_coef"] = c.router_aux_loss_coef;
    json["output_router_logits"] = false;
  }
  if (c.rope_scaling) {
    json["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling->factor},
        {"low_freq_factor", c.rope_scaling->low_freq_factor},
        {"high_freq_factor", c.rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  } else {
    json["rope_scaling"] = nullptr;
  }
  if (c.bos_token_id) json["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_id) json["eos_token_id"] = *c.eos_token_id;
  return json.dump(2) + "\n";
}

absl::StatusOr<ModelConfig> PresetConfig(Architecture architecture, absl::string_view preset) {
  ModelConfig c;
  c.architecture = architecture;
  c.rms_norm_eps = 1e-6;
  c.torch_dtype = StorageDtype::kFloat32;
  // Ids of the byte-level tokenizer that init-model writes: <|endoftext|> = 256.
  c.bos_token_id = 256;
  c.eos_token_id = 256;
  if (preset == "tiny") {  // ~0.9M parameters
    c.vocab_size = 512, c.hidden_size = 128, c.intermediate_size = 384;
    c.num_hidden_layers = 4, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.head_dim = 32, c.max_position_embeddings = 2048;
  } else if (preset == "small") {  // ~10M parameters
    c.vocab_size = 2048, c.hidden_size = 256, c.intermediate_size = 768;
    c.num_hidden_layers = 12, c.num_attention_heads = 8, c.num_key_value_heads = 4;
    c.head_dim = 32, c.max_position_embeddings = 4096;
  } else if (preset == "base") {  // ~100M parameters
    c.vocab_size = 32000, c.hidden_size = 768, c.intermediate_size = 2048;
    c.num_hidden_layers = 12, c.num_attention_heads = 12, c.num_key_value_heads = 4;
    c.head_dim = 64, c.max_position_embeddings = 8192;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("preset '", preset, "' is not known (tiny, small, base)"));
  }
  if (architecture == Architecture::kQwen3) {
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = true;  // as the small Qwen3 checkpoints
  } else if (architecture == Architecture::kQwen3Moe) {
    c.rope_theta = 1000000.0;
    c.tie_word_embeddings = false;  // as Qwen3-30B-A3B
    c.num_experts = 8;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = c.intermediate_size / 2;  // top-2: the dense preset's active width
    c.norm_topk_prob = true;                            // as Qwen3-30B-A3B
    c.decoder_sparse_step = 1;
    c.router_aux_loss_coef = 0.001;  // Hugging Face's default; a trainer applies its own
  } else {
    c.rope_theta = 500000.0;
    c.tie_word_embeddings = false;
    Llama3RopeScaling scaling;  // Llama 3.1 values, with a short original context so that
    scaling.original_max_position_embeddings = 1024;  // tiny models exercise the scaled band.
    c.rope_scaling = scaling;
  }
  return c;
}

}  // namespace lockstep
