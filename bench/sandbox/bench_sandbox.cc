// The sandbox's cost, measured side by side in one run against bare processes:
// - overhead per execution: `python3 -c pass` in the sandbox (argv mode, the default options)
//   minus the same command spawned bare (posix_spawn + waitpid, output to /dev/null), in
//   interleaved pairs; p50 and p99 of the per-pair difference. The same for /bin/true (the
//   sandbox's own set-up, no interpreter) and with cgroups off (what the per-run cgroups cost).
// - executions/s of `python3 -c pass` at concurrency 1, 2 and 8 (that many threads each running
//   one execution after another), sandboxed over bare at the same concurrency, in 4 alternating
//   blocks of each.
// - a reward batch: 64 completions x 5 stdin/stdout tests through code_tests (3 of 4 programs
//   right), scored from --reward-threads threads, in-process and through a SandboxService on
//   127.0.0.1 (the path of `[rewards] sandbox_address`).
// Prints a table and the figures as JSON (also to --json FILE), with the CPU model and the load
// average: the machine may be shared.
//   build/bench/sandbox/bench_sandbox --json sandbox.json
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/server.h"
#include "nlohmann/json.hpp"
#include "rewards/code_tests.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_client.h"
#include "sandbox/sandbox_service.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using lockstep::sandbox::ExecRequest;
using lockstep::sandbox::ExecResult;
using lockstep::sandbox::Executor;
using lockstep::sandbox::Sandbox;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(q * values.size()));
  return values[index];
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

// One bare execution of `argv`: posix_spawn, stdin and output on /dev/null, waitpid. Returns
// wall ms, or -1 if it failed.
double RunBare(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const Clock::time_point start = Clock::now();
  pid_t pid = 0;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  const double ms = MsSince(start);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

ExecRequest ArgvRequest(const std::vector<std::string>& argv) {
  ExecRequest request;
  request.argv = argv;
  return request;
}

double RunSandboxed(const Sandbox& sandbox, const ExecRequest& request) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<ExecResult> result = sandbox.Run(request);
  const double ms = MsSince(start);
  if (!result.ok() || result->verdict != lockstep::sandbox::Verdict::kOk) {
    std::fprintf(stderr, "sandboxed run failed: %s\n",
                 result.ok() ? result->error.c_str() : result.status().ToString().c_str());
    return -1;
  }
  return ms;
}

struct Overhead {
  double bare_p50_ms = 0, sandbox_p50_ms = 0, sandbox_p99_ms = 0;
  double p50_ms = 0, p99_ms = 0;  // of sandbox_i - bare_i
  int failures = 0;
};

// `runs` interleaved pairs (bare, then sandboxed) after `warmup` pairs.
Overhead MeasureOverhead(const Sandbox& sandbox, const std::vector<std::string>& argv, int runs,
                         int warmup) {
  Overhead overhead;
  std::vector<double> bare, boxed, difference;
  const ExecRequest request = ArgvRequest(argv);
  for (int i = 0; i < warmup + runs; ++i) {
    const double b = RunBare(argv);
    const double s = RunSandboxed(sandbox, request);
    if (b < 0 || s < 0) {
      ++overhead.failures;
      continue;
    }
    if (i < warmup) continue;
    bare.push_back(b);
    boxed.push_back(s);
    difference.push_back(s - b);
  }
  overhead.bare_p50_ms = Percentile(bare, 0.5);
  overhead.sandbox_p50_ms = Percentile(boxed, 0.5);
  overhead.sandbox_p99_ms = Percentile(boxed, 0.99);
  overhead.p50_ms = Percentile(difference, 0.5);
  overhead.p99_ms = Percentile(difference, 0.99);
  return overhead;
}

// CPU ms of this process and of every child it has waited for (a run's whole process tree:
// the init waits for its own). Kernel workers (e.g. a network namespace's teardown) are not in it.
double ProcessTreeCpuMs() {
  auto ms = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
  };
  rusage self, children;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return ms(self) + ms(children);
}

struct Block {
  double seconds = 0;
  double cpu_ms = 0;
};

// Wall seconds and CPU of `total` executions of `run` from `concurrency` threads.
template <typename Fn>
Block TimeExecutions(int concurrency, int total, Fn run, int* failures) {
  const double cpu_start = ProcessTreeCpuMs();
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      while (next.fetch_add(1) < total) {
        if (run() < 0) ++failed;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  *failures += failed.load();
  return {MsSince(start) / 1000.0, ProcessTreeCpuMs() - cpu_start};
}

// Executions/s of `bare` and of `boxed` at `concurrency`, `total` of each, measured in
// alternating blocks so that a change of the machine's load hits both alike.
struct Throughput {
  double bare_per_s = 0, boxed_per_s = 0;
  double bare_cpu_ms = 0, boxed_cpu_ms = 0;  // per execution, process tree
};

template <typename Bare, typename Boxed>
Throughput Throughputs(int concurrency, int total, int num_blocks, Bare bare, Boxed boxed,
                       int* failures) {
  Block bare_sum, boxed_sum;
  int done = 0;
  for (int block = 0; block < num_blocks; ++block) {
    const int count = (total - done) / (num_blocks - block);
    const Block b = TimeExecutions(concurrency, count, bare, failures);
    const Block s = TimeExecutions(concurrency, count, boxed, failures);
    bare_sum.seconds += b.seconds;
    bare_sum.cpu_ms += b.cpu_ms;
    boxed_sum.seconds += s.seconds;
    boxed_sum.cpu_ms += s.cpu_ms;
    done += count;
  }
  return {done / bare_sum.seconds, done / boxed_sum.seconds, bare_sum.cpu_ms / done,
          boxed_sum.cpu_ms / done};
}

// 64 completions x 5 stdin/stdout tests of "print the sum of two integers"; every fourth
// program is wrong.
std::vector<lockstep::rewards::RewardInput> RewardBatch(int num_items, int num_tests) {
  std::vector<lockstep::rewards::RewardInput> items;
  for (int i = 0; i < num_items; ++i) {
    nlohmann::json tests = nlohmann::json::array();
    for (int t = 0; t < num_tests; ++t) {
      const int a = 3 * i + t, b = 7 * t - i;
      tests.push_back({{"input", absl::StrCat(a, " ", b, "\n")}, {"output", absl::StrCat(a + b)}});
    }
    lockstep::rewards::RewardInput item;
    item.completion = absl::StrCat("```python\na, b = map(int, input().split())\nprint(a ",
                                   i % 4 == 3 ? "-" : "+", " b)\n```");
    item.metadata["tests"] = tests.dump();
    items.push_back(std::move(item));
  }
  return items;
}

struct RewardFigures {
  double items_per_s = 0;
  double mean_reward = 0;
  int failed = 0;
};

RewardFigures ScoreBatch(std::shared_ptr<Executor> executor, int num_items, int num_tests,
                         int num_threads) {
  absl::StatusOr<std::unique_ptr<lockstep::rewards::CodeTestsReward>> reward =
      lockstep::rewards::CodeTestsReward::Create({}, std::move(executor));
  if (!reward.ok()) {
    std::fprintf(stderr, "%s\n", reward.status().ToString().c_str());
    std::exit(1);
  }
  const std::vector<lockstep::rewards::RewardInput> items = RewardBatch(num_items, num_tests);
  std::vector<double> rewards(items.size(), 0);
  std::atomic<int> next{0}, failed{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < static_cast<int>(items.size());) {
        absl::StatusOr<lockstep::rewards::RewardResult> result = (*reward)->Score(items[i]);
        if (result.ok()) {
          rewards[i] = result->reward;
        } else {
          ++failed;
          std::fprintf(stderr, "item %d failed: %s\n", i, result.status().ToString().c_str());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  RewardFigures figures;
  figures.items_per_s = items.size() / (MsSince(start) / 1000.0);
  double sum = 0;
  for (double r : rewards) sum += r;
  figures.mean_reward = sum / items.size();
  figures.failed = failed.load();
  return figures;
}

std::unique_ptr<Sandbox> MakeSandbox(bool use_cgroups, int warm_inits) {
  lockstep::sandbox::SandboxOptions options;
  options.use_cgroups = use_cgroups;
  if (warm_inits >= 0) options.warm_inits = warm_inits;
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
  if (!sandbox.ok()) {
    std::fprintf(stderr, "%s\n", sandbox.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(sandbox);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The sandbox's overhead and throughput against bare processes, in one run"};
  std::string json_path;
  int runs = 200, warmup = 10, throughput_runs = 64, reward_items = 64, reward_tests = 5;
  int reward_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int warm_inits = -1;
  std::vector<int> concurrencies = {1, 2, 8};
  app.add_option("--json", json_path, "Also write the figures as JSON to this file");
  app.add_option("--runs", runs, "Interleaved bare/sandboxed pairs for the overhead")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Pairs run first and not counted")->capture_default_str();
  app.add_option("--throughput-runs", throughput_runs, "Executions per throughput measurement")
      ->capture_default_str();
  app.add_option("--concurrency", concurrencies, "Thread counts for the throughput ratios")
      ->delimiter(',');
  app.add_option("--reward-items", reward_items, "Completions in the reward batch")
      ->capture_default_str();
  app.add_option("--reward-tests", reward_tests, "stdin/stdout tests per completion")
      ->capture_default_str();
  app.add_option("--reward-threads", reward_threads, "Threads scoring the reward batch")
      ->capture_default_str();
  app.add_option("--warm-inits", warm_inits,
                 "Inits the sandboxes keep spawned ahead (SandboxOptions::warm_inits); -1: its "
                 "default")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  nlohmann::json json;
  json["cpu_model"] = CpuModel();
  json["num_cpus"] = std::thread::hardware_concurrency();
  json["load_average_start"] = LoadAverage();
  const std::unique_ptr<Sandbox> sandbox = MakeSandbox(true, warm_inits);
  const std::unique_ptr<Sandbox> sandbox_no_cgroups = MakeSandbox(false, warm_inits);
  json["cgroup"] = sandbox->isolation().cgroup.statement;
  json["warm_inits"] =
      warm_inits >= 0 ? warm_inits : lockstep::sandbox::SandboxOptions().warm_inits;

  const std::vector<std::string> python = {"/usr/bin/python3", "-c", "pass"};
  const std::vector<std::string> true_argv = {"/bin/true"};
  int failures = 0;

  const int64_t warm_before = sandbox->num_warm_starts();
  const Overhead py = MeasureOverhead(*sandbox, python, runs, warmup);
  json["warm_start_fraction"] =
      static_cast<double>(sandbox->num_warm_starts() - warm_before) / (runs + warmup);
  const Overhead truth = MeasureOverhead(*sandbox, true_argv, runs / 2, warmup);
  const Overhead py_no_cgroups = MeasureOverhead(*sandbox_no_cgroups, python, runs / 2, warmup);
  failures += py.failures + truth.failures + py_no_cgroups.failures;
  std::printf("overhead per execution (sandboxed - bare, interleaved pairs)\n");
  std::printf("  %-28s bare p50 %7.2f ms  sandboxed p50 %7.2f  p99 %7.2f  overhead p50 %6.2f  p99 %6.2f\n",
              "python3 -c pass", py.bare_p50_ms, py.sandbox_p50_ms, py.sandbox_p99_ms, py.p50_ms,
              py.p99_ms);
  std::printf("  %-28s bare p50 %7.2f ms  sandboxed p50 %7.2f  p99 %7.2f  overhead p50 %6.2f  p99 %6.2f\n",
              "/bin/true", truth.bare_p50_ms, truth.sandbox_p50_ms, truth.sandbox_p99_ms,
              truth.p50_ms, truth.p99_ms);
  std::printf("  %-28s bare p50 %7.2f ms  sandboxed p50 %7.2f  p99 %7.2f  overhead p50 %6.2f  p99 %6.2f\n",
              "python3 -c pass, no cgroups", py_no_cgroups.bare_p50_ms,
              py_no_cgroups.sandbox_p50_ms, py_no_cgroups.sandbox_p99_ms, py_no_cgroups.p50_ms,
              py_no_cgroups.p99_ms);
  json["overhead_p50_ms"] = py.p50_ms;
  json["overhead_p99_ms"] = py.p99_ms;
  json["bare_python_p50_ms"] = py.bare_p50_ms;
  json["sandboxed_python_p50_ms"] = py.sandbox_p50_ms;
  json["sandboxed_python_p99_ms"] = py.sandbox_p99_ms;
  json["overhead_true_p50_ms"] = truth.p50_ms;
  json["overhead_true_p99_ms"] = truth.p99_ms;
  json["overhead_no_cgroups_p50_ms"] = py_no_cgroups.p50_ms;
  json["overhead_no_cgroups_p99_ms"] = py_no_cgroups.p99_ms;
  json["overhead_runs"] = runs;

  std::printf("executions/s of python3 -c pass (%d per measurement)\n", throughput_runs);
  const ExecRequest python_request = ArgvRequest(python);
  for (int c : concurrencies) {
    const int64_t warm_at_start = sandbox->num_warm_starts();
    const Throughput t = Throughputs(
        c, throughput_runs, /*num_blocks=*/4, [&] { return RunBare(python); },
        [&] { return RunSandboxed(*sandbox, python_request); }, &failures);
    const double bare = t.bare_per_s, boxed = t.boxed_per_s;
    std::printf(
        "  concurrency %d: bare %7.1f/s  sandboxed %7.1f/s  ratio %.3f   CPU/exec bare %.1f ms, "
        "sandboxed %.1f ms\n",
        c, bare, boxed, boxed / bare, t.bare_cpu_ms, t.boxed_cpu_ms);
    json[absl::StrCat("warm_start_fraction_c", c)] =
        static_cast<double>(sandbox->num_warm_starts() - warm_at_start) / throughput_runs;
    json[absl::StrCat("bare_cpu_ms_per_exec_c", c)] = t.bare_cpu_ms;
    json[absl::StrCat("sandbox_cpu_ms_per_exec_c", c)] = t.boxed_cpu_ms;
    json[absl::StrCat("bare_exec_per_s_c", c)] = bare;
    json[absl::StrCat("sandbox_exec_per_s_c", c)] = boxed;
    json[absl::StrCat("throughput_ratio_c", c)] = boxed / bare;
  }

  std::shared_ptr<Executor> local(sandbox.get(), [](Executor*) {});
  const RewardFigures in_process = ScoreBatch(local, reward_items, reward_tests, reward_threads);
  absl::StatusOr<std::unique_ptr<lockstep::sandbox::SandboxService>> service =
      lockstep::sandbox::SandboxService::Create(
          local, {.max_concurrency = reward_threads, .max_queue = 4 * reward_threads});
  absl::StatusOr<lockstep::RunningServer> server =
      lockstep::StartServer({.port = 0}, {service->get()});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::shared_ptr<Executor>> remote =
      lockstep::sandbox::ConnectSandbox(absl::StrCat("127.0.0.1:", server->port), "");
  const RewardFigures through_service =
      ScoreBatch(*remote, reward_items, reward_tests, reward_threads);
  server->server->Shutdown();
  server->server->Wait();
  failures += in_process.failed + through_service.failed;
  std::printf("code_tests batch: %d completions x %d tests, %d threads\n", reward_items,
              reward_tests, reward_threads);
  std::printf("  in-process: %.1f items/s (mean reward %.3f)\n", in_process.items_per_s,
              in_process.mean_reward);
  std::printf("  lockstep serve sandbox on loopback: %.1f items/s (mean reward %.3f)\n",
              through_service.items_per_s, through_service.mean_reward);
  json["reward_items_per_s"] = in_process.items_per_s;
  json["reward_items_per_s_service"] = through_service.items_per_s;
  json["reward_mean"] = in_process.mean_reward;
  json["reward_batch"] = absl::StrCat(reward_items, " completions x ", reward_tests,
                                      " stdin/stdout tests, ", reward_threads, " threads");
  json["failures"] = failures;
  json["load_average_end"] = LoadAverage();
  json["targets"] = {
      {"overhead_p50_ms", {{"bound", "<= 15"}, {"met", py.p50_ms <= 15}}},
      {"throughput_ratio", {{"bound", ">= 0.8 at every concurrency"}}},
  };
  bool ratios_met = true;
  for (int c : concurrencies) {
    ratios_met = ratios_met && json[absl::StrCat("throughput_ratio_c", c)].get<double>() >= 0.8;
  }
  json["targets"]["throughput_ratio"]["met"] = ratios_met;

  const std::string text = json.dump(2);
  std::printf("%s\n", text.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << text << "\n";
  return failures == 0 ? 0 : 1;
}
