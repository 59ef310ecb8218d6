// Model configuration read from (and written to) a Hugging Face `config.json`.
//
// Supported architectures: Qwen3 dense (`Qwen3ForCausalLM`), Llama 3 (`LlamaForCausalLM`) and
// Qwen3-MoE (`Qwen3MoeForCausalLM`: Qwen3 attention, sparse mixture-of-experts MLP blocks).
// Everything the forward needs is in ModelConfig; nothing else is read from the JSON at run time.
#ifndef LOCKSTEP_MODEL_CONFIG_H_
#define LOCKSTEP_MODEL_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace lockstep {

enum class Architecture { kQwen3, kLlama, kQwen3Moe };

// Storage dtype named by `torch_dtype`; the compute dtype is chosen by whoever loads the model.
enum class StorageDtype { kFloat32, kBFloat16, kFloat16 };

// Llama 3 frequency-dependent RoPE scaling (`rope_scaling.rope_type == "llama3"`).
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kQwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  StorageDtype torch_dtype = StorageDtype::kFloat32;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;

  // Qwen3-MoE only (zero elsewhere). A sparse layer's MLP is a router (`mlp.gate`, num_experts
  // outputs) over num_experts SwiGLU experts of moe_intermediate_size, each token taking its
  // num_experts_per_tok best; the other layers keep a dense MLP of intermediate_size.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;        // renormalise the k chosen probabilities to sum to 1
  int64_t decoder_sparse_step = 1;    // every decoder_sparse_step-th layer is sparse ...
  std::vector<int64_t> mlp_only_layers;  // ... except these, which stay dense
  double router_aux_loss_coef = 0.0;  // HF's load-balancing coefficient (kept, not applied here)

  // Qwen3 (dense and MoE) normalises queries and keys per head before RoPE; Llama does not.
  bool HasQkNorm() const { return architecture != Architecture::kLlama; }
  // True iff decoder layer `layer` has a sparse MoE block (Hugging Face's rule: not in
  // mlp_only_layers, num_experts > 0 and (layer + 1) % decoder_sparse_step == 0).
  bool IsSparseLayer(int64_t layer) const;
  // The sparse layers, ascending (empty for a dense model).
  std::vector<int64_t> SparseLayers() const;
  // Number of query heads that share one key/value head (GQA group size).
  int64_t NumQueriesPerKv() const { return num_attention_heads / num_key_value_heads; }
  // Total parameter count implied by the shapes (tied head counted once).
  int64_t NumParameters() const;
};

// Checks ranges and cross-field consistency. The error message names the offending field.
absl::Status ValidateConfig(const ModelConfig& config);

// Parses and validates a `config.json` document. `source` names the file in error messages.
absl::StatusOr<ModelConfig> ParseConfigJson(absl::string_view json_text,
                                            absl::string_view source = "config.json");

// Reads `<model_dir>/config.json`.
absl::StatusOr<ModelConfig> LoadConfig(const std::filesystem::path& model_dir);

// Renders a Hugging Face compatible `config.json` (the fields transformers needs to load it).
std::string ConfigToJson(const ModelConfig& config);

// Named presets used by `lockstep init-model`: "tiny" (~1M parameters, tests), "small" (~10M),
// "base" (~100M, benchmarks). Qwen3-MoE presets have the dense preset's shapes with 8 experts,
// top-2, each expert half the dense MLP's width: the same *active* parameters per token (the
// total is ~2.5x).
absl::StatusOr<ModelConfig> PresetConfig(Architecture architecture, absl::string_view preset);

// "qwen3" | "llama" | "qwen3_moe", or the Hugging Face class name.
absl::StatusOr<Architecture> ParseArchitectureName(absl::string_view name);
absl::string_view StorageDtypeName(StorageDtype dtype);                      // "float32", ...

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_CONFIG_H_
