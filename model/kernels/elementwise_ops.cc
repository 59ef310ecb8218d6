#include "model/kernels/elementwise_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "model/kernels/argmax_cpu.h"
#include "model/kernels/log_softmax_cpu.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/parallel_grain.h"
#include "model/kernels/recompute_backward.h"
#include "model/kernels/rms_norm_backward_cpu.h"
#include "model/kernels/rms_norm_cpu.h"
#include "model/kernels/silu_mul_backward_cpu.h"
#include "model/kernels/silu_mul_cpu.h"
#include "model/kernels/wants_grad.h"
#include "model/ops.h"

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void CheckFloat(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "batch-invariant ", what, " needs float32");
}

torch::Tensor RunRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (x.is_cuda()) return RmsNormOnCuda(x, weight, eps);
  torch::Tensor xc = x.contiguous();
  torch::Tensor wc = weight.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t dim = x.size(-1);
  at::parallel_for(0, xc.numel() / dim, RowGrain(dim), [&](int64_t begin, int64_t end) {
    RmsNormRows(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), dim, eps, begin,
                end);
  });
  return y;
}

torch::Tensor RunSiluMul(const torch::Tensor& gate, const torch::Tensor& up) {
  if (gate.is_cuda()) return SiluMulOnCuda(gate, up);
  torch::Tensor g = gate.contiguous();
  torch::Tensor u = up.contiguous();
  torch::Tensor out = torch::empty_like(g);
  at::parallel_for(0, g.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    SiluMul(g.data_ptr<float>(), u.data_ptr<float>(), out.data_ptr<float>(), begin, end);
  });
  return out;
}

torch::Tensor RunTargetLogProbs(const torch::Tensor& logits, const torch::Tensor& targets,
                                double temperature) {
  if (logits.is_cuda()) return TargetLogProbsOnCuda(logits, targets, temperature);
  torch::Tensor l = logits.contiguous();
  torch::Tensor t = targets.contiguous();
  torch::Tensor out = torch::empty({l.size(0)}, l.options());
  const int64_t vocab = l.size(1);
  at::parallel_for(0, l.size(0), 1, [&](int64_t begin, int64_t end) {
    TargetLogProbsRows(l.data_ptr<float>(), t.data_ptr<int64_t>(), out.data_ptr<float>(), vocab,
                       static_cast<float>(temperature), begin, end);
  });
  return out;
}

// RMSNorm's gradients on the CPU (rms_norm_backward_cpu.h): rows split into one fixed part per
// thread, each part's grad_w terms in its own row of `partial`, the parts summed in order.
std::pair<torch::Tensor, torch::Tensor> RmsNormBackwardCpu(const torch::Tensor& x,
                                                           const torch::Tensor& weight,
                                                           const torch::Tensor& grad_y,
                                                           double eps) {
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = weight.contiguous();
  const torch::Tensor gc = grad_y.contiguous();
  torch::Tensor grad_x = torch::empty_like(xc);
  const int64_t dim = x.size(-1);
  const int64_t rows = xc.numel() / dim;
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows / RowGrain(dim)));
  torch::Tensor partial = torch::zeros({parts, dim}, wc.options());
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      RmsNormBackwardRows(xc.data_ptr<float>(), wc.data_ptr<float>(), gc.data_ptr<float>(),
                          grad_x.data_ptr<float>(), partial.data_ptr<float>() + part * dim, dim,
                          eps, rows * part / parts, rows * (part + 1) / parts);
    }
  });
  return {grad_x, partial.sum(0)};
}

// SiLU·mul's gradients on the CPU (silu_mul_backward_cpu.h).
std::pair<torch::Tensor, torch::Tensor> SiluMulBackwardCpu(const torch::Tensor& gate,
                                                           const torch::Tensor& up,
                                                           const torch::Tensor& grad_out) {
  const torch::Tensor g = gate.contiguous();
  const torch::Tensor u = up.contiguous();
  const torch::Tensor d = grad_out.contiguous();
  torch::Tensor grad_gate = torch::empty_like(g);
  torch::Tensor grad_up = torch::empty_like(u);
  at::parallel_for(0, g.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    SiluMulBackward(g.data_ptr<float>(), u.data_ptr<float>(), d.data_ptr<float>(),
                    grad_gate.data_ptr<float>(), grad_up.data_ptr<float>(), begin, end);
  });
  return {grad_gate, grad_up};
}

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               double eps) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return RunRmsNorm(x, weight, eps);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto saved = ctx->get_saved_variables();
    if (saved[0].is_cuda()) {
      auto g = RecomputeBackward(
          [eps](const auto& in) { return ops::RmsNormFormula(in[0], in[1], eps); }, saved,
          grads[0]);
      return {g[0], g[1], torch::Tensor()};
    }
    auto [grad_x, grad_w] = RmsNormBackwardCpu(saved[0], saved[1], grads[0], eps);
    return {grad_x, grad_w, torch::Tensor()};
  }
};

struct SiluMulFunction : public torch::autograd::Function<SiluMulFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor gate, torch::Tensor up) {
    ctx->save_for_backward({gate, up});
    return RunSiluMul(gate, up);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    if (saved[0].is_cuda()) {
      return RecomputeBackward([](const auto& in) { return ops::SiluMulFormula(in[0], in[1]); },
                               saved, grads[0]);
    }
    auto [grad_gate, grad_up] = SiluMulBackwardCpu(saved[0], saved[1], grads[0]);
    return {grad_gate, grad_up};
  }
};

struct TargetLogProbsFunction : public torch::autograd::Function<TargetLogProbsFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor targets,
                               double temperature) {
    ctx->save_for_backward({logits, targets});
    ctx->saved_data["temperature"] = temperature;
    return RunTargetLogProbs(logits, targets, temperature);
  }
  // d/dlogits = g * (onehot(target) - softmax(logits / T)) / T
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const auto saved = ctx->get_saved_variables();
    torch::Tensor probs = torch::softmax(saved[0] / temperature, -1);
    torch::Tensor grad = -probs;
    grad.scatter_add_(1, saved[1].unsqueeze(1), torch::ones({probs.size(0), 1}, probs.options()));
    return {grad * (grads[0].unsqueeze(1) / temperature), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor FixedOrderRmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                                double eps) {
  CheckFloat(x, "RMSNorm");
  if (!WantsGrad(x, weight)) return RunRmsNorm(x, weight, eps);
  return RmsNormFunction::apply(x, weight, eps);
}

torch::Tensor FixedOrderSiluMul(const torch::Tensor& gate, const torch::Tensor& up) {
  CheckFloat(gate, "SiLU");
  if (!WantsGrad(gate, up)) return RunSiluMul(gate, up);
  return SiluMulFunction::apply(gate, up);
}

torch::Tensor FixedOrderTargetLogProbs(const torch::Tensor& logits,
                                       const torch::Tensor& targets, double temperature) {
  CheckFloat(logits, "log-softmax");
  if (!WantsGrad(logits)) return RunTargetLogProbs(logits, targets, temperature);
  // On CUDA the backward's scatter_add_ needs the targets on the logits' device.
  const torch::Tensor on_device = logits.is_cuda() ? targets.to(logits.device()) : targets;
  return TargetLogProbsFunction::apply(logits, on_device, temperature);
}

torch::Tensor FixedOrderLogSoftmax(const torch::Tensor& logits, double temperature) {
  CheckFloat(logits, "log-softmax");
  if (logits.is_cuda()) return LogSoftmaxOnCuda(logits, temperature);
  torch::Tensor l = logits.contiguous();
  torch::Tensor out = torch::empty_like(l);
  const int64_t vocab = l.size(-1);
  at::parallel_for(0, l.numel() / vocab, 1, [&](int64_t begin, int64_t end) {
    LogSoftmaxRows(l.data_ptr<float>(), out.data_ptr<float>(), vocab,
                   static_cast<float>(temperature), begin, end);
  });
  return out;
}

torch::Tensor ArgMaxRows(const torch::Tensor& x) {
  CheckFloat(x, "argmax");
  TORCH_CHECK(x.dim() == 2 && x.size(1) <= std::numeric_limits<int32_t>::max(),
              "argmax: rows must be a 2-D tensor of at most 2^31 - 1 columns");
  if (x.is_cuda()) return ArgMaxRowsOnCuda(x);
  torch::Tensor xc = x.contiguous();
  torch::Tensor out = torch::empty({x.size(0)}, torch::kInt64);
  const int64_t cols = x.size(1);
  at::parallel_for(0, x.size(0), RowGrain(cols), [&](int64_t begin, int64_t end) {
    ArgMaxRows(xc.data_ptr<float>(), cols, out.data_ptr<int64_t>(), begin, end);
  });
  return out;
}

}  // namespace lockstep::kernels
