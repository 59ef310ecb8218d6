// The op-output seam of the shared model: a caller that passes a ForwardObserver to a forward
// receives the output of every op, in execution order, on the training forward and on the
// paged (prefill and decode) forwards alike, under the same op names. `lockstep diagnose`
// (diagnose/) records the outputs at the positions it compares and finds the first op whose
// output differs between two execution paths while its inputs were bit-identical.
//
// Cost when unset: one null-pointer test per op.
#ifndef LOCKSTEP_MODEL_FORWARD_OBSERVER_H_
#define LOCKSTEP_MODEL_FORWARD_OBSERVER_H_

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace lockstep {

// Every op the observer sees, in the order one token's computation runs them.
enum class Op : int {
  kEmbedding = 0,      // layer -1: embed_tokens rows
  kInputNorm,          // per layer: input_layernorm(residual)
  kQProj,              // q_proj, [tokens, heads * head_dim]
  kKProj,              // k_proj, [tokens, kv_heads * head_dim]
  kVProj,              // v_proj
  kQNorm,              // q_norm (Qwen3 only)
  kKNorm,              // k_norm (Qwen3 only)
  kRopeQ,              // RoPE applied to the queries
  kRopeK,              // RoPE applied to the keys (what the KV cache holds)
  kAttention,          // softmax(q k^T / sqrt(d)) v over the sequence's keys 0..t
  kOProj,              // o_proj
  kAttentionResidual,  // residual + o_proj
  kPostAttentionNorm,  // post_attention_layernorm
  kGateProj,           // gate_proj (dense MLP layers)
  kUpProj,             // up_proj (dense MLP layers)
  kSiluMul,            // silu(gate) * up (dense MLP layers)
  kDownProj,           // down_proj (dense MLP layers)
  kRouterLogits,       // sparse (MoE) layers: mlp.gate, [tokens, num_experts]
  kMoe,                // sparse layers: sum over the token's k experts of weight * expert(x)
  kMlpResidual,        // residual + the MLP's output: the layer's output
  kFinalNorm,          // layer -1: model.norm
  kLmHead,             // layer -1: logits (float32)
  kLogSoftmax,         // layer -1: log_softmax(logits / T) over the vocabulary (float32)
};
inline constexpr int kNumOps = static_cast<int>(Op::kLogSoftmax) + 1;

// "embedding", "input_norm", "q_proj", ... (the names diagnose reports).
const char* OpName(Op op);
// The op named `name`, if any.
std::optional<Op> OpFromName(std::string_view name);
// True for the ops that run inside a decoder layer (the others report layer -1).
bool IsLayerOp(Op op);

// The routing of one sparse (MoE) layer in one forward; row i is token i of the packed batch.
struct RoutingDecision {
  torch::Tensor experts;  // [tokens, k] int64: each token's experts in rank order (best first)
  torch::Tensor weights;  // [tokens, k] float32: their weights (detached)
  torch::Tensor load;     // [num_experts] int64: how many of the tokens chose each expert
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;

  // Called once per op and forward with the op's output, before anything downstream reads it.
  // Row i of `output` (first dimension) is token token_rows[i] of the forward's packed batch, or
  // token i when `token_rows` is null (every op inside Transformer::Hidden). `layer` is the
  // decoder layer, or -1 for ops outside the layers. The tensor may be part of an autograd
  // graph: an observer copies what it keeps (detached). It must not change the values, except a
  // test that injects a perturbation on purpose (the change then flows downstream).
  virtual void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                        const std::vector<int64_t>* token_rows) = 0;

  // Called once per sparse layer and forward, after its router chose (before the experts run),
  // with every token of the forward's packed batch. Default: ignored. The tensors are the
  // model's own: an observer that keeps them past the call keeps references, never writes.
  virtual void OnRouting(int64_t /*layer*/, const RoutingDecision& /*routing*/) {}
};

// What an op site hands the observer: null observer = nothing to do.
struct OpTap {
  ForwardObserver* observer = nullptr;
  int64_t layer = -1;

  void operator()(Op op, const torch::Tensor& output) const {
    if (observer != nullptr) observer->OnOutput(layer, op, output, nullptr);
  }
  void operator()(const RoutingDecision& routing) const {
    if (observer != nullptr) observer->OnRouting(layer, routing);
  }
  bool active() const { return observer != nullptr; }
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_FORWARD_OBSERVER_H_
