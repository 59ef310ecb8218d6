// LibTorch glue for the fixed-order linear (kernel: linear_cpu.h). The kernels here are named
// for what they compute (FixedOrder*: each output's bits depend on its own inputs and the reduced
// length only), not for a mode: batch-invariant mode runs them always, fast mode where they win.
#ifndef LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_

#include <torch/torch.h>

#include <vector>

namespace lockstep::kernels {

// y = x W^T (+ b) with every output element summed over K in one fixed order (batch-invariant).
// x: [..., K] fp32; weight: [N, K] fp32 (read in place; made contiguous if it is not); bias: [N]
// or undefined. Differentiable: backward is the ordinary matmul math. Thread-safe. CUDA tensors
// run the CUDA kernel (ops_cuda.h; there x and weight may also both be bf16, y is then fp32).
torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias);

// x through several weights at once (q, k and v; gate and up): output i is the bits
// FixedOrderLinear(x, weights[i], biases[i]) gives, and on the CPU without a graph to record
// all of them are one kernel call (one parallel region, not one per weight). biases: one per
// weight, undefined for none. With a graph to record, or on CUDA, one FixedOrderLinear each.
std::vector<torch::Tensor> FixedOrderLinears(const torch::Tensor& x,
                                             const std::vector<torch::Tensor>& weights,
                                             const std::vector<torch::Tensor>& biases);

// How many threads the kernels' at::parallel_for spreads `num_items` >= 2 items over right now:
// at most at::get_num_threads(), and 1 if the kernel glue was built without OpenMP (then every
// tile runs on the calling thread). For tests and benchmarks.
int KernelThreads(int64_t num_items = 64);

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_LINEAR_OPS_H_
