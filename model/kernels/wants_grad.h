// Whether a kernel op must record an autograd graph: grad mode is on and an input requires grad.
// When it need not, the ops run their kernel directly instead of through an autograd Function:
// a decode step applies ~180 kernel ops, and a Function's node, output wrapping and saved
// tensors cost a few microseconds each even under NoGradGuard. Same kernel, same bits.
#ifndef LOCKSTEP_MODEL_KERNELS_WANTS_GRAD_H_
#define LOCKSTEP_MODEL_KERNELS_WANTS_GRAD_H_

#include <torch/torch.h>

namespace lockstep::kernels {

template <class... Tensors>
bool WantsGrad(const Tensors&... inputs) {
  return torch::GradMode::is_enabled() && ((inputs.defined() && inputs.requires_grad()) || ...);
}

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_WANTS_GRAD_H_
