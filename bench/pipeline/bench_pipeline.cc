// bench_pipeline: the same RL job run on-policy (max_staleness 0) and asynchronously
// (max_staleness 2) through the real `lockstep run` (trainer + generator processes on loopback).
//
// The job is sized so that generation and training take comparable time per step: a random
// `small` model (~10M parameters, no SFT) samples 1 prompt x 2 completions of up to 192 tokens
// per step. Generation costs one engine step per token position (a decode step at batch 2, bound
// by reading the weights), training one forward + backward per token (bound by arithmetic), which
// on this CPU come out close. (With the `tiny` model the per-step overheads of generation
// dominate, and its share swung from 0.25x to 1.2x of training with the machine's load.) Whether
// they are close is measured in the S = 0 run itself (where the two never overlap) and reported as
// generate_vs_train_s0; the speed-up target is only judged when that ratio is within
// [1/1.5, 1.5].
//
// Prints a table and, with --json FILE, writes:
//   async_vs_sync_step_time   mean RL step time with S = 2 / with S = 0 (target <= 0.7)
//   idle_fraction_trainer     S = 2: share of step time the trainer waited for rollouts
//   idle_fraction_generator   S = 2: share of step time no generation call was in flight
//   generate_s0, train_s0     S = 0: mean seconds per step generating / training
//   generate_vs_train_s0      their ratio; comparable = within a factor 1.5
//   target                    "met", "missed" or "not comparable" (the job was not balanced)
//   cores_used_s0, _s2        CPU time of the job's processes / wall time, whole runs: on a
//                             shared machine, whether the overlap got any extra CPU at all
// plus each S's time split, the S = 2 staleness histogram and the load average.
// S = 0 and S = 2 runs alternate `--repeats` times (the load of a shared machine changes within
// minutes; a single S = 0 run followed by a single S = 2 run measured 0.38 and 1.16 on the same
// build); the figures are step-weighted means over all runs of an S, and each pair's ratio is
// printed too. The first `--warmup` and the last `--cooldown` steps of each run are left out
// (the last S steps of an async run have nothing left to generate).
//
//   bench_pipeline [--lockstep PATH] [--steps 12] [--warmup 2] [--cooldown 2] [--repeats 2]
//                  [--json FILE]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/child_process.h"
#include "nlohmann/json.hpp"

#ifndef LOCKSTEP_BINARY
#define LOCKSTEP_BINARY "build/lockstep"
#endif

namespace {

namespace fs = std::filesystem;
using lockstep::ChildProcessOptions;
using lockstep::StartChildProcess;
using lockstep::WaitForChild;

constexpr char kJob[] = R"(
[job]
seed = 5
[model]
preset = "small"
mode = "batch_invariant"
[data]
task = "arithmetic"
eval_size = 8
[sft]
steps = 0
[generator]
count = 1
max_tokens = 192
[trainer]
lr = 0.0003
[algorithm]
prompts_per_step = 1
samples_per_prompt = 2
drop_zero_variance_groups = false
[rewards]
builtin = "math"
[parity]
mode = "report"
[logging]
progress = false
)";

constexpr double kComparableFactor = 1.5;  // generate/train of the S = 0 run must be within it
constexpr double kTarget = 0.7;            // async_vs_sync_step_time

struct RunFigures {
  double step_seconds = 0;
  double idle_trainer = 0;
  double idle_generator = 0;
  double generate = 0, reward = 0, train = 0, sync = 0;
  double gen_tokens = 0, train_tokens = 0;
  std::map<std::string, int64_t> ages;  // staleness histogram of the measured steps
  int steps = 0;
  // The whole `lockstep run` (startup and evaluation included): wall time and the CPU time of
  // its process tree (orchestrator, trainer, generator).
  double run_wall_seconds = 0, run_cpu_seconds = 0;
};

std::string ReadLoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

// Runs `lockstep args...` with output to `log`; returns its exit code, and the wall and CPU
// seconds (user + system, its waited-for descendants included) it took.
int RunJob(const std::string& lockstep, const std::vector<std::string>& args, const fs::path& log,
           double* wall_seconds, double* cpu_seconds) {
  const auto start = std::chrono::steady_clock::now();
  ChildProcessOptions options;
  options.argv = {lockstep};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.output_path = log.string();
  absl::StatusOr<pid_t> pid = StartChildProcess(options);
  if (!pid.ok()) {
    std::fprintf(stderr, "bench_pipeline: %s\n", pid.status().ToString().c_str());
    return 127;
  }
  struct rusage before {};
  getrusage(RUSAGE_CHILDREN, &before);
  const absl::StatusOr<int> status = WaitForChild(*pid);
  struct rusage after {};
  getrusage(RUSAGE_CHILDREN, &after);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  *cpu_seconds = seconds(after.ru_utime) - seconds(before.ru_utime) + seconds(after.ru_stime) -
                 seconds(before.ru_stime);
  *wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) return 128;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128;
}

bool Measure(const std::string& lockstep, const fs::path& root, int staleness, int repeat,
             int steps, int warmup, int cooldown, RunFigures* figures) {
  const std::string name = "s" + std::to_string(staleness) + "_" + std::to_string(repeat);
  const int rc = RunJob(
      lockstep,
      {"run", (root / "job.toml").string(), "--name", name, "--set",
       "job.output_root=\"" + root.string() + "\"", "--set", "job.steps=" + std::to_string(steps),
       "--set", "async.max_staleness=" + std::to_string(staleness)},
      root / (name + ".log"), &figures->run_wall_seconds, &figures->run_cpu_seconds);
  if (rc != 0) {
    std::fprintf(stderr, "bench_pipeline: %s run failed (S=%d, exit %d), log %s\n",
                 lockstep.c_str(), staleness, rc, (root / (name + ".log")).c_str());
    return false;
  }
  std::ifstream metrics(root / name / "metrics.jsonl");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(metrics, line);) {
    records.push_back(nlohmann::json::parse(line));
  }
  for (int i = warmup; i < static_cast<int>(records.size()) - cooldown; ++i) {
    const nlohmann::json& record = records[i];
    figures->step_seconds += record["time"]["total"].get<double>();
    figures->generate += record["time"]["generate"].get<double>();
    figures->reward += record["time"]["reward"].get<double>();
    figures->train += record["time"]["train"].get<double>();
    figures->sync += record["time"]["sync"].get<double>();
    figures->idle_trainer += record["idle_fraction_trainer"].get<double>();
    figures->idle_generator += record["idle_fraction_generator"].get<double>();
    figures->gen_tokens += record["gen_tokens"].get<double>();
    figures->train_tokens += record["train_tokens"].get<double>();
    for (const auto& [age, count] : record["staleness"].items()) {
      figures->ages[age] += count.get<int64_t>();
    }
    ++figures->steps;
  }
  if (figures->steps == 0) {
    std::fprintf(stderr, "bench_pipeline: S=%d: %zu steps in %s, none measured\n", staleness,
                 records.size(), (root / name / "metrics.jsonl").c_str());
    return false;
  }
  const double n = figures->steps;
  for (double* mean : {&figures->step_seconds, &figures->generate, &figures->reward,
                       &figures->train, &figures->sync, &figures->idle_trainer,
                       &figures->idle_generator, &figures->gen_tokens, &figures->train_tokens}) {
    *mean /= n;
  }
  return true;
}

// The step-weighted means of several runs, their histograms summed.
RunFigures Pool(const std::vector<RunFigures>& runs) {
  RunFigures pooled;
  for (const RunFigures& f : runs) pooled.steps += f.steps;
  for (const RunFigures& f : runs) {
    const double w = static_cast<double>(f.steps) / pooled.steps;
    pooled.step_seconds += w * f.step_seconds;
    pooled.generate += w * f.generate;
    pooled.reward += w * f.reward;
    pooled.train += w * f.train;
    pooled.sync += w * f.sync;
    pooled.idle_trainer += w * f.idle_trainer;
    pooled.idle_generator += w * f.idle_generator;
    pooled.gen_tokens += w * f.gen_tokens;
    pooled.train_tokens += w * f.train_tokens;
    for (const auto& [age, count] : f.ages) pooled.ages[age] += count;
    pooled.run_wall_seconds += f.run_wall_seconds;
    pooled.run_cpu_seconds += f.run_cpu_seconds;
  }
  return pooled;
}

nlohmann::json SplitJson(const RunFigures& f) {
  return {{"step_s", f.step_seconds},
          {"generate_s", f.generate},
          {"reward_s", f.reward},
          {"train_s", f.train},
          {"sync_s", f.sync},
          {"idle_trainer", f.idle_trainer},
          {"idle_generator", f.idle_generator},
          {"gen_tokens", f.gen_tokens},
          {"train_tokens", f.train_tokens},
          {"staleness", f.ages},
          {"run_wall_s", f.run_wall_seconds},
          {"run_cpu_s", f.run_cpu_seconds},
          {"cores_used", f.run_cpu_seconds / f.run_wall_seconds},
          {"steps_measured", f.steps}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string lockstep = LOCKSTEP_BINARY, json_path;
  int steps = 12, warmup = 2, cooldown = 2, repeats = 2;
  CLI::App app{"bench_pipeline: the RL job through lockstep run with max_staleness 0 and 2"};
  app.add_option("--lockstep", lockstep, "The lockstep binary")->capture_default_str();
  app.add_option("--steps", steps, "RL steps per run")->capture_default_str();
  app.add_option("--warmup", warmup, "Steps left out at the start")->capture_default_str();
  app.add_option("--cooldown", cooldown, "Steps left out at the end")->capture_default_str();
  app.add_option("--repeats", repeats, "Runs per max_staleness")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (steps - warmup - cooldown < 1 || repeats < 1) {
    std::fprintf(stderr,
                 "bench_pipeline: --steps %d leaves no step after warmup %d and "
                 "cooldown %d, or --repeats %d < 1\n",
                 steps, warmup, cooldown, repeats);
    return 2;
  }
  const fs::path root = fs::temp_directory_path() / ("bench_pipeline_" + std::to_string(getpid()));
  fs::create_directories(root);
  std::ofstream(root / "job.toml") << kJob;
  const std::string load_start = ReadLoadAverage();
  // S = 0 and S = 2 runs alternate, so that both see the same phases of a shared machine's load.
  std::vector<RunFigures> sync_runs(repeats), async_runs(repeats);
  for (int r = 0; r < repeats; ++r) {
    if (!Measure(lockstep, root, 0, r, steps, warmup, cooldown, &sync_runs[r]) ||
        !Measure(lockstep, root, 2, r, steps, warmup, cooldown, &async_runs[r])) {
      return 1;  // the run directory is kept for its logs
    }
  }
  const std::string load_end = ReadLoadAverage();
  const RunFigures sync_run = Pool(sync_runs), async_run = Pool(async_runs);
  const double ratio = async_run.step_seconds / sync_run.step_seconds;
  const double balance = sync_run.generate / sync_run.train;
  const bool comparable = balance <= kComparableFactor && balance >= 1 / kComparableFactor;
  const char* verdict = !comparable ? "not comparable" : ratio <= kTarget ? "met" : "missed";

  std::printf(
      "job: small random model, 1 prompt x 2 samples x <= 192 tokens per step; %d runs "
      "of %d steps per max_staleness, %d warmup + %d cooldown steps left out of each\n",
      repeats, steps, warmup, cooldown);
  std::printf("%-16s %8s %10s %8s %8s %8s %12s %14s %8s\n", "max_staleness", "step s", "generate s",
              "reward s", "train s", "sync s", "idle trainer", "idle generator", "gen tok");
  auto row = [](const std::string& label, const RunFigures& f) {
    std::printf("%-16s %8.3f %10.3f %8.3f %8.3f %8.3f %12.3f %14.3f %8.1f\n", label.c_str(),
                f.step_seconds, f.generate, f.reward, f.train, f.sync, f.idle_trainer,
                f.idle_generator, f.gen_tokens);
  };
  for (int r = 0; r < repeats; ++r) {
    row("0 (run " + std::to_string(r + 1) + ")", sync_runs[r]);
    row("2 (run " + std::to_string(r + 1) + ")", async_runs[r]);
  }
  row("0 (all)", sync_run);
  row("2 (all)", async_run);
  std::string pairs;
  nlohmann::json pair_ratios = nlohmann::json::array();
  for (int r = 0; r < repeats; ++r) {
    const double pair = async_runs[r].step_seconds / sync_runs[r].step_seconds;
    pair_ratios.push_back(pair);
    pairs += (r == 0 ? "" : ", ") + std::to_string(pair).substr(0, 5);
  }
  std::string ages;
  for (const auto& [age, count] : async_run.ages) {
    ages += (ages.empty() ? "" : " ") + age + ":" + std::to_string(count);
  }
  std::printf("S=2 sample ages (age:count) %s\n", ages.c_str());
  std::printf(
      "generate_vs_train_s0 = %.3f (S=0 per step: generate %.3f s, train %.3f s; "
      "comparable within %.1fx: %s)\n",
      balance, sync_run.generate, sync_run.train, kComparableFactor, comparable ? "yes" : "NO");
  std::printf("async_vs_sync_step_time = %.3f (target <= %.1f): %s; per run pair: %s\n", ratio,
              kTarget, verdict, pairs.c_str());
  const double cores_s0 = sync_run.run_cpu_seconds / sync_run.run_wall_seconds;
  const double cores_s2 = async_run.run_cpu_seconds / async_run.run_wall_seconds;
  std::printf(
      "CPU cores the job's processes got (whole runs): S=0 %.2f, S=2 %.2f (overlap can "
      "only pay off if S=2 gets more)\n",
      cores_s0, cores_s2);
  std::printf("load average: start %s, end %s\n", load_start.c_str(), load_end.c_str());
  if (!json_path.empty()) {
    nlohmann::json out = {{"async_vs_sync_step_time", ratio},
                          {"async_vs_sync_step_time_per_pair", pair_ratios},
                          {"idle_fraction_trainer", async_run.idle_trainer},
                          {"idle_fraction_generator", async_run.idle_generator},
                          {"generate_s0", sync_run.generate},
                          {"train_s0", sync_run.train},
                          {"generate_vs_train_s0", balance},
                          {"comparable", comparable},
                          {"cores_used_s0", cores_s0},
                          {"cores_used_s2", cores_s2},
                          {"comparable_factor", kComparableFactor},
                          {"target", verdict},
                          {"target_bound", kTarget},
                          {"sync_step_seconds", sync_run.step_seconds},
                          {"async_step_seconds", async_run.step_seconds},
                          {"s0", SplitJson(sync_run)},
                          {"s2", SplitJson(async_run)},
                          {"steps", steps},
                          {"repeats", repeats},
                          {"steps_measured", async_run.steps},
                          {"load_average_start", load_start},
                          {"load_average_end", load_end}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  fs::remove_all(root);
  return 0;
}
