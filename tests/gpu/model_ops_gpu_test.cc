// The model's batch-invariant ops on CUDA tensors, through the op layer the layers call
// (model/ops.h, model/kernels/*_ops.h, which dispatch CUDA tensors to model/kernels/ops_cuda.h):
// against the CPU ops within a tolerance (GPU and CPU bits are not meant to agree, except RoPE's
// and argmax's, which are exact), and row invariance: a row's bits are the same alone, inside
// batches of 7 and 64 rows, and at another position in the batch. Attention: decode equals
// prefill and a packed batch equals each sequence alone, bit for bit. Skips cleanly without a
// CUDA LibTorch and a GPU (every case). COMPILED ONLY: no GPU has run it yet.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>
#include <vector>

#include "model/kernels/attention_ops.h"
#include "model/kernels/elementwise_ops.h"
#include "model/kernels/moe_routing_ops.h"
#include "model/kernels/rope_ops.h"
#include "model/ops.h"

namespace lockstep {
namespace {

constexpr NumericMode kInvariant = NumericMode::kBatchInvariant;

// torch::cuda::is_available() is false with a CPU-only LibTorch as well as without a GPU.
#define LOCKSTEP_REQUIRE_TORCH_CUDA()                                                    \
  do {                                                                                   \
    if (!torch::cuda::is_available()) {                                                  \
      GTEST_SKIP() << "needs a CUDA LibTorch (-DTorch_DIR) and a GPU; this process has " \
                   << "no CUDA device LibTorch can use";                                 \
    }                                                                                    \
  } while (0)

torch::Tensor Cuda(const torch::Tensor& t) { return t.to(torch::kCUDA); }

torch::Tensor Host(const torch::Tensor& t) { return t.detach().to(torch::kCPU).contiguous(); }

// Same bits (NaN payloads and signed zeros included).
bool SameBits(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = Host(a), y = Host(b);
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void ExpectClose(const torch::Tensor& gpu, const torch::Tensor& cpu, double tolerance = 1e-5) {
  EXPECT_TRUE(torch::allclose(Host(gpu), Host(cpu), tolerance, tolerance))
      << "max |gpu - cpu| = " << (Host(gpu) - Host(cpu)).abs().max().item<double>();
}

// op(rows) on CUDA for the first 1, 7 and all 64 rows of `x` and for x reversed: row i's bits
// never change.
template <class Op>
void ExpectRowInvariant(const torch::Tensor& x, const Op& op) {
  const torch::Tensor all = op(x);
  for (int64_t rows : {1, 7}) {
    EXPECT_TRUE(SameBits(op(x.narrow(0, 0, rows)), all.narrow(0, 0, rows))) << rows << " rows";
  }
  EXPECT_TRUE(SameBits(op(x.flip({0})).flip({0}), all)) << "rows reversed";
}

TEST(ModelOpsGpuTest, LinearMatchesCpuAndItsRowsAreBatchInvariant) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({64, 96}), w = torch::randn({80, 96}) * 0.1,
                      b = torch::randn({80});
  const auto linear = [&](const torch::Tensor& rows) {
    return ops::Linear(rows, Cuda(w), Cuda(b), kInvariant, ForwardKind::kTraining);
  };
  const torch::Tensor gpu = linear(Cuda(x));
  EXPECT_TRUE(gpu.is_cuda());
  ExpectClose(gpu, ops::Linear(x, w, b, kInvariant, ForwardKind::kTraining));
  ExpectRowInvariant(Cuda(x), linear);
}

TEST(ModelOpsGpuTest, LinearOnBfloat16GivesTheBitsOfItsWidenedInputs) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(2);
  const torch::Tensor x = Cuda(torch::randn({9, 64})).to(torch::kBFloat16);
  const torch::Tensor w = Cuda(torch::randn({32, 64})).to(torch::kBFloat16);
  const torch::Tensor narrow = kernels::FixedOrderLinear(x, w, torch::Tensor());
  EXPECT_EQ(narrow.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(SameBits(narrow, kernels::FixedOrderLinear(x.to(torch::kFloat32),
                                                         w.to(torch::kFloat32), torch::Tensor())));
}

TEST(ModelOpsGpuTest, LinearBackwardOnCudaMatchesCpu) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({5, 24}), w = torch::randn({16, 24}), b = torch::randn({16});
  std::vector<torch::Tensor> grads[2];
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    torch::Tensor xs = (on_gpu ? Cuda(x) : x.clone()).requires_grad_(true);
    torch::Tensor ws = (on_gpu ? Cuda(w) : w.clone()).requires_grad_(true);
    torch::Tensor bs = (on_gpu ? Cuda(b) : b.clone()).requires_grad_(true);
    ops::Linear(xs, ws, bs, kInvariant, ForwardKind::kTraining).pow(2).sum().backward();
    grads[on_gpu] = {xs.grad(), ws.grad(), bs.grad()};
  }
  for (int i = 0; i < 3; ++i) ExpectClose(grads[1][i], grads[0][i], 1e-4);
}

TEST(ModelOpsGpuTest, RowOpsMatchCpuAndAreBatchInvariant) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({64, 200}), up = torch::randn({64, 200});
  const torch::Tensor weight = torch::rand({200}) + 0.5;
  const torch::Tensor targets = torch::randint(0, 200, {64}, torch::kInt64);

  const auto norm = [&](const torch::Tensor& rows) {
    return ops::RmsNorm(rows, Cuda(weight), 1e-6, kInvariant);
  };
  ExpectClose(norm(Cuda(x)), ops::RmsNorm(x, weight, 1e-6, kInvariant));
  ExpectRowInvariant(Cuda(x), norm);

  const torch::Tensor both = torch::stack({x, up}, 1);  // [64, 2, 200]: gate and up travel together
  const auto silu_mul = [&](const torch::Tensor& rows) {
    return ops::SiluMul(rows.select(1, 0), rows.select(1, 1), kInvariant);
  };
  ExpectClose(silu_mul(Cuda(both)), ops::SiluMul(x, up, kInvariant));
  ExpectRowInvariant(Cuda(both), silu_mul);

  const auto log_softmax = [&](const torch::Tensor& rows) {
    return ops::LogSoftmax(rows, 0.7, kInvariant);
  };
  ExpectClose(log_softmax(Cuda(x)), ops::LogSoftmax(x, 0.7, kInvariant));
  ExpectRowInvariant(Cuda(x), log_softmax);

  // Targets on the host, as the trainer has them; the same bits as the full log-softmax's.
  const torch::Tensor picked = ops::TargetLogProbs(Cuda(x), targets, 0.7, kInvariant);
  EXPECT_TRUE(SameBits(picked, log_softmax(Cuda(x)).gather(1, Cuda(targets).unsqueeze(1))
                                   .squeeze(1)));
  ExpectClose(picked, ops::TargetLogProbs(x, targets, 0.7, kInvariant));
}

TEST(ModelOpsGpuTest, RowOpBackwardsRunOnCuda) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({6, 40}), weight = torch::rand({40}) + 0.5;
  const torch::Tensor targets = torch::randint(0, 40, {6}, torch::kInt64);
  std::vector<torch::Tensor> grads[2];
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    torch::Tensor xs = (on_gpu ? Cuda(x) : x.clone()).requires_grad_(true);
    torch::Tensor ws = (on_gpu ? Cuda(weight) : weight.clone()).requires_grad_(true);
    torch::Tensor normed = ops::RmsNorm(xs, ws, 1e-6, kInvariant);
    torch::Tensor gated = ops::SiluMul(normed, normed, kInvariant);
    ops::TargetLogProbs(gated, targets, 1.0, kInvariant).sum().backward();
    grads[on_gpu] = {xs.grad(), ws.grad()};
  }
  for (int i = 0; i < 2; ++i) ExpectClose(grads[1][i], grads[0][i], 1e-4);
}

TEST(ModelOpsGpuTest, ArgMaxMatchesCpuExactlyAndNanNeverWins) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(6);
  torch::Tensor x = torch::randn({33, 1000});
  x[3][10] = std::numeric_limits<float>::quiet_NaN();
  x[4].fill_(1.0f);  // ties: the first index wins
  const torch::Tensor gpu = ops::ArgMaxRows(Cuda(x));
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_TRUE(torch::equal(Host(gpu), ops::ArgMaxRows(x)));
}

TEST(ModelOpsGpuTest, RopeGivesTheCpuBitsWithHostOrDeviceTables) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(7);
  const torch::Tensor angles = torch::rand({128, 32}) * 10;
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  const torch::Tensor x = torch::randn({20, 4, 32});
  const torch::Tensor positions = torch::randint(0, 128, {20}, torch::kInt64);
  const torch::Tensor cpu = kernels::RotateHalfFromTable(x, cos, sin, positions);
  EXPECT_TRUE(SameBits(kernels::RotateHalfFromTable(Cuda(x), cos, sin, positions), cpu));
  EXPECT_TRUE(SameBits(
      kernels::RotateHalfFromTable(Cuda(x), Cuda(cos), Cuda(sin), Cuda(positions)), cpu));
  EXPECT_THROW(kernels::RotateHalfFromTable(Cuda(x), cos, sin, positions + 128), c10::Error);
}

// GQA: 4 query heads over 2 kv heads, head_dim 32.
struct AttentionInputs {
  torch::Tensor q, keys, values;
};

AttentionInputs RandomAttention(int64_t num_tokens, int64_t num_rows) {
  return {torch::randn({num_tokens, 4, 32}), torch::randn({num_rows, 2, 32}),
          torch::randn({num_rows, 2, 32})};
}

TEST(ModelOpsGpuTest, TrainingAttentionMatchesCpu) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(8);
  const AttentionInputs in = RandomAttention(300, 300);  // past one 256-key tile
  const torch::Tensor gpu = ops::AttentionOverRows(Cuda(in.q), Cuda(in.keys), Cuda(in.values),
                                                   torch::Tensor(), 0, kInvariant);
  ExpectClose(gpu, ops::AttentionOverRows(in.q, in.keys, in.values, torch::Tensor(), 0,
                                          kInvariant));
}

TEST(ModelOpsGpuTest, AttentionDecodeEqualsPrefillAndPackingChangesNoBits) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(9);
  // Two sequences in a shuffled flat cache of 700 rows: 300 and 40 positions.
  const AttentionInputs in = RandomAttention(340, 700);
  const torch::Tensor slots = torch::randperm(700, torch::kInt64);
  const std::vector<torch::Tensor> rows = {slots.narrow(0, 0, 300), slots.narrow(0, 300, 40)};
  const torch::Tensor q = Cuda(in.q), keys = Cuda(in.keys), values = Cuda(in.values);
  const torch::Tensor packed =
      ops::PackedAttentionOverRows(q, keys, values, rows, {0, 0}, {0, 300, 340}, kInvariant);
  // Each sequence alone (prefill) gives the packed bits.
  const torch::Tensor first = ops::AttentionOverRows(q.narrow(0, 0, 300), keys, values, rows[0],
                                                     0, kInvariant);
  EXPECT_TRUE(SameBits(first, packed.narrow(0, 0, 300)));
  // A decode step: the last query of each sequence alone, packed with the other's.
  const torch::Tensor decode_q = torch::stack({q[299], q[339]});
  const torch::Tensor decode = ops::PackedAttentionOverRows(decode_q, keys, values, rows,
                                                            {299, 39}, {0, 1, 2}, kInvariant);
  EXPECT_TRUE(SameBits(decode[0], packed[299]));
  EXPECT_TRUE(SameBits(decode[1], packed[339]));
  // Against the CPU kernel, within tolerance.
  ExpectClose(packed, kernels::FixedOrderAttentionPacked(in.q, in.keys, in.values, rows, {0, 0},
                                                         {0, 300, 340}));
}

TEST(ModelOpsGpuTest, AttentionBackwardOnCudaMatchesCpu) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  torch::manual_seed(10);
  const AttentionInputs in = RandomAttention(12, 12);
  std::vector<torch::Tensor> grads[2];
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    torch::Tensor q = (on_gpu ? Cuda(in.q) : in.q.clone()).requires_grad_(true);
    torch::Tensor k = (on_gpu ? Cuda(in.keys) : in.keys.clone()).requires_grad_(true);
    torch::Tensor v = (on_gpu ? Cuda(in.values) : in.values.clone()).requires_grad_(true);
    ops::AttentionOverRows(q, k, v, torch::Tensor(), 0, kInvariant).pow(2).sum().backward();
    grads[on_gpu] = {q.grad(), k.grad(), v.grad()};
  }
  for (int i = 0; i < 3; ++i) ExpectClose(grads[1][i], grads[0][i], 1e-4);
}

TEST(ModelOpsGpuTest, MoeRoutingOnCudaIsAClearError) {
  LOCKSTEP_REQUIRE_TORCH_CUDA();
  try {
    kernels::FixedOrderTopKRouting(Cuda(torch::randn({3, 8})), 2, true);
    FAIL() << "routing CUDA logits should throw";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what()).find("no CUDA kernel"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lockstep
