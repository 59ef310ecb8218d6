// Batch-invariant CPU linear: accuracy against a double reference, and
// bit-exact invariance to the batch size, the tiling, the tile order and the
// micro-kernel family.
#include "model/kernels/linear_cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "model/kernels/tile_claims_cpu.h"
#include "tests/kernels/simd_levels.h"

namespace lockstep::kernels {
namespace {

std::vector<float> RandomVector(int64_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(size);
  for (float& value : v) value = normal(rng);
  return v;
}

// A problem with its own storage; x and y rows may be padded (stride > width).
struct Case {
  int64_t rows, in_features, out_features, x_stride, y_stride;
  std::vector<float> x, weight, bias, y;
  bool with_bias;

  Case(int64_t m, int64_t k, int64_t n, bool bias_on = true, int64_t x_pad = 0,
       int64_t y_pad = 0, uint32_t seed = 1)
      : rows(m),
        in_features(k),
        out_features(n),
        x_stride(k + x_pad),
        y_stride(n + y_pad),
        with_bias(bias_on) {
    x = RandomVector(m * x_stride, seed);
    weight = RandomVector(n * k, seed + 1);
    for (float& w : weight) w /= std::sqrt(static_cast<float>(k));
    bias = RandomVector(n, seed + 2);
    y.assign(m * y_stride, NAN);  // padding must stay untouched
  }

  LinearProblem Problem() {
    LinearProblem p;
    p.x = x.data();
    p.x_stride = x_stride;
    p.rows = rows;
    p.weight = weight.data();
    p.out_features = out_features;
    p.in_features = in_features;
    p.bias = with_bias ? bias.data() : nullptr;
    p.y = y.data();
    p.y_stride = y_stride;
    return p;
  }

  // One call over all tiles with the given family.
  std::vector<float> Run(LinearKernel kernel = LinearKernel::kAuto) {
    LinearProblem p = Problem();
    EXPECT_TRUE(LinearTilesWithKernel(kernel, p, 0, NumLinearTiles(p)));
    return y;
  }

  float Output(int64_t m, int64_t n) const { return y[m * y_stride + n]; }
};

bool SameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Number of outputs (incl. padding) whose bits differ.
int64_t CountDifferentBits(const std::vector<float>& a,
                           const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differing += SameBits(a[i], b[i]) ? 0 : 1;
  return differing;
}

// The contract, literally (linear_cpu.h): 16 FMA chains, chain l over
// k = l, l + 16, ... (zero past K), then t_l = v_l + v_{l+8},
// s_l = t_l + t_{l+4}, ((s0 + s2) + (s1 + s3)), + bias.
float ChainReference(const Case& c, int64_t m, int64_t n) {
  float v[16] = {};
  for (int64_t k0 = 0; k0 < c.in_features; k0 += 16) {
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t k = k0 + l;
      const bool in = k < c.in_features;
      v[l] = std::fma(in ? c.x[m * c.x_stride + k] : 0.0f,
                      in ? c.weight[n * c.in_features + k] : 0.0f, v[l]);
    }
  }
  float t[8], s[4];
  for (int l = 0; l < 8; ++l) t[l] = v[l] + v[l + 8];
  for (int l = 0; l < 4; ++l) s[l] = t[l] + t[l + 4];
  float acc = (s[0] + s[2]) + (s[1] + s[3]);
  if (c.with_bias) acc = acc + c.bias[n];
  return acc;
}

std::vector<LinearKernel> AvailableKernels() {
  std::vector<LinearKernel> kernels = {LinearKernel::kPortable};
  Case probe(1, 1, 1);
  LinearProblem p = probe.Problem();
  for (LinearKernel k : {LinearKernel::kAvx2, LinearKernel::kAvx512}) {
    if (LinearTilesWithKernel(k, p, 0, NumLinearTiles(p))) kernels.push_back(k);
  }
  return kernels;
}

TEST(LinearCpuTest, ReportsKernelName) {
  const std::string name = LinearKernelName();
  EXPECT_TRUE(name == "avx512" || name == "avx2" || name == "portable") << name;
  std::printf("linear kernel: %s, families here: %zu\n", name.c_str(),
              AvailableKernels().size());
}

// Lowering the kernels' SIMD level (as benchmarks do to time a narrower CPU's kernels) moves
// LinearTiles to that family, and the bits stay.
TEST(LinearCpuTest, ActiveSimdLevelCapsTheFamily) {
  const std::string detected = LinearKernelName();
  Case reference(70, 200, 50);
  const std::vector<float> expected = reference.Run();
  const struct {
    SimdLevel level;
    const char* name;
  } levels[] = {{SimdLevel::kAvx2, "avx2"}, {SimdLevel::kPortable, "portable"}};
  for (const auto& [level, name] : levels) {
    if (SupportedSimdLevel() < level) continue;
    testing::ScopedSimdLevel scoped(level);
    EXPECT_STREQ(LinearKernelName(), name);
    Case c(70, 200, 50);
    EXPECT_EQ(CountDifferentBits(c.Run(), expected), 0) << name;
  }
  EXPECT_EQ(LinearKernelName(), detected);  // the level restored, the family with it
}

TEST(LinearCpuTest, MatchesDoubleReference) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1024, 1024},
                         {8, 768, 256},
                         {64, 333, 77},
                         {130, 1024, 48},
                         {5, 2048, 40}}) {
    Case c(m, k, n);
    c.Run();
    double max_rel = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = c.bias[j], scale = std::fabs(c.bias[j]);
        for (int64_t kk = 0; kk < k; ++kk) {
          const double prod =
              double(c.x[i * c.x_stride + kk]) * c.weight[j * k + kk];
          ref += prod;
          scale += std::fabs(prod);
        }
        max_rel = std::max(max_rel, std::fabs(c.Output(i, j) - ref) / scale);
      }
    }
    EXPECT_LT(max_rel, 1e-5) << m << "x" << k << "x" << n;
  }
}

// Every family, every remainder shape, equals the literal FMA chain bit for
// bit.
TEST(LinearCpuTest, EveryKernelEqualsTheFmaChainBitForBit) {
  for (LinearKernel kernel : AvailableKernels()) {
    for (int64_t m : {1, 2, 3, 5, 7, 8, 9, 13, 17, 31}) {
      for (int64_t k : {1, 2, 7, 16, 17, 64, 129}) {
        for (int64_t n : {1, 15, 16, 17, 33, 50, 100}) {
          for (bool bias : {false, true}) {
            Case c(m, k, n, bias, /*x_pad=*/3, /*y_pad=*/5,
                   static_cast<uint32_t>(m * 7 + k + n));
            c.Run(kernel);
            int64_t differing = 0;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j)
                differing += !SameBits(c.Output(i, j), ChainReference(c, i, j));
              for (int64_t j = n; j < c.y_stride; ++j)
                differing += !std::isnan(c.y[i * c.y_stride + j]);
            }
            EXPECT_EQ(differing, 0)
                << "kernel " << static_cast<int>(kernel) << " m=" << m
                << " k=" << k << " n=" << n << " bias=" << bias;
          }
        }
      }
    }
  }
}

TEST(LinearCpuTest, VectorKernelsEqualPortableOnLargeShapes) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 768, 2048},
                         {8, 1024, 1024},
                         {64, 768, 256},
                         {300, 512, 200},
                         {37, 2048, 120}}) {
    Case c(m, k, n, true, 1, 2);
    const std::vector<float> portable = c.Run(LinearKernel::kPortable);
    for (LinearKernel kernel : AvailableKernels()) {
      EXPECT_EQ(CountDifferentBits(portable, c.Run(kernel)), 0)
          << "kernel " << static_cast<int>(kernel) << " m=" << m << " k=" << k
          << " n=" << n;
    }
  }
}

// The cache blocking (K chunks carried through memory, column block widths, row panels) is
// invisible in the bits: K split into many chunks, or into none, narrow or wide column blocks,
// and panels of one row block or of all give the literal FMA chain, in every family.
TEST(LinearCpuTest, CacheBlockingNeverChangesTheBits) {
  const LinearBlocking detected = CurrentLinearBlocking();
  EXPECT_GT(detected.x_chunk_bytes, 0);
  EXPECT_GT(detected.stream_chunk_bytes, 0);
  EXPECT_GT(detected.column_block_bytes, 0);
  EXPECT_GT(detected.row_panel_bytes, 0);
  EXPECT_GE(detected.stream_prefetch, 0);
  EXPECT_GE(detected.stream_prefetch_nta, 0);
  EXPECT_GE(detected.stream_narrow_tiles, 0);
  EXPECT_GE(detected.stream_l1_chunks, 0);
  struct Setting {
    int64_t x_chunk_bytes, stream_chunk_bytes, column_block_bytes, row_panel_bytes;
    int stream_prefetch, stream_prefetch_nta, stream_narrow_tiles, stream_l1_chunks;
  };
  // 64-byte chunks: 16 k per chunk for any main tile (decode-sized M too, through
  // stream_chunk_bytes); 1 GiB: K in one chunk; 4-byte panels: one row block each; 1 GiB: one
  // panel. One-column streaming tiles (m = 1) with and without the software prefetch; streaming
  // tiles (m = 1, 7, 9) prefetching into L2 and non-temporally, 7 and 8 rows in wide and narrow
  // tiles. 4 KiB x chunks against whole-K stream chunks: the streaming tiles of m = 3, 7 and 9
  // (rows of K over 8 KiB; m = 3 the only one that AVX2's 6-row tiles of one column leave with
  // several columns) in x chunks where stream_l1_chunks is on, in one chunk where it is off;
  // m = 1 (one column) in one chunk either way.
  for (const Setting setting : {Setting{64, 64, 64 << 10, 4, 1, 0, 1, 1},
                                Setting{4 << 10, 4 << 10, 16 << 10, 200 << 10, 0, 1, 0, 0},
                                Setting{1 << 30, 1 << 30, 1 << 30, 1 << 30, 1, 1, 1, 1},
                                Setting{1 << 30, 1 << 30, 1 << 30, 1 << 30, 1, 1, 0, 0},
                                Setting{1 << 30, 1 << 30, 1 << 30, 1 << 30, 1, 0, 1, 1},
                                Setting{1 << 30, 1 << 30, 1 << 30, 1 << 30, 0, 0, 0, 0},
                                Setting{4 << 10, 1 << 30, 1 << 30, 1 << 30, 1, 1, 1, 1},
                                Setting{4 << 10, 1 << 30, 1 << 30, 1 << 30, 1, 0, 0, 1},
                                Setting{4 << 10, 1 << 30, 1 << 30, 1 << 30, 1, 1, 0, 0}}) {
    LinearBlocking blocking;
    blocking.x_chunk_bytes = setting.x_chunk_bytes;
    blocking.stream_chunk_bytes = setting.stream_chunk_bytes;
    blocking.column_block_bytes = setting.column_block_bytes;
    blocking.row_panel_bytes = setting.row_panel_bytes;
    blocking.stream_prefetch = setting.stream_prefetch;
    blocking.stream_prefetch_nta = setting.stream_prefetch_nta;
    blocking.stream_narrow_tiles = setting.stream_narrow_tiles;
    blocking.stream_l1_chunks = setting.stream_l1_chunks;
    SetLinearBlocking(blocking);
    EXPECT_EQ(CurrentLinearBlocking().stream_prefetch, setting.stream_prefetch);
    EXPECT_EQ(CurrentLinearBlocking().stream_prefetch_nta, setting.stream_prefetch_nta);
    EXPECT_EQ(CurrentLinearBlocking().stream_narrow_tiles, setting.stream_narrow_tiles);
    EXPECT_EQ(CurrentLinearBlocking().stream_l1_chunks, setting.stream_l1_chunks);
    for (LinearKernel kernel : AvailableKernels()) {
      for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1000, 50},
                             {3, 776, 40},
                             {7, 776, 75},
                             {9, 2048, 70},
                             {70, 333, 100},
                             {300, 160, 60}}) {
        Case c(m, k, n, true, 3, 1, static_cast<uint32_t>(m + k));
        c.Run(kernel);
        int64_t differing = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) differing += !SameBits(c.Output(i, j), ChainReference(c, i, j));
        EXPECT_EQ(differing, 0) << "kernel " << static_cast<int>(kernel) << " chunk "
                                << setting.x_chunk_bytes << " m=" << m << " k=" << k;
      }
    }
  }
  SetLinearBlocking(LinearBlocking());  // back to the detected values
  EXPECT_EQ(CurrentLinearBlocking().x_chunk_bytes, detected.x_chunk_bytes);
  EXPECT_EQ(CurrentLinearBlocking().stream_chunk_bytes, detected.stream_chunk_bytes);
  EXPECT_EQ(CurrentLinearBlocking().column_block_bytes, detected.column_block_bytes);
  EXPECT_EQ(CurrentLinearBlocking().row_panel_bytes, detected.row_panel_bytes);
  EXPECT_EQ(CurrentLinearBlocking().stream_prefetch, detected.stream_prefetch);
  EXPECT_EQ(CurrentLinearBlocking().stream_prefetch_nta, detected.stream_prefetch_nta);
  EXPECT_EQ(CurrentLinearBlocking().stream_narrow_tiles, detected.stream_narrow_tiles);
  EXPECT_EQ(CurrentLinearBlocking().stream_l1_chunks, detected.stream_l1_chunks);
}

// A row's bits do not depend on which batch it sits in, nor at which position.
TEST(LinearCpuTest, RowAloneEqualsRowInsideAnyBatch) {
  const int64_t k = 768, n = 300;
  for (LinearKernel kernel : AvailableKernels()) {
    for (int64_t m : {3, 17, 64, 300}) {
      Case batch(m, k, n, true, 0, 0, 42);
      batch.Run(kernel);
      for (int64_t row : {int64_t{0}, m / 2, m - 1}) {
        Case alone(1, k, n, true, 0, 0, 42);
        std::copy(batch.x.begin() + row * k, batch.x.begin() + (row + 1) * k,
                  alone.x.begin());
        alone.Run(kernel);
        int64_t differing = 0;
        for (int64_t j = 0; j < n; ++j)
          differing += !SameBits(alone.Output(0, j), batch.Output(row, j));
        EXPECT_EQ(differing, 0) << "row " << row << " of M=" << m;
      }
    }
  }
}

// Tile ranges split any way, in any order, give the bits of one call: also with row panels of
// one or two row blocks, where a range starts inside a panel and runs on into the next (each
// call packs the rows of x it needs, panel by panel).
TEST(LinearCpuTest, AnySplitOfTheTileRangeGivesTheSameBits) {
  for (const int64_t panel_bytes : {int64_t{0}, int64_t{2 * 64 * 256 * 4}, int64_t{4}}) {
    LinearBlocking blocking;
    blocking.row_panel_bytes = panel_bytes;
    SetLinearBlocking(blocking);
    for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1000},
                        {8, 1024},
                        {100, 500},
                        {300, 200},
                        {512, 96}}) {
      Case c(m, 256, n);
      const std::vector<float> whole = c.Run();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; j += 37) {
          ASSERT_TRUE(SameBits(c.Output(i, j), ChainReference(c, i, j)))
              << "M=" << m << " panel bytes " << panel_bytes << " (" << i << ", " << j << ")";
        }
      }
      LinearProblem p = c.Problem();
      const int64_t num_tiles = NumLinearTiles(p);
      ASSERT_GT(num_tiles, 0);

      std::fill(c.y.begin(), c.y.end(), NAN);
      for (int64_t t = num_tiles - 1; t >= 0; --t) LinearTiles(p, t, t + 1);
      EXPECT_EQ(CountDifferentBits(whole, c.y), 0) << "reverse, M=" << m;

      std::fill(c.y.begin(), c.y.end(), NAN);
      const int64_t mid = num_tiles / 3;
      LinearTiles(p, mid, num_tiles);
      LinearTiles(p, 0, mid);
      EXPECT_EQ(CountDifferentBits(whole, c.y), 0)
          << "two ranges, M=" << m << " panel bytes " << panel_bytes;

      // A team of three sharing one TileClaims (as the model's linear runs), one of them late:
      // the others take its tiles from the back of its range.
      std::fill(c.y.begin(), c.y.end(), NAN);
      TileClaims claims(num_tiles, 3);
      std::vector<std::thread> team;
      for (int part = 0; part < 3; ++part) {
        team.emplace_back([&, part] {
          if (part == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          LinearClaimedTiles(p, &claims, part);
        });
      }
      for (std::thread& thread : team) thread.join();
      EXPECT_EQ(CountDifferentBits(whole, c.y), 0)
          << "claimed by a team, M=" << m << " panel bytes " << panel_bytes;
    }
  }
  SetLinearBlocking(LinearBlocking());
}

// Several problems claimed as one team's tiles (q, k and v of one x; a problem with its own x and
// K; one with no columns): every problem's outputs are the bits it gets alone.
TEST(LinearCpuTest, ProblemsClaimedTogetherGetTheBitsEachGetsAlone) {
  for (const int64_t m : {1, 8, 100}) {
    Case q(m, 256, 500, true), k(m, 256, 130, false), v(m, 256, 130, true), other(m, 96, 70);
    Case no_columns(m, 256, 0);
    const std::vector<Case*> sharing_x = {&k, &v, &no_columns};
    for (Case* c : sharing_x) c->x = q.x;  // q's values, for the runs alone
    std::vector<Case*> cases = {&q, &k, &no_columns, &other, &v};
    std::vector<std::vector<float>> alone;
    for (Case* c : cases) alone.push_back(c->Run());
    std::vector<LinearProblem> problems;
    int64_t tiles = 0;
    for (Case* c : cases) {
      std::fill(c->y.begin(), c->y.end(), NAN);
      problems.push_back(c->Problem());
      // One x in memory, as q, k and v read theirs.
      if (std::find(sharing_x.begin(), sharing_x.end(), c) != sharing_x.end()) {
        problems.back().x = q.x.data();
      }
      tiles += NumLinearTiles(problems.back());
    }
    const int count = static_cast<int>(problems.size());
    ASSERT_EQ(NumLinearTiles(problems.data(), count), tiles);
    // A team of three, one of them late: the others take its tiles, of whichever problems.
    TileClaims claims(tiles, 3);
    std::vector<std::thread> team;
    for (int part = 0; part < 3; ++part) {
      team.emplace_back([&, part] {
        if (part == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        LinearClaimedTiles(problems.data(), count, &claims, part);
      });
    }
    for (std::thread& thread : team) thread.join();
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(CountDifferentBits(alone[i], cases[i]->y), 0) << "problem " << i << ", M=" << m;
    }
  }
  EXPECT_EQ(NumLinearTiles(nullptr, 0), 0);
}

// With row panels of one row block, of two (the last panel shorter) or of all rows.
TEST(LinearCpuTest, DistinctTilesWriteDisjointOutputsCoveringY) {
  for (const int64_t panel_bytes : {int64_t{4}, int64_t{2 * 64 * 32 * 4}, int64_t{1} << 30}) {
    LinearBlocking blocking;
    blocking.row_panel_bytes = panel_bytes;
    SetLinearBlocking(blocking);
    for (const int64_t m : {70, 300}) {
      Case c(m, 32, 130, true, 0, 3);
      LinearProblem p = c.Problem();
      std::vector<int> writes(c.y.size(), 0);
      for (int64_t t = 0; t < NumLinearTiles(p); ++t) {
        std::fill(c.y.begin(), c.y.end(), NAN);
        LinearTiles(p, t, t + 1);
        for (size_t i = 0; i < c.y.size(); ++i) writes[i] += !std::isnan(c.y[i]);
      }
      for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.y_stride; ++j)
          EXPECT_EQ(writes[i * c.y_stride + j], j < c.out_features ? 1 : 0)
              << "M=" << m << " panel bytes " << panel_bytes;
    }
  }
  SetLinearBlocking(LinearBlocking());
}

TEST(LinearCpuTest, EmptyProblemsAndZeroDepth) {
  Case empty_rows(0, 8, 8);
  EXPECT_EQ(NumLinearTiles(empty_rows.Problem()), 0);

  Case zero_depth(3, 0, 20);  // y = bias
  zero_depth.Run();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 20; ++j)
      EXPECT_EQ(zero_depth.Output(i, j), zero_depth.bias[j]);
}

}  // namespace
}  // namespace lockstep::kernels
