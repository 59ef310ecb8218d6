// The benchmarks' memory floor, bench/kernels/stream_read.h: whatever the vector width, the read
// visits every float of its span exactly once (a read that skipped some would make the floor
// look faster than memory), and the threads' shares of a list of spans cover it exactly.
#include "bench/kernels/stream_read.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace lockstep::bench {
namespace {

// Floats 1, 2, 3, ...: any float skipped or read twice changes the (exact) integer sum.
std::vector<float> Counting(int64_t n) {
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i + 1);
  return data;
}

float Expected(int64_t n) { return static_cast<float>(n * (n + 1) / 2); }

const int64_t kCounts[] = {0, 1, 3, 31, 32, 33, 127, 128, 129, 1000, 1537};

TEST(StreamRead, EveryWidthReadsEveryFloatOnce) {
  for (int64_t n : kCounts) {
    const std::vector<float> data = Counting(n);
    EXPECT_EQ(stream_read_internal::VectorSum<4>(data.data(), n), Expected(n)) << n;
    EXPECT_EQ((stream_read_internal::VectorSum<4, true>(data.data(), n)), Expected(n)) << n;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
      EXPECT_EQ(stream_read_internal::Sum8(data.data(), n), Expected(n)) << n;
      EXPECT_EQ(stream_read_internal::Sum8<true>(data.data(), n), Expected(n)) << n;
    }
    if (__builtin_cpu_supports("avx512f")) {
      EXPECT_EQ(stream_read_internal::Sum16(data.data(), n), Expected(n)) << n;
      EXPECT_EQ(stream_read_internal::Sum16<true>(data.data(), n), Expected(n)) << n;
    }
#endif
    EXPECT_EQ(StreamReadSum(data.data(), n), Expected(n)) << n;
    EXPECT_EQ(StreamReadSum(data.data(), n, StreamReadForm::kPrefetching), Expected(n)) << n;
  }
}

TEST(StreamRead, UsesTheWidestVectorsTheCpuHas) {
  int expected = 4;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) expected = 8;
  if (__builtin_cpu_supports("avx512f")) expected = 16;
#endif
  EXPECT_EQ(StreamReadLanes(), expected);
}

TEST(StreamRead, ThreadSharesCoverTheSpansExactly) {
  const std::vector<float> data = Counting(1537);
  const std::vector<FloatSpan> spans = {
      {data.data(), 100}, {data.data() + 100, 37}, {data.data() + 137, 1400}};
  for (int threads : {1, 2, 3, 7}) {
    float sum = 0;
    float prefetching = 0;
    for (int t = 0; t < threads; ++t) {
      sum += StreamReadShare(spans, t, threads);
      prefetching += StreamReadShare(spans, t, threads, StreamReadForm::kPrefetching);
    }
    EXPECT_EQ(sum, Expected(1537)) << threads << " threads";
    EXPECT_EQ(prefetching, Expected(1537)) << threads << " threads, prefetching";
  }
}

}  // namespace
}  // namespace lockstep::bench
