#include "model/transformer.h"

#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/huge_pages.h"
#include "model/kernels/kernel_team_ops.h"

namespace lockstep {

struct AttentionPlan {
  std::vector<int64_t> cu_seqlens;
  std::vector<int64_t> first_positions;  // per sequence: position of its first token here
  ForwardKind kind = ForwardKind::kTraining;  // KindOf(the forward's AttentionContext)
  // Paged mode, per sequence: the flat cache slot of each position 0..last. (Training reads each
  // sequence's own keys in order and needs no row list.)
  std::vector<torch::Tensor> key_rows;
  PagedKvCache* cache = nullptr;          // paged mode only
  torch::Tensor new_token_slots;          // paged mode: flat cache slot of each new token
  ForwardObserver* observer = nullptr;    // not owned; null = nobody watches
};

namespace {

// Flat slot of position p in a sequence: table[p / block_size] * block_size + p % block_size.
AttentionPlan MakePlan(const PackedBatch& batch, const AttentionContext& context,
                       const std::vector<int64_t>& first_positions) {
  AttentionPlan plan;
  plan.cu_seqlens = batch.cu_seqlens;
  plan.first_positions = first_positions;
  plan.kind = KindOf(context);
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
    plan.key_rows.push_back(torch::tensor(slots, torch::kInt64));
  }
  plan.new_token_slots = torch::tensor(new_slots, torch::kInt64);
  return plan;
}

// A paged forward of at most this many tokens runs its layers as one OpenMP region
// (kernel_team_ops.h): its linears and attention share the region's threads, and its other ops
// run on the calling thread, as they already do at these sizes (their kernels' grain keeps a
// [64, 768] RMSNorm inline). Larger forwards (prefill) keep a region per kernel call, so that
// their norms and elementwise ops stay parallel.
constexpr int64_t kKernelTeamMaxTokens = 64;

// Whether `batch` runs as one region: a paged forward on the CPU, small, nothing to differentiate.
bool UsesKernelTeam(const PackedBatch& batch, const AttentionPlan& plan) {
  return plan.cache != nullptr && batch.token_ids.is_cpu() &&
         batch.num_tokens() <= kKernelTeamMaxTokens && !torch::GradMode::is_enabled();
}

}  // namespace

AttentionImpl::AttentionImpl(const ModelConfig& config, const ModelOptions& options,
                             int64_t layer_index)
    : layer_index_(layer_index),
      num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      mode_(options.numeric_mode) {
  const int64_t hidden = config.hidden_size;
  const bool bias = config.attention_bias;
  const torch::Dtype dtype = options.compute_dtype;
  q_proj = register_module("q_proj", Linear(hidden, num_heads_ * head_dim_, bias, dtype, mode_));
  k_proj = register_module("k_proj", Linear(hidden, num_kv_heads_ * head_dim_, bias, dtype, mode_));
  v_proj = register_module("v_proj", Linear(hidden, num_kv_heads_ * head_dim_, bias, dtype, mode_));
  o_proj = register_module("o_proj", Linear(num_heads_ * head_dim_, hidden, false, dtype, mode_));
  if (config.HasQkNorm()) {
    q_norm = register_module("q_norm", RmsNorm(head_dim_, config.rms_norm_eps, dtype, mode_));
    k_norm = register_module("k_norm", RmsNorm(head_dim_, config.rms_norm_eps, dtype, mode_));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionPlan& plan,
                                     const RopeTable& rope, const torch::Tensor& positions) {
  const int64_t num_tokens = x.size(0);
  const OpTap tap{plan.observer, layer_index_};
  // One kernel call for all three (ForwardLinears): an observer timing ops sees q take the
  // call's time and k and v none.
  std::vector<torch::Tensor> qkv =
      ForwardLinears(x, {q_proj.get(), k_proj.get(), v_proj.get()}, plan.kind);
  torch::Tensor q = std::move(qkv[0]);
  tap(Op::kQProj, q);
  torch::Tensor k = std::move(qkv[1]);
  tap(Op::kKProj, k);
  torch::Tensor v = std::move(qkv[2]);
  tap(Op::kVProj, v);
  q = q.view({num_tokens, num_heads_, head_dim_});
  k = k.view({num_tokens, num_kv_heads_, head_dim_});
  v = v.view({num_tokens, num_kv_heads_, head_dim_});
  if (q_norm) {  // Qwen3: per-head RMSNorm before RoPE
    q = q_norm(q);
    tap(Op::kQNorm, q);
    k = k_norm(k);
    tap(Op::kKNorm, k);
  }
  q = rope.Apply(q, positions);
  tap(Op::kRopeQ, q);
  k = rope.Apply(k, positions);
  tap(Op::kRopeK, k);

  // Keys and values by row: the batch's own (training) or the flat block cache (paged).
  torch::Tensor keys = k, values = v;
  if (plan.cache != nullptr) {
    torch::NoGradGuard no_grad;  // the cache is inference state, never part of a graph
    keys = plan.cache->keys[layer_index_].view({-1, num_kv_heads_, head_dim_});
    values = plan.cache->values[layer_index_].view({-1, num_kv_heads_, head_dim_});
    ops::WriteRows(keys, plan.new_token_slots, k.requires_grad() ? k.detach() : k);
    ops::WriteRows(values, plan.new_token_slots, v.requires_grad() ? v.detach() : v);
  }
  torch::Tensor attended;
  if (plan.cache != nullptr) {
    attended = ops::PackedAttentionOverRows(q, keys, values, plan.key_rows, plan.first_positions,
                                            plan.cu_seqlens, mode_);
  } else {
    attended = ops::TrainingAttention(q, k, v, plan.cu_seqlens, mode_);
  }
  attended = attended.view({num_tokens, num_heads_ * head_dim_});
  tap(Op::kAttention, attended);
  torch::Tensor out = o_proj(attended, plan.kind);
  tap(Op::kOProj, out);
  return out;
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, const ModelOptions& options,
                                   int64_t layer_index)
    : layer_index_(layer_index) {
  const torch::Dtype dtype = options.compute_dtype;
  const NumericMode mode = options.numeric_mode;
  input_layernorm = register_module(
      "input_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype, mode));
  self_attn = register_module("self_attn", Attention(config, options, layer_index));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype, mode));
  if (config.IsSparseLayer(layer_index)) {
    moe = register_module("mlp", MoeBlock(config, dtype, mode));
  } else {
    mlp = register_module("mlp", Mlp(config.hidden_size, config.intermediate_size, dtype, mode));
  }
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const AttentionPlan& plan,
                                        const RopeTable& rope, const torch::Tensor& positions) {
  const OpTap tap{plan.observer, layer_index_};
  torch::Tensor normed = input_layernorm(x);
  tap(Op::kInputNorm, normed);
  torch::Tensor h = x + self_attn(normed, plan, rope, positions);
  tap(Op::kAttentionResidual, h);
  torch::Tensor post_normed = post_attention_layernorm(h);
  tap(Op::kPostAttentionNorm, post_normed);
  torch::Tensor out =
      h + (moe ? moe(post_normed, plan.kind, tap) : mlp(post_normed, plan.kind, tap));
  tap(Op::kMlpResidual, out);
  return out;
}

DecoderStackImpl::DecoderStackImpl(const ModelConfig& config, const ModelOptions& options) {
  const torch::Dtype dtype = options.compute_dtype;
  embed_tokens =
      register_module("embed_tokens", Embedding(config.vocab_size, config.hidden_size, dtype));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers->push_back(DecoderLayer(config, options, i));
  }
  norm = register_module(
      "norm", RmsNorm(config.hidden_size, config.rms_norm_eps, dtype, options.numeric_mode));
}

absl::Status ValidateModelOptions(const ModelOptions& options) {
  if (options.numeric_mode == NumericMode::kBatchInvariant &&
      options.compute_dtype != torch::kFloat32) {
    return absl::InvalidArgumentError(
        "batch_invariant numeric mode needs compute dtype float32 (the CPU kernels are fp32)");
  }
  return absl::OkStatus();
}

Transformer::Transformer(const ModelConfig& config, const ModelOptions& options)
    : config_(config),
      options_(options),
      rope_(config) {
  const absl::Status valid = ValidateModelOptions(options);
  TORCH_CHECK(valid.ok(), std::string(valid.message()));
  model = register_module("model", DecoderStack(config, options));
  if (!config.tie_word_embeddings) {
    lm_head = register_module("lm_head", Linear(config.hidden_size, config.vocab_size, false,
                                                options.compute_dtype, options.numeric_mode));
  }
  // The parameters are still unwritten: move them into their block first, without reading them
  // (best effort: where it cannot be had they stay where they are), then write their starting
  // values there.
  if (options.huge_page_weights) {
    (void)MoveParametersToHugePages(*this, ParameterValues::kUnwritten);
  }
  ResetParameters(*this);
}

const torch::Tensor& Transformer::lm_head_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

torch::Tensor Transformer::RunLayers(const PackedBatch& batch, const AttentionPlan& plan) {
  const OpTap tap{plan.observer, -1};
  torch::Tensor h = model->embed_tokens(batch.token_ids);
  tap(Op::kEmbedding, h);
  for (const auto& layer : *model->layers) {
    h = layer->as<DecoderLayerImpl>()->forward(h, plan, rope_, batch.positions);
  }
  torch::Tensor normed = model->norm(h);
  tap(Op::kFinalNorm, normed);
  return normed;
}

absl::StatusOr<torch::Tensor> Transformer::Hidden(const PackedBatch& batch,
                                                  const AttentionContext& context,
                                                  ForwardObserver* observer) {
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
    AttentionPlan plan = MakePlan(batch, context, first_positions);
    plan.observer = observer;
    if (!UsesKernelTeam(batch, plan)) return RunLayers(batch, plan);
    torch::Tensor hidden;
    kernels::RunWithKernelTeam(at::get_num_threads(), [&] { hidden = RunLayers(batch, plan); });
    return hidden;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("model forward failed: ", e.what_without_backtrace()));
  }
}

torch::Tensor Transformer::Logits(const torch::Tensor& hidden, ForwardKind kind) {
  return ops::Linear(hidden, lm_head_weight(), {}, options_.numeric_mode, kind)
      .to(torch::kFloat32);
}

torch::Tensor Transformer::TargetLogProbs(const torch::Tensor& hidden,
                                          const torch::Tensor& targets, double temperature) {
  const int64_t rows = hidden.size(0);
  const int64_t chunk = std::max<int64_t>(1, options_.logits_chunk_tokens);
  std::vector<torch::Tensor> pieces;
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    const int64_t length = std::min(chunk, rows - begin);
    torch::Tensor logits = Logits(hidden.narrow(0, begin, length), ForwardKind::kTraining);
    pieces.push_back(ops::TargetLogProbs(logits, targets.narrow(0, begin, length), temperature,
                                         options_.numeric_mode));
  }
  return pieces.empty() ? torch::zeros({0}, torch::kFloat32) : torch::cat(pieces, 0);
}

absl::StatusOr<Transformer::ReleasedWeights> Transformer::AdoptWeights(const TensorMap& next) {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> targets;  // (parameter, new data)
  for (const auto& item : named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& parameter = item.value();
    auto found = next.find(name);
    if (found == next.end()) {
      return absl::InvalidArgumentError(absl::StrCat("weights: tensor '", name, "' is missing"));
    }
    const torch::Tensor& tensor = found->second;
    if (tensor.sizes() != parameter.sizes() || tensor.scalar_type() != parameter.scalar_type() ||
        tensor.device() != parameter.device()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights: tensor '", name, "' is ", c10::toString(tensor.scalar_type()),
                       c10::str(tensor.sizes()), " on ", tensor.device().str(),
                       ", the model holds ", c10::toString(parameter.scalar_type()),
                       c10::str(parameter.sizes()), " on ", parameter.device().str()));
    }
    targets.emplace_back(parameter, tensor);
  }
  ReleasedWeights released;
  released.tensors.reserve(targets.size());
  for (auto& [parameter, tensor] : targets) {
    released.tensors.push_back(parameter.detach());  // keeps the old storage alive
    parameter.set_data(tensor);
  }
  return released;
}

torch::Tensor Transformer::LastTokenRows(const torch::Tensor& hidden, const PackedBatch& batch) {
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < batch.num_sequences(); ++s) rows.push_back(batch.cu_seqlens[s + 1] - 1);
  return hidden.index_select(0, torch::tensor(rows, torch::kInt64));
}

}  // namespace lockstep
