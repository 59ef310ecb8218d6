// LinearCuda against a float64 reference, and its batch invariance: row m's bits are the same for
// M = 1, 7, 64, 1000, at any position in the batch, and for either tile family.
#include "model/kernels/linear_cuda.h"

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace lockstep::kernels::cuda {
namespace {

using gpu_test::DeviceBuffer;
using gpu_test::RandomFloats;

constexpr int64_t kIn = 200;   // not a multiple of the K block (16)
constexpr int64_t kOut = 150;  // not a multiple of the column tile (64)

// y = x W^T + b in rows [0, rows), on the GPU.
std::vector<float> RunLinear(const std::vector<float>& x, int64_t rows, const DeviceBuffer<float>& w,
                             const DeviceBuffer<float>& b, LinearTile tile) {
  DeviceBuffer<float> dx(x);
  DeviceBuffer<float> dy(static_cast<size_t>(rows * kOut));
  LinearCudaProblem p;
  p.x = dx.get();
  p.x_stride = kIn;
  p.rows = rows;
  p.weight = w.get();
  p.out_features = kOut;
  p.in_features = kIn;
  p.bias = b.get();
  p.y = dy.get();
  p.y_stride = kOut;
  KernelStatus status = LinearCuda(p, InputType::kFloat32, nullptr, tile);
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dy.ToHost();
}

TEST(LinearCudaTest, MatchesFloat64Reference) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t rows = 37;
  auto x = RandomFloats(rows * kIn, 1), w = RandomFloats(kOut * kIn, 2), b = RandomFloats(kOut, 3);
  DeviceBuffer<float> dw(w), db(b);
  for (LinearTile tile : {LinearTile::kSmall, LinearTile::kLarge}) {
    auto y = RunLinear(x, rows, dw, db, tile);
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t n = 0; n < kOut; ++n) {
        double ref = b[n], magnitude = std::fabs(b[n]);
        for (int64_t k = 0; k < kIn; ++k) {
          ref += double{x[m * kIn + k]} * w[n * kIn + k];
          magnitude += std::fabs(double{x[m * kIn + k]} * w[n * kIn + k]);
        }
        // Stated tolerance: a K-term fp32 chain errs by at most ~K * 2^-24 of sum |x w|.
        ASSERT_NEAR(y[m * kOut + n], ref, (kIn + 1) * 0x1p-24 * magnitude + 1e-30)
            << "m " << m << " n " << n;
      }
    }
  }
}

TEST(LinearCudaTest, RowBitsDoNotDependOnBatchSizePositionOrTile) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t kMax = 1000;
  auto x = RandomFloats(kMax * kIn, 4), w = RandomFloats(kOut * kIn, 5), b = RandomFloats(kOut, 6);
  DeviceBuffer<float> dw(w), db(b);
  const auto full = RunLinear(x, kMax, dw, db, LinearTile::kAuto);
  const int64_t probe_rows[] = {0, 3, 511, 999};
  for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{64}, kMax}) {
    for (LinearTile tile : {LinearTile::kSmall, LinearTile::kLarge}) {
      for (int64_t probe : probe_rows) {
        // The probe row at every position 0 .. M-1 would be slow; at first, middle and last.
        for (int64_t position : {int64_t{0}, m / 2, m - 1}) {
          std::vector<float> batch = RandomFloats(m * kIn, 7 + position);  // other rows: noise
          std::copy_n(x.begin() + probe * kIn, kIn, batch.begin() + position * kIn);
          auto y = RunLinear(batch, m, dw, db, tile);
          ASSERT_TRUE(gpu_test::SameBits(&y[position * kOut], &full[probe * kOut], kOut))
              << "row " << probe << " at position " << position << " of M = " << m;
        }
      }
    }
  }
}

TEST(LinearCudaTest, Bf16InputsAreWidenedExactly) {
  LOCKSTEP_REQUIRE_GPUS(1);
  const int64_t rows = 5;
  auto x = RandomFloats(rows * kIn, 8), w = RandomFloats(kOut * kIn, 9);
  std::vector<__nv_bfloat16> xb(x.size()), wb(w.size());
  for (size_t i = 0; i < x.size(); ++i) { xb[i] = __float2bfloat16(x[i]); x[i] = __bfloat162float(xb[i]); }
  for (size_t i = 0; i < w.size(); ++i) { wb[i] = __float2bfloat16(w[i]); w[i] = __bfloat162float(wb[i]); }
  DeviceBuffer<__nv_bfloat16> dxb(xb), dwb(wb);
  DeviceBuffer<float> dw(w), db(std::vector<float>(kOut, 0.0f)), dy(rows * kOut);
  LinearCudaProblem p;
  p.x = dxb.get(); p.x_stride = kIn; p.rows = rows; p.weight = dwb.get();
  p.out_features = kOut; p.in_features = kIn; p.y = dy.get(); p.y_stride = kOut;
  LOCKSTEP_KERNEL_OK(LinearCuda(p, InputType::kBFloat16, nullptr));
  auto y_bf16 = dy.ToHost();
  // The same values as fp32 inputs (no bias) give the same bits: widening is exact.
  DeviceBuffer<float> dx(x);
  p.x = dx.get(); p.weight = dw.get();
  LOCKSTEP_KERNEL_OK(LinearCuda(p, InputType::kFloat32, nullptr));
  auto y_fp32 = dy.ToHost();
  EXPECT_TRUE(gpu_test::SameBits(y_bf16.data(), y_fp32.data(), y_fp32.size()));
}

TEST(LinearCudaTest, RejectsBadShapesBeforeLaunching) {
  // No GPU needed: the checks run on the host before any CUDA call. (Still labelled gpu.)
  LinearCudaProblem p;
  p.rows = 4; p.in_features = 8; p.out_features = 8; p.x_stride = 4; p.y_stride = 8;
  KernelStatus status = LinearCuda(p, InputType::kFloat32, nullptr);
  EXPECT_EQ(status.code, KernelStatus::kInvalidArgument);
  EXPECT_NE(status.message.find("x_stride 4 < in_features 8"), std::string::npos) << status.message;
  p.x_stride = 8;
  status = LinearCuda(p, InputType::kFloat32, nullptr);
  EXPECT_EQ(status.code, KernelStatus::kInvalidArgument);
  EXPECT_NE(status.message.find("must be set"), std::string::npos) << status.message;
}

}  // namespace
}  // namespace lockstep::kernels::cuda
