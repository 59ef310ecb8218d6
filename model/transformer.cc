#include "model/transformer.h"

#include <variant>

#include "absl/strings/str_cat.h"

namespace lockstep {

struct AttentionPlan {
  std::vector<int64_t> cu_seqlens;
  // Paged mode only (cache == nullptr in training mode):
  PagedKvCache* cache = nullptr;
  torch::Tensor new_token_slots;          // [num_tokens]: flat cache slot of each new token
  std::vector<torch::Tensor> key_slots;   // per sequence: flat slots of positions 0..last
};

namespace {

// Flat slot of position p in a sequence: table[p / block_size] * block_size + p % block_size.
AttentionPlan MakePlan(const PackedBatch& batch, const AttentionContext& context,
                       const std::vector<int64_t>& first_positions) {
  AttentionPlan plan;
  plan.cu_seqlens = batch.cu_seqlens;
  const auto* paged = std::get_if<PagedAttention>(&context);
  if (paged == nullptr) return plan;
  plan.cache = paged->cache;
  const int64_t block_size = paged->cache->block_size;
  std::vector<int64_t> new_slots;
  new_slots.reserve(batch.num_tokens());
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    const auto& table = paged->block_tables[s];
    const int64_t end = first_positions[s] + batch.sequence_length(s);
    std::vector<int64_t> slots(end);
    for (int64_t p = 0; p < end; ++p) slots[p] = table[p / block_size] * block_size + p % block_size;
    new_slots.insert(new_slots.end(), slots.begin() + first_positions[s], slots.end());
    plan.key_slots.push_back(torch::tensor(slots, torch::kInt64));
  }
  plan.new_token_slots = torch::tensor(new_slots, torch::kInt64);
  return plan;
}

}  // namespace

AttentionImpl::AttentionImpl(const ModelConfig& config, torch::Dtype dtype, int64_t layer_index)
    : layer_index_(layer_index),
      num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim) {
  const int64_t hidden = config.hidden_size;
  const bool bias = config.attention_bias;
  q_proj = register_module("q_proj", Linear(hidden, num_heads_ * head_dim_, bias, dtype));
  k_proj = register_module("k_proj", Linear(hidden, num_kv_heads_ * head_dim_, bias, dtype));
  v_proj = register_module("v_proj", Linear(hidden, num_kv_heads_ * head_dim_, bias, dtype));
  o_proj = register_module("o_proj", Linear(num_heads_ * head_dim_, hidden, false, dtype));
  if (config.HasQkNorm()) {
    q_norm = register_module("q_norm", RmsNorm(head_dim_, config.rms_norm_eps, dtype));
    k_norm = register_module("k_norm", RmsNorm(head_dim_, config.rms_norm_eps, dtype));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionPlan& plan,
                                     const RopeTable& rope, const torch::Tensor& positions) {
  const int64_t num_tokens = x.size(0);
  torch::Tensor q = q_proj(x).view({num_tokens, num_heads_, head_dim_});
  torch::Tensor k = k_proj(x).view({num_tokens, num_kv_heads_, head_dim_});
  torch::Tensor v = v_proj(x).view({num_tokens, num_kv_heads_, head_dim_});
  if (q_norm) {  // Qwen3: per-head RMSNorm before RoPE
    q = q_norm(q);
    k = k_norm(k);
  }
  q = rope.Apply(q, positions);
  k = rope.Apply(k, positions);

  torch::Tensor flat_keys, flat_values;
  if (plan.cache != nullptr) {
    torch::NoGradGuard no_grad;  // the cache is inference state, never part of a graph
    flat_keys = plan.cache->keys[layer_index_].view({-1, num_kv_heads_, head_dim_});
    flat_values = plan.cache->values[layer_index_].view({-1, num_kv_heads_, head_dim_});
    flat_keys.index_copy_(0, plan.new_token_slots, k.detach());
    flat_values.index_copy_(0, plan.new_token_slots, v.detach());
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(plan.cu_seqlens.size() - 1);
  for (size_t s = 0; s + 1 < plan.cu_seqlens.size(); ++s) {
    const int64_t begin = plan.cu_seqlens[s];
    const int64_t length = plan.cu_seqlens[s + 1] - begin;
    torch::Tensor qs = q.narrow(0, begin, length);
    if (plan.cache == nullptr) {
      outputs.push_back(
          ops::CausalAttention(qs, k.narrow(0, begin, length), v.narrow(0, begin, length)));
    } else {
      outputs.push_back(ops::CausalAttention(qs, flat_keys.index_select(0, plan.key_slots[s]),
                                             flat_values.index_select(0, plan.key_slots[s])));
    }
  }
  torch::Tensor attended = torch::cat(outputs, 0).view({num_tokens, num_heads_ * head_dim_});
  return o_proj(attended);
}

MlpImpl::MlpImpl(const ModelConfig& config, torch::Dtype dtype) {
  gate_proj = register_module(
      "gate_proj", Linear(config.hidden_size, config.intermediate_size, false, dtype));
  up_proj = register_module("up_proj",
                            Linear(config.hidden_size, config.intermediate_size, false, dtype));
  down_proj = register_module(
      "down_proj", Linear(config.intermediate_size, config.hidden_size, false, dtype));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return down_proj(ops::SiluMul(gate_proj(x), up_proj(x)));
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, torch::Dtype dtype,
                                   int64_t layer_index) {
  input_layernorm = register_module(
      "input_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype));
  self_attn = register_module("self_attn", Attention(config, dtype, layer_index));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype));
  mlp = register_module("mlp", Mlp(config, dtype));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const AttentionPlan& plan,
                                        const RopeTable& rope, const torch::Tensor& positions) {
  torch::Tensor h = x + self_attn(input_layernorm(x), plan, rope, positions);
  return h + mlp(post_attention_layernorm(h));
}

DecoderStackImpl::DecoderStackImpl(const ModelConfig& config, torch::Dtype dtype) {
  embed_tokens =
      register_module("embed_tokens", Embedding(config.vocab_size, config.hidden_size, dtype));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers->push_back(DecoderLayer(config, dtype, i));
  }
  norm = register_module("norm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype));
}

Transformer::Transformer(const ModelConfig& config, const ModelOptions& options)
    : config_(config), options_(options), rope_(config) {
  model = register_module("model", DecoderStack(config, options.compute_dtype));
  if (!config.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head", Linear(config.hidden_size, config.vocab_size, false, options.compute_dtype));
  }
}

const torch::Tensor& Transformer::lm_head_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

torch::Tensor Transformer::RunLayers(const PackedBatch& batch, const AttentionPlan& plan) {
  torch::Tensor h = model->embed_tokens(batch.token_ids);
  for (const auto& layer : *model->layers) {
    h = layer->as<DecoderLayerImpl>()->forward(h, plan, rope_, batch.positions);
  }
  return model->norm(h);
}

absl::StatusOr<torch::Tensor> Transformer::Hidden(const PackedBatch& batch,
                                                  const AttentionContext& context) {
  if (absl::Status s = ValidateBatch(batch, config_.vocab_size, config_.max_position_embeddings);
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> first_positions(batch.num_sequences());
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    first_positions[s] = batch.positions[batch.cu_seqlens[s]].item<int64_t>();
  }
  if (const auto* paged = std::get_if<PagedAttention>(&context)) {
    absl::Status s = ValidatePagedAttention(*paged, config_, first_positions, batch.cu_seqlens);
    if (!s.ok()) return s;
  } else {
    for (int64_t s = 0; s < batch.num_sequences(); ++s) {
      if (first_positions[s] != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "training attention: sequence ", s, " starts at position ", first_positions[s],
            "; training sequences are whole and start at 0 (use paged attention to continue)"));
      }
    }
  }
  try {
    return RunLayers(batch, MakePlan(batch, context, first_positions));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("model forward failed: ", e.what_without_backtrace()));
  }
}

torch::Tensor Transformer::Logits(const torch::Tensor& hidden) {
  return ops::Linear(hidden, lm_head_weight()).to(torch::kFloat32);
}

torch::Tensor Transformer::TargetLogProbs(const torch::Tensor& hidden,
                                          const torch::Tensor& targets, double temperature) {
  const int64_t rows = hidden.size(0);
  const int64_t chunk = std::max<int64_t>(1, options_.logits_chunk_tokens);
  std::vector<torch::Tensor> pieces;
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    const int64_t length = std::min(chunk, rows - begin);
    pieces.push_back(ops::TargetLogProbs(Logits(hidden.narrow(0, begin, length)),
                                         targets.narrow(0, begin, length), temperature));
  }
  return pieces.empty() ? torch::zeros({0}, torch::kFloat32) : torch::cat(pieces, 0);
}

torch::Tensor Transformer::LastTokenRows(const torch::Tensor& hidden, const PackedBatch& batch) {
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < batch.num_sequences(); ++s) rows.push_back(batch.cu_seqlens[s + 1] - 1);
  return hidden.index_select(0, torch::tensor(rows, torch::kInt64));
}

}  // namespace lockstep
