#include "model/forward_observer.h"

#include <array>

namespace lockstep {
namespace {

constexpr std::array<const char*, kNumOps> kOpNames = {
    "embedding",   "input_norm", "q_proj",    "k_proj",  "v_proj",
    "q_norm",      "k_norm",     "rope_q",    "rope_k",  "attention",
    "o_proj",      "attention_residual",      "post_attention_norm",
    "gate_proj",   "up_proj",    "silu_mul",  "down_proj",
    "router_logits", "moe",
    "mlp_residual", "final_norm", "lm_head",  "log_softmax",
};

}  // namespace

const char* OpName(Op op) { return kOpNames[static_cast<int>(op)]; }

std::optional<Op> OpFromName(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOpNames[i]) return static_cast<Op>(i);
  }
  return std::nullopt;
}

bool IsLayerOp(Op op) {
  return op != Op::kEmbedding && op != Op::kFinalNorm && op != Op::kLmHead &&
         op != Op::kLogSoftmax;
}

}  // namespace lockstep
