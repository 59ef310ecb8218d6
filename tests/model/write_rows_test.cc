// ops::WriteRows: the row-copy loop writes exactly what index_copy_ writes, the fallback (other
// dtypes, non-contiguous sources) too, and an index outside the destination is an error that
// writes nothing.
#include "gtest/gtest.h"
#include "model/ops.h"

namespace lockstep {
namespace {

TEST(WriteRowsTest, MatchesIndexCopyOnThePlainPathAndTheFallback) {
  torch::Tensor rows = torch::tensor({5, 0, 3}, torch::kInt64);
  for (torch::Dtype dtype : {torch::kFloat32, torch::kFloat64}) {
    torch::Tensor source = torch::randn({3, 4, 2}, dtype);
    torch::Tensor ours = torch::randn({6, 4, 2}, dtype);
    torch::Tensor expected = ours.clone();
    ops::WriteRows(ours, rows, source);
    expected.index_copy_(0, rows, source);
    EXPECT_TRUE(torch::equal(ours, expected)) << dtype;
  }
  torch::Tensor strided = torch::randn({4, 3}).t();  // [3, 4], not contiguous
  torch::Tensor ours = torch::zeros({6, 4});
  torch::Tensor expected = ours.clone();
  ops::WriteRows(ours, rows, strided);
  expected.index_copy_(0, rows, strided);
  EXPECT_TRUE(torch::equal(ours, expected));
}

TEST(WriteRowsTest, RowOutsideTheDestinationIsAnError) {
  torch::Tensor destination = torch::zeros({4, 2});
  EXPECT_THROW(ops::WriteRows(destination, torch::tensor({1, 4}, torch::kInt64),
                              torch::ones({2, 2})),
               c10::Error);
  EXPECT_THROW(ops::WriteRows(destination, torch::tensor({-1}, torch::kInt64), torch::ones({1, 2})),
               c10::Error);
  EXPECT_EQ(destination.abs().sum().item<float>(), 0.0f);  // not even the rows before it
}

}  // namespace
}  // namespace lockstep
