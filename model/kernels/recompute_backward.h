// Backward of a batch-invariant op by ordinary differentiable math: re-run the op's fast-mode
// formula on the saved inputs with autograd on and differentiate it. Gradients need not be
// batch-invariant (DESIGN.md), only correct.
#ifndef LOCKSTEP_MODEL_KERNELS_RECOMPUTE_BACKWARD_H_
#define LOCKSTEP_MODEL_KERNELS_RECOMPUTE_BACKWARD_H_

#include <functional>
#include <vector>

#include <torch/torch.h>

namespace lockstep::kernels {

// Returns d(formula(inputs)) / d(inputs) contracted with grad_output, one tensor per input
// (undefined where the formula does not depend on that input).
inline std::vector<torch::Tensor> RecomputeBackward(
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& formula,
    const std::vector<torch::Tensor>& saved, const torch::Tensor& grad_output) {
  torch::AutoGradMode enable_grad(true);
  std::vector<torch::Tensor> inputs;
  for (const torch::Tensor& t : saved) inputs.push_back(t.detach().requires_grad_(true));
  torch::Tensor output = formula(inputs);
  return torch::autograd::grad({output}, inputs, {grad_output}, /*retain_graph=*/false,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_RECOMPUTE_BACKWARD_H_
