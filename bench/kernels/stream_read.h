// A plain streaming read of floats, the memory floor the benchmarks compare the kernels with:
// eight independent sums in the CPU's widest vectors (AVX-512, AVX2, else SSE), two to eight
// cache lines an iteration, far more adds per cycle than memory delivers.
//
// The widest vectors, because the read's speed is the memory's only when its loads are few: a
// 4-float (SSE) read took four loads a cache line and ran 10-19% slower than a 16-float one on
// an AMD EPYC Zen 5 guest (2 threads, median 53 against 63 GB/s; 1 thread 23 against 26,
// alternated, 400 MB), so a floor read with it made every kernel look that much nearer to it.
#ifndef LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_
#define LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lockstep::bench {
namespace stream_read_internal {

// The sum of data[0, count) in Lanes-float vectors, eight named sums (not an array: an array
// indexed in a loop the compiler may leave rolled lives on the stack, and the read then runs at
// the speed of those loads and stores, which moved with code placement: 24-32 GB/s for the same
// bytes, bench/README.md). Always inlined, and without lambdas, so that the vectors are those
// of the caller's target (Sum16, Sum8), not the default's.
template <int Lanes>
struct FloatVectorOf {
  typedef float type __attribute__((vector_size(Lanes * sizeof(float))));
};
template <int Lanes>
using FloatVector = typename FloatVectorOf<Lanes>::type;

template <int Lanes>
__attribute__((always_inline)) inline void AddVector(FloatVector<Lanes>& sum, const float* at) {
  FloatVector<Lanes> chunk;
  std::memcpy(&chunk, at, sizeof(chunk));
  sum += chunk;
}

template <int Lanes>
__attribute__((always_inline)) inline float VectorSum(const float* data, int64_t count) {
  using Vec = FloatVector<Lanes>;
  Vec p0 = {}, p1 = {}, p2 = {}, p3 = {}, p4 = {}, p5 = {}, p6 = {}, p7 = {};
  int64_t i = 0;
  for (; i + 8 * Lanes <= count; i += 8 * Lanes) {
    AddVector<Lanes>(p0, data + i);
    AddVector<Lanes>(p1, data + i + Lanes);
    AddVector<Lanes>(p2, data + i + 2 * Lanes);
    AddVector<Lanes>(p3, data + i + 3 * Lanes);
    AddVector<Lanes>(p4, data + i + 4 * Lanes);
    AddVector<Lanes>(p5, data + i + 5 * Lanes);
    AddVector<Lanes>(p6, data + i + 6 * Lanes);
    AddVector<Lanes>(p7, data + i + 7 * Lanes);
  }
  float tail = 0;
  for (; i < count; ++i) tail += data[i];
  const Vec total = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));
  float sum = tail;
  for (int lane = 0; lane < Lanes; ++lane) sum += total[lane];
  return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline float Sum16(const float* data, int64_t count) {
  return VectorSum<16>(data, count);
}
__attribute__((target("avx2"))) inline float Sum8(const float* data, int64_t count) {
  return VectorSum<8>(data, count);
}
#endif

}  // namespace stream_read_internal

// The vector width the read uses on this CPU, in floats: 16, 8 or 4.
inline int StreamReadLanes() {
#if defined(__x86_64__)
  static const int lanes = __builtin_cpu_supports("avx512f") ? 16
                           : __builtin_cpu_supports("avx2")  ? 8
                                                             : 4;
  return lanes;
#else
  return 4;
#endif
}

// The sum of data[0, count) (returned so that the reads cannot be elided).
inline float StreamReadSum(const float* data, int64_t count) {
#if defined(__x86_64__)
  switch (StreamReadLanes()) {
    case 16:
      return stream_read_internal::Sum16(data, count);
    case 8:
      return stream_read_internal::Sum8(data, count);
    default:
      break;
  }
#endif
  return stream_read_internal::VectorSum<4>(data, count);
}

// A run of floats to read.
struct FloatSpan {
  const float* data;
  int64_t count;
};

// Thread t's share of a read of `spans` by `threads` threads: floats
// [total * t / threads, total * (t + 1) / threads) of their concatenation, with StreamReadSum.
inline float StreamReadShare(const std::vector<FloatSpan>& spans, int t, int threads) {
  int64_t total = 0;
  for (const FloatSpan& span : spans) total += span.count;
  const int64_t begin = total * t / threads, end = total * (t + 1) / threads;
  float sum = 0;
  int64_t offset = 0;
  for (const FloatSpan& span : spans) {
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + span.count);
    if (lo < hi) sum += StreamReadSum(span.data + (lo - offset), hi - lo);
    offset += span.count;
  }
  return sum;
}

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_
