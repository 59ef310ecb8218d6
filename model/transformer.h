// The one Transformer (Qwen3 dense, Llama 3, Qwen3-MoE) shared by the trainer and the generator.
//
// Forward over a packed batch: embed → N × [RMSNorm → attention → residual → RMSNorm → SwiGLU
// MLP, or in Qwen3-MoE's sparse layers a mixture of SwiGLU experts (moe.h) → residual] → final
// RMSNorm → LM head. Attention is either training (causal within each
// packed sequence) or paged (reads and appends the caller's block KV cache); see
// attention_context.h. Parameter names are the Hugging Face names.
//
// Thread safety: a Transformer is not internally synchronised. Concurrent forwards are fine only
// in training mode with no parameter updates in flight; paged forwards write the caller's cache.
#ifndef LOCKSTEP_MODEL_TRANSFORMER_H_
#define LOCKSTEP_MODEL_TRANSFORMER_H_

#include <torch/torch.h>

#include <memory>

#include "absl/status/statusor.h"
#include "model/attention_context.h"
#include "model/config.h"
#include "model/forward_observer.h"
#include "model/kernels/numeric_mode.h"
#include "model/layers.h"
#include "model/mlp.h"
#include "model/moe.h"
#include "model/packed_batch.h"
#include "model/rope.h"
#include "model/safetensors.h"

namespace lockstep {

struct ModelOptions {
  torch::Dtype compute_dtype = torch::kFloat32;  // parameters and activations
  NumericMode numeric_mode = NumericMode::kFast;  // kBatchInvariant requires float32
  int64_t logits_chunk_tokens = 1024;            // rows of logits alive at once in log-probs
  // The weights live in one block on transparent huge pages (huge_pages.h).
  bool huge_page_weights = true;
};

// OK iff `options` can run: batch-invariant mode needs compute_dtype float32.
absl::Status ValidateModelOptions(const ModelOptions& options);

// Per-forward attention bookkeeping, computed once and shared by all layers.
struct AttentionPlan;

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const ModelConfig& config, const ModelOptions& options, int64_t layer_index);
  torch::Tensor forward(const torch::Tensor& x, const AttentionPlan& plan, const RopeTable& rope,
                        const torch::Tensor& positions);

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only

 private:
  int64_t layer_index_;
  int64_t num_heads_, num_kv_heads_, head_dim_;
  NumericMode mode_;
};
TORCH_MODULE(Attention);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelConfig& config, const ModelOptions& options, int64_t layer_index);
  torch::Tensor forward(const torch::Tensor& x, const AttentionPlan& plan, const RopeTable& rope,
                        const torch::Tensor& positions);

  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Attention self_attn{nullptr};
  // Exactly one is set, registered as "mlp" (Hugging Face's name for both): the dense SwiGLU
  // MLP, or in a sparse Qwen3-MoE layer (ModelConfig::IsSparseLayer) the mixture of experts.
  Mlp mlp{nullptr};
  MoeBlock moe{nullptr};

 private:
  int64_t layer_index_;
};
TORCH_MODULE(DecoderLayer);

// The `model.` prefix of the Hugging Face names.
class DecoderStackImpl : public torch::nn::Module {
 public:
  DecoderStackImpl(const ModelConfig& config, const ModelOptions& options);

  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(DecoderStack);

class Transformer : public torch::nn::Module {
 public:
  // Throws c10::Error if options are unsupported (batch-invariant mode needs float32); use
  // ValidateModelOptions first to get a Status.
  Transformer(const ModelConfig& config, const ModelOptions& options = {});

  // Final-normed hidden states [num_tokens, hidden_size] for the packed batch. In paged mode the
  // batch's keys and values are appended to the cache first. A non-null `observer` (not owned,
  // used only during the call) receives every op's output from the embedding to the final norm
  // (forward_observer.h). Errors: InvalidArgument for a batch or context that does not fit the
  // model; Internal for a LibTorch failure.
  absl::StatusOr<torch::Tensor> Hidden(const PackedBatch& batch, const AttentionContext& context,
                                       ForwardObserver* observer = nullptr);

  // LM head over hidden rows: float32 logits [rows, vocab_size]. `kind` is the kind of the forward
  // that computed `hidden` (KindOf its context): fast mode's LM head follows the layers' dispatch.
  torch::Tensor Logits(const torch::Tensor& hidden, ForwardKind kind);

  // log_softmax(logits / temperature)[row, targets[row]] for each hidden row of a training
  // forward (the LM head as Logits(hidden, kTraining)), float32 [rows], computed in chunks of
  // options.logits_chunk_tokens rows so full logits never exist at once.
  torch::Tensor TargetLogProbs(const torch::Tensor& hidden, const torch::Tensor& targets,
                               double temperature = 1.0);

  // Rows of `hidden` holding each sequence's last token: [num_sequences, hidden_size].
  static torch::Tensor LastTokenRows(const torch::Tensor& hidden, const PackedBatch& batch);

  // Hot swap by pointer (the generator installs each new weight version this way): `next` maps
  // every parameter name (named_parameters()) to a tensor of the parameter's shape, dtype and
  // device; extra entries are ignored. After AdoptWeights the parameters ARE those tensors (no
  // copy, and no repacking: the kernels read weights in place): nobody may change them in place
  // afterwards.

  // What AdoptWeights let go: the previous parameter storage. Destroying it frees hundreds of MB
  // for a large model, so the caller chooses the thread that does it.
  struct ReleasedWeights {
    std::vector<torch::Tensor> tensors;
  };

  // Points every parameter at next[name] (Tensor::set_data: no copy). InvalidArgument naming the
  // tensor, with the model unchanged, if one is missing or differs in shape, dtype or device. Not
  // concurrent with forwards.
  absl::StatusOr<ReleasedWeights> AdoptWeights(const TensorMap& next);

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  // The LM head matrix: lm_head.weight, or model.embed_tokens.weight when tied.
  const torch::Tensor& lm_head_weight() const;

  DecoderStack model{nullptr};
  Linear lm_head{nullptr};  // null when tie_word_embeddings

 private:
  torch::Tensor RunLayers(const PackedBatch& batch, const AttentionPlan& plan);

  ModelConfig config_;
  ModelOptions options_;
  RopeTable rope_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_TRANSFORMER_H_
