// A plain streaming read of floats, the memory floor the benchmarks compare the kernels with:
// eight independent 4-float vector sums (SSE, no ISA flags needed), two cache lines an
// iteration, far more adds per cycle than memory delivers, so its time is the memory's.
#ifndef LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_
#define LOCKSTEP_BENCH_KERNELS_STREAM_READ_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lockstep::bench {

// The sum of data[0, count) in the order above (returned so that the reads cannot be elided).
inline float StreamReadSum(const float* data, int64_t count) {
  using Vec4 = float __attribute__((vector_size(16)));
  // Eight named sums, not an array: an array indexed in a loop the compiler may leave rolled
  // lives on the stack, and the read then runs at the speed of those loads and stores, which
  // moved with code placement (24-32 GB/s for the same bytes, bench/README.md).
  Vec4 p0 = {}, p1 = {}, p2 = {}, p3 = {}, p4 = {}, p5 = {}, p6 = {}, p7 = {};
  const auto load = [data](int64_t at) {
    Vec4 chunk;
    std::memcpy(&chunk, data + at, sizeof(chunk));
    return chunk;
  };
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    p0 += load(i);
    p1 += load(i + 4);
    p2 += load(i + 8);
    p3 += load(i + 12);
    p4 += load(i + 16);
    p5 += load(i + 20);
    p6 += load(i + 24);
    p7 += load(i + 28);
  }
  for (; i < count; ++i) p0[0] += data[i];
  const Vec4 total = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));
  return total[0] + total[3];
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
