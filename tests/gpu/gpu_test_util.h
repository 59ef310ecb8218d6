// Helpers for the gpu-labelled tests: skip without a usable GPU, device buffers, bit comparison.
// Only the CUDA runtime; no LibTorch.
#ifndef LOCKSTEP_TESTS_GPU_GPU_TEST_UTIL_H_
#define LOCKSTEP_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace lockstep::gpu_test {

// Number of CUDA devices this process can use (0 when there is no driver or no device).
inline int VisibleGpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a missing driver
    return 0;
  }
  return count;
}

#define LOCKSTEP_REQUIRE_GPUS(n)                                                   \
  do {                                                                             \
    if (::lockstep::gpu_test::VisibleGpus() < (n)) {                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), "                       \
                   << ::lockstep::gpu_test::VisibleGpus() << " visible";           \
    }                                                                              \
  } while (0)

#define LOCKSTEP_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define LOCKSTEP_KERNEL_OK(expr)             \
  do {                                       \
    auto _status = (expr);                   \
    ASSERT_TRUE(_status.ok()) << _status.message; \
  } while (0)

// A device copy of a host vector (or `count` uninitialized elements), freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (cudaMalloc(&data_, count * sizeof(T) + 1) != cudaSuccess) data_ = nullptr;
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (data_ != nullptr && !host.empty()) {
      cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    }
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::vector<T> ToHost() const {
    std::vector<T> host(count_);
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

inline std::vector<float> RandomFloats(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

inline bool SameBits(const float* a, const float* b, size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

}  // namespace lockstep::gpu_test

#endif  // LOCKSTEP_TESTS_GPU_GPU_TEST_UTIL_H_
