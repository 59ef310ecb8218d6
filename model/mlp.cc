#include "model/mlp.h"

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
  torch::Tensor gate = gate_proj(x, kind);
  tap(Op::kGateProj, gate);
  torch::Tensor up = up_proj(x, kind);
  tap(Op::kUpProj, up);
  torch::Tensor gated = ops::SiluMul(gate, up, mode_);
  tap(Op::kSiluMul, gated);
  torch::Tensor down = down_proj(gated, kind);
  tap(Op::kDownProj, down);
  return down;
}

}  // namespace lockstep
