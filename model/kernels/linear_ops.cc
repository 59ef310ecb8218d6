#include "model/kernels/linear_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <vector>

#include "model/kernels/kernel_team_ops.h"
#include "model/kernels/linear_cpu.h"
#include "model/kernels/ops_cuda.h"
#include "model/kernels/tile_claims_cpu.h"
#include "model/kernels/wants_grad.h"

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void CheckLinearInputs(const torch::Tensor& x, const torch::Tensor& weight) {
  const bool cuda_bfloat16 = x.is_cuda() && x.scalar_type() == torch::kBFloat16 &&
                             weight.scalar_type() == torch::kBFloat16;
  TORCH_CHECK(((x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32) ||
               cuda_bfloat16) &&
                  weight.dim() == 2,
              "batch-invariant linear needs float32 input and a 2-D float32 weight (or both "
              "bfloat16 on CUDA)");
  TORCH_CHECK(x.size(-1) == weight.size(1), "linear: input features ", x.size(-1),
              " != weight in_features ", weight.size(1));
}

// The problem of y = x W^T (+ b) for a contiguous 2-D float32 x, W and y.
LinearProblem MakeProblem(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                          const torch::Tensor& y) {
  LinearProblem problem;
  problem.x = x.data_ptr<float>();
  problem.x_stride = x.size(1);
  problem.rows = x.size(0);
  problem.weight = w.data_ptr<float>();
  problem.out_features = w.size(0);
  problem.in_features = w.size(1);
  problem.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  problem.y = y.data_ptr<float>();
  problem.y_stride = w.size(0);
  return problem;
}

// All tiles of `problems` in one parallel region (or on the kernel team the calling thread
// leads: kernel_team_ops.h). One part per thread: each thread takes one part (or the caller all
// of them, when it runs inline), and a thread done with its own range takes the others' last
// tiles.
void RunProblems(const std::vector<LinearProblem>& problems) {
  const int count = static_cast<int>(problems.size());
  const int64_t num_tiles = NumLinearTiles(problems.data(), count);
  if (num_tiles == 0) return;
  TileClaims claims(num_tiles,
                    static_cast<int>(std::min<int64_t>(ParallelPartsThreads(), num_tiles)));
  ParallelParts(claims.num_parts(), [&](int64_t part) {
    LinearClaimedTiles(problems.data(), count, &claims, static_cast<int>(part));
  });
}

// x2d [M, K] through each weight on the CPU: one region for all of them.
std::vector<torch::Tensor> RunLinears(const torch::Tensor& x2d,
                                      const std::vector<torch::Tensor>& weights,
                                      const std::vector<torch::Tensor>& biases) {
  const torch::Tensor x = x2d.contiguous();
  std::vector<torch::Tensor> keep_alive, outputs;
  std::vector<LinearProblem> problems;
  for (size_t i = 0; i < weights.size(); ++i) {
    keep_alive.push_back(weights[i].contiguous());
    outputs.push_back(torch::empty({x.size(0), weights[i].size(0)}, x.options()));
    problems.push_back(MakeProblem(x, keep_alive.back(), biases[i], outputs.back()));
  }
  RunProblems(problems);
  return outputs;
}

// x [..., K] as rows [M, K], and y [M, N] back as [..., N]. A decode step's linears are 2-D
// already: no reshape and view for them.
torch::Tensor AsRows(const torch::Tensor& x) {
  return x.dim() == 2 ? x : x.reshape({-1, x.size(-1)});
}
torch::Tensor AsLeadingDimsOf(const torch::Tensor& y2d, const torch::Tensor& x) {
  if (x.dim() == 2) return y2d;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = y2d.size(1);
  return y2d.view(shape);
}

// x [..., K] -> y [..., N].
torch::Tensor RunLinearNd(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias) {
  const torch::Tensor rows = AsRows(x);
  return AsLeadingDimsOf(
      x.is_cuda() ? LinearOnCuda(rows, weight, bias) : RunLinears(rows, {weight}, {bias})[0], x);
}

// forward: the kernel. backward: dx = dy W, dW = dy^T x, db = sum(dy).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  // The bias travels as an optional: autograd inspects every Tensor argument's device, and an
  // absent bias is an undefined tensor.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               c10::optional<torch::Tensor> maybe_bias) {
    const torch::Tensor bias = maybe_bias.value_or(torch::Tensor());
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.defined();
    return RunLinearNd(x, weight, bias);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    // (.to: the kernel's output is float32 also for bfloat16 inputs on CUDA; a no-op otherwise)
    torch::Tensor grad = grad_outputs[0].reshape({-1, weight.size(0)}).to(weight.scalar_type());
    torch::Tensor grad_x = torch::matmul(grad, weight).view(x.sizes());
    torch::Tensor grad_weight = torch::matmul(grad.t(), x.reshape({-1, x.size(-1)}));
    torch::Tensor grad_bias = ctx->saved_data["has_bias"].toBool() ? grad.sum(0) : torch::Tensor();
    return {grad_x, grad_weight, grad_bias};
  }
};

}  // namespace

torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  CheckLinearInputs(x, weight);
  if (!WantsGrad(x, weight, bias)) return RunLinearNd(x, weight, bias);
  c10::optional<torch::Tensor> maybe_bias;
  if (bias.defined()) maybe_bias = bias;
  return LinearFunction::apply(x, weight, maybe_bias);
}

std::vector<torch::Tensor> FixedOrderLinears(const torch::Tensor& x,
                                             const std::vector<torch::Tensor>& weights,
                                             const std::vector<torch::Tensor>& biases) {
  TORCH_CHECK(biases.size() == weights.size(), "linears: ", weights.size(), " weights but ",
              biases.size(), " biases");
  bool separately = x.is_cuda() || WantsGrad(x);
  for (size_t i = 0; i < weights.size(); ++i) {
    separately = separately || WantsGrad(weights[i], biases[i]);
  }
  std::vector<torch::Tensor> outputs;
  if (separately) {  // autograd's graph, or the CUDA kernel: one call each
    for (size_t i = 0; i < weights.size(); ++i) {
      outputs.push_back(FixedOrderLinear(x, weights[i], biases[i]));
    }
    return outputs;
  }
  for (size_t i = 0; i < weights.size(); ++i) CheckLinearInputs(x, weights[i]);
  outputs = RunLinears(AsRows(x), weights, biases);
  for (torch::Tensor& y : outputs) y = AsLeadingDimsOf(y, x);
  return outputs;
}

int KernelThreads(int64_t num_items) {
  std::mutex mu;
  std::set<int> seen;
  at::parallel_for(0, num_items, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(at::get_thread_num());
  });
  return static_cast<int>(seen.size());
}

}  // namespace lockstep::kernels
