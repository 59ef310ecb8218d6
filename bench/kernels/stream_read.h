// A plain streaming read of floats, the memory floor the benchmarks compare the kernels with:
// eight independent sums in the CPU's widest vectors (AVX-512, AVX2, else SSE), two to eight
// cache lines an iteration, far more adds per cycle than memory delivers. It comes in two forms,
// plain and prefetching (each line also fetched non-temporally kStreamReadPrefetchFloats ahead);
// a floor is the faster of the two, because a kernel that prefetches reads memory faster than
// plain loads can: on the AMD EPYC Zen 5 guest the prefetching read took 52.9 -> 63.4 GB/s at 2
// threads and 33.0 -> 35.2 at 1 (400 MB, 2026-12-07), and the batch-invariant decode linear,
// which prefetches, had read up to 1.2-1.3 times the plain floor in bench_generator.
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

// How far ahead the prefetching read fetches: 8 KiB, as the decode linear's one-column tiles.
constexpr int64_t kStreamReadPrefetchFloats = 2048;

template <int Lanes, bool Prefetch = false>
__attribute__((always_inline)) inline float VectorSum(const float* data, int64_t count) {
  using Vec = FloatVector<Lanes>;
  Vec p0 = {}, p1 = {}, p2 = {}, p3 = {}, p4 = {}, p5 = {}, p6 = {}, p7 = {};
  int64_t i = 0;
  for (; i + 8 * Lanes <= count; i += 8 * Lanes) {
    if constexpr (Prefetch) {  // the iteration's lines (8 * Lanes floats), that far ahead
      for (int line = 0; line < 8 * Lanes; line += 16) {
        __builtin_prefetch(data + i + line + kStreamReadPrefetchFloats, 0, 0);
      }
    }
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
template <bool Prefetch = false>
__attribute__((target("avx512f"))) inline float Sum16(const float* data, int64_t count) {
  return VectorSum<16, Prefetch>(data, count);
}
template <bool Prefetch = false>
__attribute__((target("avx2"))) inline float Sum8(const float* data, int64_t count) {
  return VectorSum<8, Prefetch>(data, count);
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

// The read's two forms (see the top of this file).
enum class StreamReadForm { kPlain, kPrefetching };

// The sum of data[0, count) (returned so that the reads cannot be elided).
inline float StreamReadSum(const float* data, int64_t count,
                           StreamReadForm form = StreamReadForm::kPlain) {
  using namespace stream_read_internal;
  const bool prefetch = form == StreamReadForm::kPrefetching;
#if defined(__x86_64__)
  switch (StreamReadLanes()) {
    case 16:
      return prefetch ? Sum16<true>(data, count) : Sum16<false>(data, count);
    case 8:
      return prefetch ? Sum8<true>(data, count) : Sum8<false>(data, count);
    default:
      break;
  }
#endif
  return prefetch ? VectorSum<4, true>(data, count) : VectorSum<4, false>(data, count);
}

// A run of floats to read.
struct FloatSpan {
  const float* data;
  int64_t count;
};

// Thread t's share of a read of `spans` by `threads` threads: floats
// [total * t / threads, total * (t + 1) / threads) of their concatenation, with StreamReadSum.
inline float StreamReadShare(const std::vector<FloatSpan>& spans, int t, int threads,
                             StreamReadForm form = StreamReadForm::kPlain) {
  int64_t total = 0;
  for (const FloatSpan& span : spans) total += span.count;
  const int64_t begin = total * t / threads, end = total * (t + 1) / threads;
  float sum = 0;
  int64_t offset = 0;
  for (const FloatSpan& span : spans) {
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + span.count);
    if (lo < hi) sum += StreamReadSum(span.data + (lo - offset), hi - lo, form);
    offset += span.count;
  }
  return sum;
}

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_
