#include "model/kernels/linear_ops.h"

#include <ATen/Parallel.h>

namespace lockstep::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::Tensor RunLinear(const torch::Tensor& x2d, const PackedLinearWeight& packed,
                        const torch::Tensor& bias) {
  torch::Tensor x = x2d.contiguous();
  torch::Tensor y = torch::empty({x.size(0), packed.out_features}, x.options());
  LinearProblem problem;
  problem.x = x.data_ptr<float>();
  problem.x_stride = x.size(1);
  problem.rows = x.size(0);
  problem.weight = &packed;
  problem.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  problem.y = y.data_ptr<float>();
  problem.y_stride = packed.out_features;
  if (problem.rows == 0) return y;
  at::parallel_for(0, NumLinearTiles(problem), 1, [&](int64_t begin, int64_t end) {
    LinearTiles(problem, begin, end);
  });
  return y;
}

// forward: the kernel. backward: dx = dy W, dW = dy^T x, db = sum(dy).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  // The bias travels as an optional: autograd inspects every Tensor argument's device, and an
  // absent bias is an undefined tensor.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               c10::optional<torch::Tensor> maybe_bias, LinearPackCache* cache) {
    const torch::Tensor bias = maybe_bias.value_or(torch::Tensor());
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.defined();
    LinearPackCache local;
    const PackedLinearWeight packed = (cache != nullptr ? cache : &local)->Get(weight);
    torch::Tensor x2d = x.reshape({-1, x.size(-1)});
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return RunLinear(x2d, packed, bias).view(shape);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    torch::Tensor grad = grad_outputs[0].reshape({-1, weight.size(0)});
    torch::Tensor grad_x = torch::matmul(grad, weight).view(x.sizes());
    torch::Tensor grad_weight = torch::matmul(grad.t(), x.reshape({-1, x.size(-1)}));
    torch::Tensor grad_bias = ctx->saved_data["has_bias"].toBool() ? grad.sum(0) : torch::Tensor();
    return {grad_x, grad_weight, grad_bias, torch::Tensor()};
  }
};

}  // namespace

PackedLinearWeight LinearPackCache::Get(const torch::Tensor& weight) {
  TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && weight.dim() == 2,
              "batch-invariant linear needs a 2-D float32 weight");
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t version = static_cast<int64_t>(weight._version());
  if (data_ != weight.data_ptr() || version_ != version || numel_ != weight.numel()) {
    torch::Tensor w = weight.detach().contiguous();
    // Re-packing into the buffer we have avoids first-touch page faults (hundreds of ms for an
    // LM head) after every optimizer step; allowed only while no caller still holds the buffer.
    const bool reusable = packed_.data && packed_.data.use_count() == 1 &&
                          packed_.out_features == w.size(0) && packed_.in_features == w.size(1);
    if (reusable) {
      RepackLinearWeight(w.data_ptr<float>(), &packed_);
    } else {
      packed_ = PackLinearWeight(w.data_ptr<float>(), w.size(0), w.size(1));
    }
    data_ = weight.data_ptr();
    version_ = version;
    numel_ = weight.numel();
  }
  return packed_;
}

void LinearPackCache::Stage(const torch::Tensor& next) {
  TORCH_CHECK(next.scalar_type() == torch::kFloat32 && next.dim() == 2,
              "batch-invariant linear needs a 2-D float32 weight");
  torch::Tensor w = next.detach().contiguous();
  PackedLinearWeight packed = PackLinearWeight(w.data_ptr<float>(), w.size(0), w.size(1));
  std::lock_guard<std::mutex> lock(mu_);
  staged_ = std::move(packed);
  staged_data_ = next.data_ptr();
  staged_numel_ = next.numel();
}

bool LinearPackCache::in_use() {
  std::lock_guard<std::mutex> lock(mu_);
  return packed_.data != nullptr;
}

PackedLinearWeight LinearPackCache::Commit(const torch::Tensor& weight) {
  std::lock_guard<std::mutex> lock(mu_);
  PackedLinearWeight previous;
  if (staged_.data && staged_data_ == weight.data_ptr() && staged_numel_ == weight.numel()) {
    previous = std::move(packed_);
    packed_ = std::move(staged_);
    data_ = weight.data_ptr();
    version_ = static_cast<int64_t>(weight._version());
    numel_ = weight.numel();
  }
  staged_ = PackedLinearWeight();
  staged_data_ = nullptr;
  staged_numel_ = -1;
  return previous;
}

torch::Tensor BatchInvariantLinear(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, LinearPackCache* cache) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "batch-invariant linear needs float32 input");
  TORCH_CHECK(x.size(-1) == weight.size(1), "linear: input features ", x.size(-1),
              " != weight in_features ", weight.size(1));
  c10::optional<torch::Tensor> maybe_bias;
  if (bias.defined()) maybe_bias = bias;
  return LinearFunction::apply(x, weight, maybe_bias, cache);
}

}  // namespace lockstep::kernels
