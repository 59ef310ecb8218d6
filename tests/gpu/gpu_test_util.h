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

#define LOCKSTEP_REQUIRE_GPUS(n)                                         \
  do {                                                                   \
    if (::lockstep::gpu_test::VisibleGpus() < (n)) {                     \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), "             \
                   << ::lockstep::gpu_test::VisibleGpus() << " visible"; \
    }                                                                    \
  } while (0)

#define LOCKSTEP_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define LOCKSTEP_KERNEL_OK(expr)                  \
  do {                                            \
    auto _status = (expr);                        \
    ASSERT_TRUE(_status.ok()) << _status.message; \
  } while (0)

// A device copy of a host vector (or `count` uninitialized elements), freed on destruction. A
// failed CUDA call is a test failure (ADD_FAILURE), never a silently empty or stale buffer: two
// failed copies would otherwise compare equal and pass a bit-invariance check vacuously.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    const cudaError_t error = cudaMalloc(&data_, count * sizeof(T) + 1);
    if (error != cudaSuccess) {
      data_ = nullptr;
      ADD_FAILURE() << "cudaMalloc(" << count * sizeof(T) + 1 << "): " << cudaGetErrorString(error);
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (data_ != nullptr && !host.empty()) {
      const cudaError_t error =
          cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
      if (error != cudaSuccess)
        ADD_FAILURE() << "cudaMemcpy to device: " << cudaGetErrorString(error);
    }
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  // Waits for the device, then copies back. A failure (a kernel fault surfaces here) fails the
  // test; the result is then all 0xff bytes (NaN for floats), not stale memory.
  std::vector<T> ToHost() const {
    std::vector<T> host(count_);
    cudaError_t error = cudaDeviceSynchronize();
    if (error == cudaSuccess && data_ != nullptr) {
      error = cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    }
    if (error != cudaSuccess || data_ == nullptr) {
      ADD_FAILURE() << "ToHost: " << (data_ == nullptr ? "no buffer" : cudaGetErrorString(error));
      std::memset(static_cast<void*>(host.data()), 0xff, count_ * sizeof(T));
    }
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
