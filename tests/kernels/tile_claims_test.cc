#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "model/kernels/tile_claims_cpu.h"

namespace lockstep::kernels {
namespace {

// Alone, a part's tiles come from the front of its own range, in order; then it takes the
// others' from their backs, fullest range first.
TEST(TileClaimsTest, OwnRangeInOrderThenTheFullestRangesBack) {
  TileClaims claims(10, 3);  // ranges [0, 3), [3, 6), [6, 10)
  EXPECT_EQ(claims.num_parts(), 3);
  std::vector<int64_t> got;
  for (int64_t tile = claims.Next(1); tile >= 0; tile = claims.Next(1)) got.push_back(tile);
  // Own 3, 4, 5; then part 2 (4 left) from its back: 9; then parts 0 and 2 both hold 3, the
  // first found gives 2; ...
  EXPECT_EQ(got, (std::vector<int64_t>{3, 4, 5, 9, 2, 8, 1, 7, 0, 6}));
  EXPECT_EQ(claims.Next(0), -1);
  EXPECT_EQ(claims.Next(2), -1);
}

TEST(TileClaimsTest, EmptyAndSinglePart) {
  TileClaims none(0, 4);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(none.Next(p), -1);
  TileClaims one(5, 1);
  for (int64_t t = 0; t < 5; ++t) EXPECT_EQ(one.Next(0), t);
  EXPECT_EQ(one.Next(0), -1);
  TileClaims more_parts_than_tiles(2, 4);       // ranges [0, 0), [0, 1), [1, 1), [1, 2)
  EXPECT_EQ(more_parts_than_tiles.Next(0), 0);  // owns nothing: steals part 1's only tile
  EXPECT_EQ(more_parts_than_tiles.Next(3), 1);  // its own
  EXPECT_EQ(more_parts_than_tiles.Next(1), -1);
  EXPECT_EQ(more_parts_than_tiles.Next(2), -1);
}

// A team of threads, one slow: every tile is claimed exactly once, and the fast threads take
// over the slow one's tail.
TEST(TileClaimsTest, TeamClaimsEveryTileOnceAndBalances) {
  constexpr int kThreads = 4;
  constexpr int64_t kTiles = 4000;
  TileClaims claims(kTiles, kThreads);
  std::vector<std::atomic<int>> seen(kTiles);
  std::vector<int64_t> counts(kThreads, 0);
  std::vector<std::thread> team;
  for (int part = 0; part < kThreads; ++part) {
    team.emplace_back([&, part] {
      for (int64_t tile = claims.Next(part); tile >= 0; tile = claims.Next(part)) {
        seen[tile].fetch_add(1);
        ++counts[part];
        if (part == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (std::thread& thread : team) thread.join();
  for (int64_t tile = 0; tile < kTiles; ++tile) ASSERT_EQ(seen[tile].load(), 1) << tile;
  // Part 0 owns 1000 tiles at >= 200 us each (>= 0.2 s); the others finish theirs in far less
  // and take most of part 0's.
  EXPECT_LT(counts[0], kTiles / kThreads / 2);
  EXPECT_EQ(counts[0] + counts[1] + counts[2] + counts[3], kTiles);
}

}  // namespace
}  // namespace lockstep::kernels
