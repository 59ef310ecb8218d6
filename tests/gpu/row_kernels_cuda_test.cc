// RMSNorm, log-softmax, SiLU·mul, RoPE and argmax on the GPU: each against a float64 reference
// with a stated tolerance, and each row's bits the same for M = 1, 7, 64, 1000 rows at any
// position in the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/kernels/argmax_cuda.h"
#include "model/kernels/log_softmax_cuda.h"
#include "model/kernels/rms_norm_cuda.h"
#include "model/kernels/rope_cuda.h"
#include "model/kernels/silu_mul_cuda.h"
#include "tests/gpu/gpu_test_util.h"

namespace lockstep::kernels::cuda {
namespace {

using gpu_test::DeviceBuffer;
using gpu_test::RandomFloats;

constexpr int64_t kDim = 1000;  // not a multiple of any block size
constexpr int64_t kRowCounts[] = {1, 7, 64, 1000};

// Runs `kernel(device_in, device_out, rows)` on `rows` rows of `dim`, returns the output.
template <typename Kernel>
std::vector<float> RunRows(const std::vector<float>& in, int64_t rows, int64_t dim, Kernel kernel) {
  DeviceBuffer<float> din(in), dout(static_cast<size_t>(rows * dim));
  KernelStatus status = kernel(din.get(), dout.get(), rows);
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dout.ToHost();
}

// Row `probe` of `rows_data` ([1000, dim]), placed at the first, middle and last position of
// batches of every kRowCounts size, gives the bits it gives in the full batch.
template <typename Kernel>
void ExpectRowInvariance(const std::vector<float>& rows_data, int64_t dim, Kernel kernel) {
  const auto full = RunRows(rows_data, 1000, dim, kernel);
  for (int64_t m : kRowCounts) {
    for (int64_t probe : {int64_t{0}, int64_t{517}, int64_t{999}}) {
      for (int64_t position : {int64_t{0}, m / 2, m - 1}) {
        auto batch = RandomFloats(m * dim, 100 + m + position);
        std::copy_n(rows_data.begin() + probe * dim, dim, batch.begin() + position * dim);
        auto out = RunRows(batch, m, dim, kernel);
        ASSERT_TRUE(gpu_test::SameBits(&out[position * dim], &full[probe * dim], dim))
            << "row " << probe << " at position " << position << " of M = " << m;
      }
    }
  }
}

TEST(RmsNormCudaTest, MatchesFloat64ReferenceAndIsRowInvariant) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const auto x = RandomFloats(1000 * kDim, 1), weight = RandomFloats(kDim, 2);
  DeviceBuffer<float> dw(weight);
  auto kernel = [&](const float* in, float* out, int64_t rows) {
    return RmsNormCuda(in, dw.get(), out, rows, kDim, 1e-6f, nullptr);
  };
  const auto y = RunRows(x, 1000, kDim, kernel);
  for (int64_t r = 0; r < 1000; r += 37) {
    double sum = 0;
    for (int64_t i = 0; i < kDim; ++i) sum += double{x[r * kDim + i]} * x[r * kDim + i];
    const double inv = 1.0 / std::sqrt(sum / kDim + 1e-6);
    for (int64_t i = 0; i < kDim; ++i) {
      const double ref = weight[i] * (x[r * kDim + i] * inv);
      // Stated tolerance: 1e-5 relative (a 1000-term fp32 sum, then three rounded operations).
      ASSERT_NEAR(y[r * kDim + i], ref, 1e-5 * std::fabs(ref) + 1e-12) << r << " " << i;
    }
  }
  ExpectRowInvariance(x, kDim, kernel);
}

TEST(LogSoftmaxCudaTest, MatchesFloat64ReferenceAndTargetsAgreeBitwise) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t vocab = 5003, rows = 9;
  const float temperature = 0.7f;
  const auto logits = RandomFloats(rows * vocab, 3, 4.0f);
  auto kernel = [&](const float* in, float* out, int64_t n) {
    return LogSoftmaxCuda(in, out, n, vocab, temperature, nullptr);
  };
  const auto out = RunRows(logits, rows, vocab, kernel);
  std::vector<int64_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) {
    targets[r] = (r * 977) % vocab;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < vocab; ++j)
      m = std::fmax(m, double{logits[r * vocab + j]} / temperature);
    for (int64_t j = 0; j < vocab; ++j)
      s += std::exp(double{logits[r * vocab + j]} / temperature - m);
    for (int64_t j = 0; j < vocab; j += 13) {
      const double ref = double{logits[r * vocab + j]} / temperature - m - std::log(s);
      // Stated tolerance: 2e-6 * (1 + |ref|) (fp32 z - m and log of a 5003-term fp32 sum).
      ASSERT_NEAR(out[r * vocab + j], ref, 2e-6 * (1 + std::fabs(ref))) << r << " " << j;
    }
  }
  DeviceBuffer<float> dl(logits), dt_out(rows);
  DeviceBuffer<int64_t> dt(targets);
  LOCKSTEP_KERNEL_OK(
      TargetLogProbsCuda(dl.get(), dt.get(), dt_out.get(), rows, vocab, temperature, nullptr));
  const auto picked = dt_out.ToHost();
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(gpu_test::SameBits(&picked[r], &out[r * vocab + targets[r]], 1)) << r;
  }
  ExpectRowInvariance(RandomFloats(1000 * kDim, 4, 4.0f), kDim,
                      [&](const float* in, float* o, int64_t n) {
                        return LogSoftmaxCuda(in, o, n, kDim, temperature, nullptr);
                      });
}

TEST(SiluMulCudaTest, MatchesFloat64ReferenceAndIsPositionInvariant) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const auto gate = RandomFloats(1000 * kDim, 5, 3.0f), up = RandomFloats(1000 * kDim, 6);
  DeviceBuffer<float> dup(up);
  auto kernel = [&](const float* in, float* out, int64_t rows) {
    return SiluMulCuda(in, dup.get(), out, rows * kDim, nullptr);
  };
  const auto out = RunRows(gate, 1000, kDim, kernel);
  for (size_t i = 0; i < gate.size(); i += 101) {
    const double g = gate[i], ref = g / (1 + std::exp(-g)) * up[i];
    // Stated tolerance: 1e-6 relative, about 8 ulp (the error is at most 3.5 ulp: expf within
    // 2 ulp, then three rounded operations).
    ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << i;
  }
  // Elementwise: the bits of element i depend on gate[i] and up[i] only. Shifted by one element,
  // every element meets a different thread and block; the bits stay.
  std::vector<float> shifted_gate(gate.size() + 1, 0.0f), shifted_up(up.size() + 1, 0.0f);
  std::copy(gate.begin(), gate.end(), shifted_gate.begin() + 1);
  std::copy(up.begin(), up.end(), shifted_up.begin() + 1);
  DeviceBuffer<float> dg(shifted_gate), du(shifted_up), dout(shifted_gate.size());
  LOCKSTEP_KERNEL_OK(SiluMulCuda(dg.get(), du.get(), dout.get(), shifted_gate.size(), nullptr));
  const auto shifted = dout.ToHost();
  EXPECT_TRUE(gpu_test::SameBits(shifted.data() + 1, out.data(), out.size()));
}

TEST(RopeCudaTest, MatchesTheUnfusedFormulaBitwise) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t tokens = 33, heads = 3, head_dim = 64, max_positions = 100;
  const auto x = RandomFloats(tokens * heads * head_dim, 7);
  std::vector<float> cos(max_positions * head_dim), sin(max_positions * head_dim);
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < head_dim; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * (i % (head_dim / 2)) / head_dim);
      cos[p * head_dim + i] = static_cast<float>(std::cos(angle));
      sin[p * head_dim + i] = static_cast<float>(std::sin(angle));
    }
  }
  std::vector<int64_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) positions[t] = (t * 7) % max_positions;
  DeviceBuffer<float> dx(x), dc(cos), ds(sin), dout(x.size());
  DeviceBuffer<int64_t> dp(positions);
  RopeCudaProblem p;
  p.x = dx.get();
  p.cos = dc.get();
  p.sin = ds.get();
  p.positions = dp.get();
  p.num_tokens = tokens;
  p.num_heads = heads;
  p.head_dim = head_dim;
  p.max_positions = max_positions;
  p.out = dout.get();
  LOCKSTEP_KERNEL_OK(RopeCuda(p, nullptr));
  const auto out = dout.ToHost();
  // The reference is the same IEEE float formula (exactly rope_cpu.h's): zero tolerance.
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* v = &x[(t * heads + h) * head_dim];
      const float* c = &cos[positions[t] * head_dim];
      const float* s = &sin[positions[t] * head_dim];
      for (int64_t i = 0; i < head_dim; ++i) {
        volatile float a = v[i] * c[i];
        volatile float b = (i < half ? v[i + half] : v[i - half]) * s[i];
        const float ref = i < half ? a - b : a + b;
        ASSERT_EQ(out[(t * heads + h) * head_dim + i], ref) << t << " " << h << " " << i;
      }
    }
  }
}

TEST(ArgMaxCudaTest, FirstMaximumNanNeverWinsAndRowInvariant) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t cols = 3001;
  for (int64_t rows : kRowCounts) {
    auto x = RandomFloats(rows * cols, 8 + rows);
    std::vector<int64_t> expected(rows);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = &x[r * cols];
      if (r % 3 == 1) row[5] = NAN;
      if (r % 4 == 2) {
        row[100 + r % 50] = 50.0f;
        row[2000] = 50.0f;
      }  // a tie: first wins
      if (r % 11 == 10)
        for (int64_t j = 0; j < cols; ++j) row[j] = -INFINITY;
      int64_t best = 0;
      bool found = false;
      for (int64_t j = 0; j < cols; ++j) {
        if (row[j] > -INFINITY && (!found || row[j] > row[best])) {
          best = j;
          found = true;
        }
      }
      expected[r] = best;
    }
    DeviceBuffer<float> dx(x);
    DeviceBuffer<int64_t> dout(rows);
    LOCKSTEP_KERNEL_OK(ArgMaxCuda(dx.get(), rows, cols, dout.get(), nullptr));
    EXPECT_EQ(dout.ToHost(), expected) << "rows " << rows;
  }
}

TEST(RowKernelsCudaTest, RejectBadArgumentsBeforeLaunching) {
  // Host-side checks: no GPU needed (still labelled gpu with the rest).
  EXPECT_EQ(RmsNormCuda(nullptr, nullptr, nullptr, 2, 0, 1e-6f, nullptr).code,
            KernelStatus::kInvalidArgument);
  EXPECT_EQ(LogSoftmaxCuda(nullptr, nullptr, 2, 8, 0.0f, nullptr).code,
            KernelStatus::kInvalidArgument);
  EXPECT_EQ(SiluMulCuda(nullptr, nullptr, nullptr, 4, nullptr).code,
            KernelStatus::kInvalidArgument);
  RopeCudaProblem rope;
  rope.num_tokens = 1;
  rope.num_heads = 1;
  rope.head_dim = 3;
  rope.max_positions = 4;
  EXPECT_NE(RopeCuda(rope, nullptr).message.find("head_dim 3"), std::string::npos);
  EXPECT_EQ(ArgMaxCuda(nullptr, 1, 0, nullptr, nullptr).code, KernelStatus::kInvalidArgument);
  EXPECT_TRUE(ArgMaxCuda(nullptr, 0, 5, nullptr, nullptr).ok());  // zero rows: nothing to do
}

}  // namespace
}  // namespace lockstep::kernels::cuda
