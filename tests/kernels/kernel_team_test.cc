// The kernel team (kernel_team_ops.h): parts handed out on it run once each, on the team's
// threads; the body's exceptions reach the caller; nested, disabled and one-thread calls just run
// the body; and a paged decode gives the same bits with the team as without it.
#include "model/kernels/kernel_team_ops.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "model/attention_context.h"
#include "model/checkpoint.h"
#include "model/packed_batch.h"
#include "tests/support/scoped_thread_count.h"

namespace lockstep::kernels {
namespace {

class KernelTeamTest : public ::testing::Test {
 protected:
  ~KernelTeamTest() override { SetKernelTeamEnabled(true); }
  test_support::ScopedThreadCount restore_threads_;
};

TEST_F(KernelTeamTest, EveryPartRunsOnceOnTheTeamsThreads) {
  const std::thread::id caller = std::this_thread::get_id();
  const int64_t started = KernelTeamsStarted();
  std::vector<std::set<std::thread::id>> threads_of_part(5);
  int inside_threads = 0;
  bool all_once = true;
  RunWithKernelTeam(2, [&] {
    inside_threads = ParallelPartsThreads();
    for (int call = 0; call < 300; ++call) {
      std::vector<std::atomic<int>> runs(5);
      std::vector<std::thread::id> ran_on(5);
      ParallelParts(5, [&](int64_t p) {
        runs[p].fetch_add(1);
        ran_on[p] = std::this_thread::get_id();
      });
      for (int p = 0; p < 5; ++p) {
        all_once = all_once && runs[p].load() == 1;
        threads_of_part[p].insert(ran_on[p]);
      }
    }
  });
  EXPECT_EQ(KernelTeamsStarted(), started + 1);
  EXPECT_EQ(inside_threads, 2);
  EXPECT_TRUE(all_once);
  // Part p runs on team thread p % 2, every time: the even parts on the caller, the odd ones on
  // one other thread.
  for (int p = 0; p < 5; ++p) ASSERT_EQ(threads_of_part[p].size(), 1u) << "part " << p;
  EXPECT_EQ(*threads_of_part[0].begin(), caller);
  EXPECT_EQ(*threads_of_part[2].begin(), caller);
  EXPECT_NE(*threads_of_part[1].begin(), caller);
  EXPECT_EQ(*threads_of_part[1].begin(), *threads_of_part[3].begin());
}

TEST_F(KernelTeamTest, TheBodysExceptionReachesTheCallerAndTheNextTeamWorks) {
  EXPECT_THROW(RunWithKernelTeam(2, [] { throw std::runtime_error("in the body"); }),
               std::runtime_error);
  std::atomic<int> runs{0};
  RunWithKernelTeam(2, [&] { ParallelParts(4, [&](int64_t) { runs.fetch_add(1); }); });
  EXPECT_EQ(runs.load(), 4);
}

TEST_F(KernelTeamTest, NestedDisabledAndOneThreadCallsJustRunTheBody) {
  at::set_num_threads(2);
  const int64_t started = KernelTeamsStarted();
  std::atomic<int> runs{0};
  const auto count_parts = [&] { ParallelParts(3, [&](int64_t) { runs.fetch_add(1); }); };
  RunWithKernelTeam(1, count_parts);
  EXPECT_EQ(KernelTeamsStarted(), started);
  RunWithKernelTeam(2, [&] { RunWithKernelTeam(2, count_parts); });
  EXPECT_EQ(KernelTeamsStarted(), started + 1);  // the outer one only
  SetKernelTeamEnabled(false);
  RunWithKernelTeam(2, count_parts);
  EXPECT_EQ(KernelTeamsStarted(), started + 1);
  EXPECT_EQ(ParallelPartsThreads(), 2);  // outside a team: LibTorch's threads
  count_parts();                         // no team: at::parallel_for
  EXPECT_EQ(runs.load(), 12);
}

// Tiny Qwen3 (2 layers), batch-invariant, 2 threads: three sequences prefilled (70 tokens
// together, beyond the team's 64), then decoded four steps, once with the team and once without.
// `teams`: how many teams the forwards started.
torch::Tensor DecodeHidden(Transformer& model, bool team, int64_t* teams) {
  SetKernelTeamEnabled(team);
  torch::NoGradGuard no_grad;
  const ModelConfig& config = model.config();
  PagedKvCache cache = AllocatePagedKvCache(config, /*num_blocks=*/3 * 16, /*block_size=*/4,
                                            torch::kFloat32);
  PagedAttention paged{&cache, ContiguousBlockTables(3, 16)};
  std::vector<int64_t> long_prompt(60);
  for (int64_t t = 0; t < 60; ++t) long_prompt[t] = (7 * t + 1) % config.vocab_size;
  std::vector<std::vector<int64_t>> tokens = {long_prompt, {11, 3, 5}, {7, 7, 1, 2, 9, 4, 4}};
  std::vector<int64_t> starts = {0, 0, 0};
  const int64_t before = KernelTeamsStarted();
  std::vector<torch::Tensor> steps;
  for (int step = 0; step < 5; ++step) {
    absl::StatusOr<PackedBatch> batch = PackContinuations(tokens, starts);
    EXPECT_TRUE(batch.ok());
    absl::StatusOr<torch::Tensor> hidden = model.Hidden(*batch, paged);
    EXPECT_TRUE(hidden.ok()) << hidden.status();
    steps.push_back(*hidden);
    for (size_t s = 0; s < tokens.size(); ++s) {
      starts[s] += static_cast<int64_t>(tokens[s].size());
      tokens[s] = {(3 * step + static_cast<int64_t>(s)) % config.vocab_size};
    }
  }
  *teams = KernelTeamsStarted() - before;
  return torch::cat(steps, 0);
}

TEST_F(KernelTeamTest, PagedDecodeGivesTheSameBitsWithTheTeam) {
  at::set_num_threads(2);
  absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, "tiny");
  ASSERT_TRUE(config.ok());
  config->num_hidden_layers = 2;
  ModelOptions options;
  options.numeric_mode = NumericMode::kBatchInvariant;
  auto model = CreateRandomModel(*config, /*seed=*/11, options);
  int64_t with_teams = 0, without_teams = 0;
  const torch::Tensor with = DecodeHidden(*model, true, &with_teams);
  const torch::Tensor without = DecodeHidden(*model, false, &without_teams);
  EXPECT_EQ(with_teams, 4);  // the decode steps (3 tokens each), not the 70-token prefill
  EXPECT_EQ(without_teams, 0);
  EXPECT_TRUE(torch::equal(with, without));
}

}  // namespace
}  // namespace lockstep::kernels
