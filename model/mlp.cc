#include "model/mlp.h"

#include <utility>
#include <vector>

namespace lockstep {

MlpImpl::MlpImpl(int64_t hidden_size, int64_t intermediate_size, torch::Dtype dtype,
                 NumericMode mode)
    : mode_(mode) {
  gate_proj =
      register_module("gate_proj", Linear(hidden_size, intermediate_size, false, dtype, mode));
  up_proj = register_module("up_proj", Linear(hidden_size, intermediate_size, false, dtype, mode));
  down_proj =
      register_module("down_proj", Linear(intermediate_size, hidden_size, false, dtype, mode));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x, ForwardKind kind, const OpTap& tap) {
  // One kernel call for both (ForwardLinears): an observer timing ops sees gate take the call's
  // time and up none.
  std::vector<torch::Tensor> gate_up = ForwardLinears(x, {gate_proj.get(), up_proj.get()}, kind);
  torch::Tensor gate = std::move(gate_up[0]);
  tap(Op::kGateProj, gate);
  torch::Tensor up = std::move(gate_up[1]);
  tap(Op::kUpProj, up);
  torch::Tensor gated = ops::SiluMul(gate, up, mode_);
  tap(Op::kSiluMul, gated);
  torch::Tensor down = down_proj(gated, kind);
  tap(Op::kDownProj, down);
  return down;
}

}  // namespace lockstep
