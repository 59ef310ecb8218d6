// LibTorch glue for the fixed-order row and element kernels (FixedOrder* as in linear_ops.h):
// RMSNorm (rms_norm_cpu.h), SiLU·mul (silu_mul_cpu.h), log-softmax (log_softmax_cpu.h), argmax
// (argmax_cpu.h). Each but argmax is differentiable; the backward differentiates the fast-mode
// formula (recompute_backward.h). CUDA tensors run the CUDA kernels (ops_cuda.h).
#ifndef LOCKSTEP_MODEL_KERNELS_ELEMENTWISE_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_ELEMENTWISE_OPS_H_

#include <torch/torch.h>

namespace lockstep::kernels {

// Hugging Face RMSNorm over the last dimension. x, weight: float32.
torch::Tensor FixedOrderRmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                                double eps);

// silu(gate) * up. gate, up: float32, same shape.
torch::Tensor FixedOrderSiluMul(const torch::Tensor& gate, const torch::Tensor& up);

// log_softmax(logits / temperature)[i, targets[i]]: [rows] float32. logits: [rows, vocab].
torch::Tensor FixedOrderTargetLogProbs(const torch::Tensor& logits,
                                       const torch::Tensor& targets, double temperature);

// log_softmax(logits / temperature) over the last dimension, bit-identical to the values of
// FixedOrderTargetLogProbs (for sampling). Not differentiable.
torch::Tensor FixedOrderLogSoftmax(const torch::Tensor& logits, double temperature);

// First index of the largest value of each row of x [rows, cols] (float32; NaN never wins), as
// int64 [rows]. Exact, hence the same in every mode and batch.
torch::Tensor ArgMaxRows(const torch::Tensor& x);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_ELEMENTWISE_OPS_H_
