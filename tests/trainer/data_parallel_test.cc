// Data parallel over c10d/Gloo on loopback.
// - Environment parsing: single rank when nothing is set, errors naming the variable otherwise.
// - DataParallelReducer with two ranks as two threads of this process: bucketed sums are exact,
//   a layout disagreement is refused, a missing peer times out.
// - Training: data_parallel_driver launched as two processes (RANK 0 and 1) ends every step with
//   bit-identical weights on both ranks, equal to a single-rank run on the global batch to 1e-5.
#include "trainer/data_parallel.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/free_port.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/safetensors.h"

extern char** environ;

namespace lockstep::trainer {
namespace {

using ::testing::HasSubstr;

// A port that was free a moment ago, outside the ephemeral range (common/free_port.h).
int FreePort() { return PickFreePort().value(); }

absl::StatusOr<DistributedEnv> Parse(const std::map<std::string, std::string>& variables) {
  return ParseDistributedEnv([&](const std::string& name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  });
}

TEST(DistributedEnvTest, NothingSetIsASingleRank) {
  absl::StatusOr<DistributedEnv> env = Parse({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
}

TEST(DistributedEnvTest, ReadsAllFour) {
  absl::StatusOr<DistributedEnv> env = Parse(
      {{"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "29555"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "10.0.0.2");
  EXPECT_EQ(env->master_port, 29555);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
}

TEST(DistributedEnvTest, ErrorsNameTheVariable) {
  const std::map<std::string, std::string> good = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
  struct Case {
    std::string variable;
    std::optional<std::string> value;  // nullopt: unset
  };
  const std::vector<Case> cases = {{"RANK", std::nullopt},
                                   {"RANK", "x"},
                                   {"RANK", "2"},
                                   {"RANK", "-1"},
                                   {"WORLD_SIZE", std::nullopt},
                                   {"WORLD_SIZE", "0"},
                                   {"WORLD_SIZE", "2.5"},
                                   {"MASTER_PORT", std::nullopt},
                                   {"MASTER_PORT", "70000"},
                                   {"MASTER_PORT", "port"},
                                   {"MASTER_ADDR", std::nullopt}};
  for (const Case& test_case : cases) {
    std::map<std::string, std::string> variables = good;
    if (test_case.value) {
      variables[test_case.variable] = *test_case.value;
    } else {
      variables.erase(test_case.variable);
    }
    absl::StatusOr<DistributedEnv> env = Parse(variables);
    ASSERT_FALSE(env.ok()) << test_case.variable << "=" << test_case.value.value_or("<unset>");
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(env.status().message(), HasSubstr(test_case.variable));
  }
}

// Runs `body(rank, reducer)` on two threads, each rank with its own reducer on one store.
template <typename Body>
void RunTwoRanks(int64_t bucket_bytes, const Body& body) {
  const int port = FreePort();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      DistributedEnv env{"127.0.0.1", port, rank, 2};
      DataParallelOptions options;
      options.bucket_bytes = bucket_bytes;
      options.timeout = std::chrono::milliseconds(20000);
      absl::StatusOr<std::unique_ptr<DataParallelReducer>> reducer =
          DataParallelReducer::Create(env, options);
      ASSERT_TRUE(reducer.ok()) << reducer.status();
      body(rank, **reducer);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// Mixed shapes and dtypes: with 64-byte buckets the 100-float tensor is a bucket of its own and
// the small float tensors share buckets; every element is the sum of both ranks' values.
TEST(DataParallelReducerTest, BucketedSumIsExactOnBothRanks) {
  RunTwoRanks(/*bucket_bytes=*/64, [](int rank, DataParallelReducer& reducer) {
    const std::vector<std::vector<int64_t>> shapes = {{3}, {2, 4}, {100}, {5}, {1}, {2, 2}};
    std::vector<torch::Tensor> grads;
    std::vector<torch::Tensor> expected;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const torch::Dtype dtype = i == 4 ? torch::kFloat64 : torch::kFloat32;
      int64_t numel = 1;
      for (int64_t size : shapes[i]) numel *= size;
      torch::Tensor base = torch::arange(numel).to(dtype).reshape(shapes[i]);
      // rank 0: base + i, rank 1: 2 * base + 0.5: the sum is 3 * base + i + 0.5 exactly.
      grads.push_back(rank == 0 ? base + static_cast<double>(i) : 2 * base + 0.5);
      expected.push_back(3 * base + static_cast<double>(i) + 0.5);
    }
    absl::Status status = reducer.AllReduceSum(grads);
    ASSERT_TRUE(status.ok()) << status;
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_TRUE(torch::equal(grads[i], expected[i])) << "tensor " << i << " on rank " << rank;
    }
    // Buckets: {3}+{2,4} (44 bytes); {100} alone (400 > 64); {5} (the float64 next differs);
    // {1} float64; {2,2}.
    EXPECT_EQ(reducer.last_num_buckets(), 5);
    absl::StatusOr<double> total = reducer.AllReduceScalar(rank == 0 ? 1.25 : 2.5);
    ASSERT_TRUE(total.ok()) << total.status();
    EXPECT_EQ(*total, 3.75);
  });
}

TEST(DataParallelReducerTest, BroadcastCopiesRankZero) {
  RunTwoRanks(/*bucket_bytes=*/int64_t{25} << 20, [](int rank, DataParallelReducer& reducer) {
    std::vector<torch::Tensor> tensors = {torch::full({4, 3}, rank == 0 ? 7.0 : -1.0),
                                          torch::full({9}, rank == 0 ? 3.0 : 0.0)};
    absl::Status status = reducer.BroadcastFromRankZero(tensors);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(torch::equal(tensors[0], torch::full({4, 3}, 7.0)));
    EXPECT_TRUE(torch::equal(tensors[1], torch::full({9}, 3.0)));
    EXPECT_EQ(reducer.last_num_buckets(), 1);
  });
}

TEST(DataParallelReducerTest, LayoutDisagreementIsRefusedOnEveryRank) {
  RunTwoRanks(/*bucket_bytes=*/1024, [](int rank, DataParallelReducer& reducer) {
    std::vector<torch::Tensor> grads = {torch::ones({rank == 0 ? 4 : 5})};
    absl::Status status = reducer.AllReduceSum(grads);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr("layout"));
  });
}

TEST(DataParallelReducerTest, MissingPeerTimesOut) {
  DistributedEnv env{"127.0.0.1", FreePort(), /*rank=*/0, /*world_size=*/2};
  DataParallelOptions options;
  options.timeout = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<DataParallelReducer>> reducer =
      DataParallelReducer::Create(env, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reducer.ok());
  EXPECT_TRUE(reducer.status().code() == absl::StatusCode::kDeadlineExceeded ||
              reducer.status().code() == absl::StatusCode::kUnavailable)
      << reducer.status();
  EXPECT_LT(seconds, 15.0);
}

// --- training across processes ---

struct Child {
  pid_t pid = -1;
};

Child Launch(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (name == "MASTER_ADDR" || name == "MASTER_PORT" || name == "RANK" || name == "WORLD_SIZE") {
      continue;
    }
    environment.push_back(text);
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  Child child;
  EXPECT_EQ(posix_spawn(&child.pid, args[0].c_str(), nullptr, nullptr, argv.data(), envp.data()),
            0);
  return child;
}

// Exit status of `child`, or -1 after killing it when it runs past `timeout`.
int Wait(Child child, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  return -1;
}

std::vector<std::string> MetricsLines(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

class DataParallelTrainingTest : public testing::TestWithParam<std::string> {};

TEST_P(DataParallelTrainingTest, TwoRanksStayIdenticalAndMatchOneRank) {
  constexpr int kSteps = 3;
  const std::string mode = GetParam();
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / absl::StrCat("dp_test_", getpid(), "_", mode);
  const std::filesystem::path single = root / "single", parallel = root / "parallel";
  std::filesystem::create_directories(single);
  std::filesystem::create_directories(parallel);
  const std::string steps = std::to_string(kSteps);

  // Small buckets (4 KiB) so that the gradients span many buckets.
  const std::string port = std::to_string(FreePort());
  std::vector<Child> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(Launch({LOCKSTEP_DP_DRIVER, parallel.string(), steps, mode, "4096"},
                           {{"MASTER_ADDR", "127.0.0.1"},
                            {"MASTER_PORT", port},
                            {"RANK", std::to_string(rank)},
                            {"WORLD_SIZE", "2"}}));
  }
  Child one = Launch({LOCKSTEP_DP_DRIVER, single.string(), steps, mode}, {});
  EXPECT_EQ(Wait(ranks[0], std::chrono::seconds(120)), 0);
  EXPECT_EQ(Wait(ranks[1], std::chrono::seconds(120)), 0);
  ASSERT_EQ(Wait(one, std::chrono::seconds(120)), 0);

  for (int step = 0; step < kSteps; ++step) {
    const std::string file = absl::StrCat("_step", step, ".safetensors");
    absl::StatusOr<TensorMap> rank0 = ReadSafetensorsFile(parallel / ("rank0" + file));
    absl::StatusOr<TensorMap> rank1 = ReadSafetensorsFile(parallel / ("rank1" + file));
    absl::StatusOr<TensorMap> alone = ReadSafetensorsFile(single / ("rank0" + file));
    ASSERT_TRUE(rank0.ok()) << rank0.status();
    ASSERT_TRUE(rank1.ok()) << rank1.status();
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ(rank0->size(), alone->size());
    for (const auto& [name, weight] : *rank0) {
      ASSERT_TRUE(rank1->count(name) && alone->count(name)) << name;
      EXPECT_TRUE(torch::equal(weight, rank1->at(name)))
          << name << " differs between ranks after step " << step;
      const double diff = (weight - alone->at(name)).abs().max().item<double>();
      EXPECT_LE(diff, 1e-5) << name << " vs the single-rank run after step " << step;
    }
  }
  // The reported loss is the global one on both ranks.
  const std::vector<std::string> metrics0 = MetricsLines(parallel / "rank0_metrics.txt");
  const std::vector<std::string> metrics_alone = MetricsLines(single / "rank0_metrics.txt");
  ASSERT_EQ(metrics0.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(metrics_alone.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    double loss_parallel = 0, loss_alone = 0;
    std::sscanf(metrics0[step].c_str(), "%*d %lf", &loss_parallel);
    std::sscanf(metrics_alone[step].c_str(), "%*d %lf", &loss_alone);
    EXPECT_NEAR(loss_parallel, loss_alone, 1e-5 * (1 + std::abs(loss_alone))) << "step " << step;
  }
  std::filesystem::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Modes, DataParallelTrainingTest,
                         testing::Values("fast", "batch_invariant"));

}  // namespace
}  // namespace lockstep::trainer
