// Helpers for bench_gpu: device buffers, event timing, and the cases' JSON records. CUDA runtime
// only (no LibTorch). Benchmark code, not a library: failures print and exit.
#ifndef LOCKSTEP_BENCH_GPU_GPU_BENCH_UTIL_H_
#define LOCKSTEP_BENCH_GPU_GPU_BENCH_UTIL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace lockstep::bench_gpu {

// Exits with the CUDA error named; a benchmark has nothing sensible to do after one.
inline void CheckCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "bench_gpu: %s: %s: %s\n", what, cudaGetErrorName(error),
               cudaGetErrorString(error));
  std::exit(1);
}

// `bytes` of device memory, every byte 0x3c (fp32 0.0115, a finite positive value), freed on
// destruction.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) {
    CheckCuda(cudaMalloc(&data_, std::max<size_t>(bytes, 1)), "cudaMalloc");
    CheckCuda(cudaMemset(data_, 0x3c, bytes), "cudaMemset");
  }
  ~DeviceMemory() { cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

// Milliseconds per call of `launch` on `stream`: one warm-up, then as many calls as fit in about
// 0.2 s (1 to 50), timed with events; the best of three such rounds.
inline double TimeMs(cudaStream_t stream, const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  CheckCuda(cudaEventCreate(&start), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&stop), "cudaEventCreate");
  auto round = [&](int calls) {
    CheckCuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < calls; ++i) launch();
    CheckCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    CheckCuda(cudaEventSynchronize(stop), "kernel (cudaEventSynchronize)");
    float ms = 0;
    CheckCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return static_cast<double>(ms) / calls;
  };
  const double first = round(1);
  const int calls = std::clamp(static_cast<int>(200.0 / std::max(first, 1e-3)), 1, 50);
  double best = first;
  for (int r = 0; r < 3; ++r) best = std::min(best, round(calls));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// Milliseconds of one device-to-device cudaMemcpyAsync of `bytes` (the copy roofline a
// memory-bound kernel that reads and writes `bytes` in all is held against).
inline double CopyMs(cudaStream_t stream, size_t bytes) {
  DeviceMemory from(bytes / 2 + 1), to(bytes / 2 + 1);
  return TimeMs(stream, [&] {
    CheckCuda(cudaMemcpyAsync(to.as<char>(), from.as<char>(), bytes / 2,
                              cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync");
  });
}

}  // namespace lockstep::bench_gpu

#endif  // LOCKSTEP_BENCH_GPU_GPU_BENCH_UTIL_H_
