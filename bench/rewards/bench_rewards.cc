// Reward round-trip latency and throughput: the math built-in served in-process over gRPC on
// 127.0.0.1 (RewardService, the path `lockstep serve reward --builtin math` runs) and called
// through RewardClient, at concurrency 1 (one call at a time) and 64 (64 calls kept in flight),
// one item per call; plus 64-item batches at concurrency 64; next to the in-process call
// (Reward::Score directly, and LocalRewardScorer's asynchronous round trip). Client and server
// share this process and the machine's cores. Prints a table; --json FILE writes the figures.
//   build/bench/rewards/bench_rewards --json bench_rewards.json
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "nlohmann/json.hpp"
#include "rewards/local_reward_scorer.h"
#include "rewards/reward_client.h"
#include "rewards/reward_registry.h"
#include "rewards/reward_service.h"

namespace {

using Clock = std::chrono::steady_clock;
using lockstep::rewards::ItemOutcome;
using lockstep::rewards::RewardInput;
using lockstep::rewards::RewardScorer;

struct Figures {
  double p50_ms = 0;
  double p99_ms = 0;
  double items_per_s = 0;
  int64_t failed = 0;
};

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(q * values.size()));
  return values[index];
}

std::vector<RewardInput> MathItems(int count) {
  std::vector<RewardInput> items;
  for (int i = 0; i < count; ++i) {
    RewardInput item;
    item.prompt =
        "Natalia sold clips to 48 of her friends in April, and then she sold half as "
        "many clips in May. How many clips did Natalia sell altogether?";
    item.completion = absl::StrCat("In May she sold 48 / 2 = 24 clips. Altogether 48 + 24 = 72. ",
                                   "The answer is \\boxed{", 70 + i % 5, "}.");
    item.completion_token_ids.assign(40, 17);
    item.reference = "72";
    items.push_back(std::move(item));
  }
  return items;
}

// Keeps `concurrency` ScoreAsync calls of `batch` items in flight until `num_calls` have
// finished; latency is per call, from ScoreAsync to its callback.
Figures RunClosedLoop(RewardScorer& scorer, int concurrency, int num_calls, int batch) {
  const std::vector<RewardInput> items = MathItems(batch);
  std::mutex mu;
  std::condition_variable all_done;
  std::vector<double> latencies_ms;
  latencies_ms.reserve(num_calls);
  int num_started = 0;
  int num_finished = 0;
  int64_t num_failed = 0;
  std::function<void()> start_one = [&] {
    const Clock::time_point sent = Clock::now();
    scorer.ScoreAsync(items, [&, sent](std::vector<ItemOutcome> outcomes) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
      bool start_next = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        latencies_ms.push_back(ms);
        for (const ItemOutcome& outcome : outcomes) num_failed += outcome.ok ? 0 : 1;
        ++num_finished;
        if (num_started < num_calls) {
          ++num_started;
          start_next = true;
        }
        if (num_finished == num_calls) all_done.notify_all();
      }
      if (start_next) start_one();
    });
  };
  const Clock::time_point start = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    num_started = std::min(concurrency, num_calls);
  }
  for (int i = 0; i < std::min(concurrency, num_calls); ++i) start_one();
  {
    std::unique_lock<std::mutex> lock(mu);
    all_done.wait(lock, [&] { return num_finished == num_calls; });
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Figures figures;
  figures.p50_ms = Percentile(latencies_ms, 0.50);
  figures.p99_ms = Percentile(latencies_ms, 0.99);
  figures.items_per_s = static_cast<double>(num_calls) * batch / seconds;
  figures.failed = num_failed;
  return figures;
}

// Reward::Score called directly, one item at a time.
Figures RunDirect(const lockstep::rewards::Reward& reward, int num_calls) {
  const std::vector<RewardInput> items = MathItems(5);
  std::vector<double> latencies_ms;
  latencies_ms.reserve(num_calls);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < num_calls; ++i) {
    const Clock::time_point t0 = Clock::now();
    auto result = reward.Score(items[i % items.size()]);
    if (!result.ok()) std::abort();
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99), num_calls / seconds, 0};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reward round trips: remote (loopback gRPC) vs in-process"};
  std::string json_path;
  int calls_c1 = 2000;
  int calls_c64 = 20000;
  int calls_batched = 1000;
  app.add_option("--json", json_path, "write results as JSON to this file");
  app.add_option("--calls-c1", calls_c1, "one-item calls at concurrency 1")->capture_default_str();
  app.add_option("--calls-c64", calls_c64, "one-item calls at concurrency 64")
      ->capture_default_str();
  app.add_option("--calls-batched", calls_batched, "64-item calls at concurrency 64")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  lockstep::rewards::RewardService service(*lockstep::rewards::CreateBuiltinReward("math"), {});
  absl::StatusOr<lockstep::RunningServer> running = lockstep::StartServer({}, {&service});
  if (!running.ok()) {
    std::cerr << "bench_rewards: " << running.status() << "\n";
    return 1;
  }
  lockstep::rewards::ClientOptions options;
  options.address = absl::StrCat("127.0.0.1:", running->port);
  options.max_concurrency = 64;
  options.max_batch_items = 64;
  auto client = lockstep::rewards::RewardClient::Create(options);
  if (!client.ok()) {
    std::cerr << "bench_rewards: " << client.status() << "\n";
    return 1;
  }
  RunClosedLoop(**client, 8, 500, 1);  // warm up: connect, first allocations

  const Figures remote_c1 = RunClosedLoop(**client, 1, calls_c1, 1);
  const Figures remote_c64 = RunClosedLoop(**client, 64, calls_c64, 1);
  const Figures remote_batched = RunClosedLoop(**client, 64, calls_batched, 64);
  const auto math = *lockstep::rewards::CreateBuiltinReward("math");
  const Figures direct = RunDirect(*math, 200000);
  lockstep::rewards::LocalRewardScorer local(*lockstep::rewards::CreateBuiltinReward("math"));
  const Figures local_c1 = RunClosedLoop(local, 1, 20000, 1);
  const Figures local_c64 = RunClosedLoop(local, 64, 100000, 1);
  const lockstep::rewards::ClientMetrics metrics = (*client)->metrics();
  client->reset();
  running->server->Shutdown();

  std::printf("%-44s %10s %10s %14s %7s\n", "reward call (math built-in)", "p50 ms", "p99 ms",
              "items/s", "failed");
  auto row = [](const char* name, const Figures& f) {
    std::printf("%-44s %10.4f %10.4f %14.0f %7lld\n", name, f.p50_ms, f.p99_ms, f.items_per_s,
                static_cast<long long>(f.failed));
  };
  row("remote gRPC, concurrency 1, 1 item/call", remote_c1);
  row("remote gRPC, concurrency 64, 1 item/call", remote_c64);
  row("remote gRPC, concurrency 64, 64 items/call", remote_batched);
  row("in-process LocalRewardScorer, concurrency 1", local_c1);
  row("in-process LocalRewardScorer, concurrency 64", local_c64);
  row("in-process Reward::Score, direct", direct);
  std::printf("client: %lld rpcs, %lld retries, %lld items failed, max %lld calls in flight\n",
              static_cast<long long>(metrics.rpcs), static_cast<long long>(metrics.retries),
              static_cast<long long>(metrics.items_failed),
              static_cast<long long>(metrics.max_concurrent_rpcs));

  if (!json_path.empty()) {
    nlohmann::json json = {
        {"remote_p50_ms_c1", remote_c1.p50_ms},
        {"remote_p99_ms_c1", remote_c1.p99_ms},
        {"remote_items_per_s_c1", remote_c1.items_per_s},
        {"remote_p50_ms_c64", remote_c64.p50_ms},
        {"remote_p99_ms_c64", remote_c64.p99_ms},
        {"remote_items_per_s_c64", remote_c64.items_per_s},
        {"remote_batch64_p50_ms_c64", remote_batched.p50_ms},
        {"remote_batch64_p99_ms_c64", remote_batched.p99_ms},
        {"remote_batch64_items_per_s_c64", remote_batched.items_per_s},
        {"inprocess_scorer_p50_ms_c1", local_c1.p50_ms},
        {"inprocess_scorer_p99_ms_c1", local_c1.p99_ms},
        {"inprocess_scorer_items_per_s_c1", local_c1.items_per_s},
        {"inprocess_scorer_items_per_s_c64", local_c64.items_per_s},
        {"inprocess_direct_p50_ms", direct.p50_ms},
        {"inprocess_direct_p99_ms", direct.p99_ms},
        {"inprocess_direct_items_per_s", direct.items_per_s},
        {"remote_items_failed", metrics.items_failed},
    };
    std::ofstream(json_path) << json.dump(2) << "\n";
  }
  return remote_c1.failed + remote_c64.failed + remote_batched.failed == 0 ? 0 : 1;
}
