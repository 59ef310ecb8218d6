// LibTorch glue for the fixed-order top-k routing of a mixture-of-experts layer (kernel:
// moe_routing_cpu.h). Both numeric modes run it: the router's softmax is over num_experts
// values (8 to 128), cheap beside the experts, and one routine means one tie rule.
#ifndef LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_OPS_H_

#include <torch/torch.h>

namespace lockstep::kernels {

struct TopKRouting {
  torch::Tensor weights;  // [rows, k] float32, rank order (largest first); differentiable
  torch::Tensor experts;  // [rows, k] int64, the chosen expert of each rank
};

// Routes each row of `logits` ([rows, num_experts], any float dtype: softmax runs in float32)
// to its k most probable experts, lowest index first among equals, with the chosen
// probabilities as weights (renormalised to sum 1 when `normalize`). A row's result depends on
// that row only. Backward (when the logits need a gradient) differentiates
// softmax(logits).gather(experts) (renormalised) in stock LibTorch ops. Thread-safe. No CUDA
// kernel: CUDA logits are a c10::Error.
TopKRouting FixedOrderTopKRouting(const torch::Tensor& logits, int64_t k, bool normalize);

// The weights' formula in stock differentiable ops, for the given choices: what the backward
// differentiates, and a check for tests.
torch::Tensor TopKRoutingWeightsFormula(const torch::Tensor& logits, const torch::Tensor& experts,
                                        bool normalize);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_MOE_ROUTING_OPS_H_
