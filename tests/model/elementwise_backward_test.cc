// The batch-invariant RMSNorm's and SiLU·mul's backward kernels (rms_norm_backward_cpu.h,
// silu_mul_backward_cpu.h) give the gradients autograd finds through the fast-mode formulas, at
// every SIMD level: rows of whole 16-float blocks and ragged ones, Qwen3's per-head rows, one
// row and many (several threads' parts), and SiLU·mul's bits agree across levels.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "model/kernels/elementwise_ops.h"
#include "model/ops.h"
#include "tests/kernels/simd_levels.h"

namespace lockstep {
namespace {

using kernels::testing::AvailableSimdLevels;
using kernels::testing::ScopedSimdLevel;

double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  return ((actual - expected).abs().max() / expected.abs().max()).item<double>();
}

TEST(ElementwiseBackwardTest, RmsNormMatchesAutogradThroughTheFormula) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 768}, {37, 100}, {300, 64},
                                                    {2, 50, 4, 64}, {5, 7}};
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (kernels::SimdLevel level : AvailableSimdLevels()) {
      ScopedSimdLevel scoped(level);
      for (const std::vector<int64_t>& shape : shapes) {
        SCOPED_TRACE(::testing::Message() << "shape " << c10::IntArrayRef(shape) << ", level "
                                          << static_cast<int>(level) << ", threads " << threads);
        torch::manual_seed(shape.back() + static_cast<int64_t>(shape.size()));
        const torch::Tensor x = (torch::randn(shape) * 3).requires_grad_();
        const torch::Tensor weight = (torch::rand({shape.back()}) + 0.5).requires_grad_();
        const torch::Tensor grad_y = torch::randn(shape);
        kernels::FixedOrderRmsNorm(x, weight, 1e-6).backward(grad_y);

        torch::Tensor x64 = x.detach().to(torch::kFloat64).requires_grad_();
        torch::Tensor weight64 = weight.detach().to(torch::kFloat64).requires_grad_();
        ops::RmsNormFormula(x64, weight64, 1e-6).backward(grad_y.to(torch::kFloat64));
        EXPECT_LT(RelativeError(x.grad(), x64.grad().to(torch::kFloat32)), 1e-5);
        EXPECT_LT(RelativeError(weight.grad(), weight64.grad().to(torch::kFloat32)), 1e-5);
      }
    }
  }
  at::set_num_threads(1);
}

TEST(ElementwiseBackwardTest, SiluMulMatchesAutogradAndEveryLevelGivesTheSameBits) {
  torch::manual_seed(11);
  // 16 * 97 + 5 elements: vector bodies and scalar tails; values far into both tails of exp.
  const torch::Tensor gate_values = torch::randn({97 * 16 + 5}) * 6;
  const torch::Tensor up_values = torch::randn({97 * 16 + 5});
  const torch::Tensor grad_out = torch::randn({97 * 16 + 5});
  torch::Tensor gate64 = gate_values.to(torch::kFloat64).requires_grad_();
  torch::Tensor up64 = up_values.to(torch::kFloat64).requires_grad_();
  ops::SiluMulFormula(gate64, up64).backward(grad_out.to(torch::kFloat64));

  std::vector<torch::Tensor> gate_grads, up_grads;
  for (kernels::SimdLevel level : AvailableSimdLevels()) {
    ScopedSimdLevel scoped(level);
    const torch::Tensor gate = gate_values.clone().requires_grad_();
    const torch::Tensor up = up_values.clone().requires_grad_();
    kernels::FixedOrderSiluMul(gate, up).backward(grad_out);
    EXPECT_LT(RelativeError(gate.grad(), gate64.grad().to(torch::kFloat32)), 1e-5);
    EXPECT_LT(RelativeError(up.grad(), up64.grad().to(torch::kFloat32)), 1e-5);
    gate_grads.push_back(gate.grad());
    up_grads.push_back(up.grad());
  }
  for (size_t i = 1; i < gate_grads.size(); ++i) {
    EXPECT_TRUE(torch::equal(gate_grads[i].view(torch::kInt32), gate_grads[0].view(torch::kInt32)))
        << "level " << i;
    EXPECT_TRUE(torch::equal(up_grads[i].view(torch::kInt32), up_grads[0].view(torch::kInt32)))
        << "level " << i;
  }
}

}  // namespace
}  // namespace lockstep
