// bench_pipeline: the same RL job run on-policy (max_staleness 0) and asynchronously
// (max_staleness 2), sized so that generation and training take comparable time, through the
// real `lockstep run` (trainer + generator processes on loopback). Prints a table and, with
// --json FILE, writes:
//   async_vs_sync_step_time   mean RL step time with S = 2 / with S = 0 (target <= 0.7)
//   idle_fraction_trainer     S = 2: share of step time the trainer waited for rollouts
//   idle_fraction_generator   S = 2: share of step time no generation call was in flight
// The first `--warmup` steps of each run are left out of the means.
//
//   bench_pipeline [--lockstep build/lockstep] [--steps 12] [--warmup 2] [--json FILE]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

namespace fs = std::filesystem;

constexpr char kJob[] = R"(
[job]
seed = 5
[model]
preset = "tiny"
mode = "batch_invariant"
[data]
task = "arithmetic"
eval_size = 8
[sft]
steps = 0
[generator]
count = 1
max_tokens = 24
[trainer]
lr = 0.0003
[algorithm]
prompts_per_step = 8
samples_per_prompt = 8
drop_zero_variance_groups = false
[rewards]
builtin = "math"
[parity]
mode = "report"
[logging]
progress = false
)";

struct RunFigures {
  double step_seconds = 0;
  double idle_trainer = 0;
  double idle_generator = 0;
  double generate = 0, train = 0, sync = 0;
  int steps = 0;
};

int RunJob(const std::string& lockstep, const std::vector<std::string>& args,
           const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), 1);
    dup2(fileno(out), 2);
    std::vector<char*> argv = {const_cast<char*>(lockstep.c_str())};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool Measure(const std::string& lockstep, const fs::path& root, int staleness, int steps,
             int warmup, RunFigures* figures) {
  const std::string name = "s" + std::to_string(staleness);
  const int rc = RunJob(lockstep,
                        {"run", (root / "job.toml").string(), "--name", name, "--set",
                         "job.output_root=\"" + root.string() + "\"", "--set",
                         "job.steps=" + std::to_string(steps), "--set",
                         "async.max_staleness=" + std::to_string(staleness)},
                        root / (name + ".log"));
  if (rc != 0) {
    std::fprintf(stderr, "bench_pipeline: lockstep run failed (S=%d), log %s\n", staleness,
                 (root / (name + ".log")).c_str());
    return false;
  }
  std::ifstream metrics(root / name / "metrics.jsonl");
  int line_number = 0;
  for (std::string line; std::getline(metrics, line); ++line_number) {
    if (line_number < warmup) continue;
    nlohmann::json record = nlohmann::json::parse(line);
    figures->step_seconds += record["time"]["total"].get<double>();
    figures->generate += record["time"]["generate"].get<double>();
    figures->train += record["time"]["train"].get<double>();
    figures->sync += record["time"]["sync"].get<double>();
    figures->idle_trainer += record["idle_fraction_trainer"].get<double>();
    figures->idle_generator += record["idle_fraction_generator"].get<double>();
    ++figures->steps;
  }
  if (figures->steps == 0) return false;
  const double n = figures->steps;
  figures->step_seconds /= n;
  figures->generate /= n;
  figures->train /= n;
  figures->sync /= n;
  figures->idle_trainer /= n;
  figures->idle_generator /= n;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lockstep = "build/lockstep", json_path;
  int steps = 12, warmup = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--lockstep") lockstep = argv[i + 1];
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--warmup") warmup = std::atoi(argv[i + 1]);
    else if (flag == "--json") json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: bench_pipeline [--lockstep PATH] [--steps N] [--warmup N] "
                           "[--json FILE]\n");
      return 2;
    }
  }
  const fs::path root = fs::temp_directory_path() / ("bench_pipeline_" + std::to_string(getpid()));
  fs::create_directories(root);
  std::ofstream(root / "job.toml") << kJob;
  RunFigures sync_run, async_run;
  if (!Measure(lockstep, root, 0, steps, warmup, &sync_run) ||
      !Measure(lockstep, root, 2, steps, warmup, &async_run)) {
    return 1;
  }
  const double ratio = async_run.step_seconds / sync_run.step_seconds;
  std::printf("%-16s %10s %10s %10s %10s %12s %14s\n", "max_staleness", "step s", "generate s",
              "train s", "sync s", "idle trainer", "idle generator");
  for (const auto& [label, f] : {std::pair<const char*, RunFigures>{"0", sync_run},
                                 std::pair<const char*, RunFigures>{"2", async_run}}) {
    std::printf("%-16s %10.3f %10.3f %10.3f %10.3f %12.3f %14.3f\n", label, f.step_seconds,
                f.generate, f.train, f.sync, f.idle_trainer, f.idle_generator);
  }
  std::printf("async_vs_sync_step_time = %.3f (target <= 0.7)\n", ratio);
  if (!json_path.empty()) {
    nlohmann::json out = {{"async_vs_sync_step_time", ratio},
                          {"idle_fraction_trainer", async_run.idle_trainer},
                          {"idle_fraction_generator", async_run.idle_generator},
                          {"sync_step_seconds", sync_run.step_seconds},
                          {"async_step_seconds", async_run.step_seconds},
                          {"steps_measured", async_run.steps}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  fs::remove_all(root);
  return 0;
}
