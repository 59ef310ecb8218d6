#include "orchestrator/job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/child_process.h"
#include "common/file_io.h"
#include "data/dataset_iterator.h"
#include "orchestrator/environment_rollouts.h"
#include "orchestrator/evaluation.h"
#include "orchestrator/job_services.h"
#include "orchestrator/log_level.h"
#include "orchestrator/metrics_log.h"
#include "orchestrator/progress_line.h"
#include "orchestrator/rl_loop.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/stop_signal.h"
#include "orchestrator/task_data.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;

// Where the RL loop starts: the prompt stream's position and the RL steps already done.
struct LoopStart {
  DatasetIterator iterator;
  int64_t steps_done = 0;
};

// Everything the job holds while it runs; the destructor stops the children.
class Job {
 public:
  Job(const JobConfig& config, const JobRunOptions& options)
      : config_(config),
        options_(options),
        services_(config_),
        progress_(config_.job.steps, stderr, config_.logging.progress) {}

  absl::StatusOr<JobSummary> Run();

 private:
  absl::Status OpenRunDirectory();
  absl::Status PrepareModelAndData();
  void LogPromptFormat();
  ServiceLaunch Launch() const;
  absl::StatusOr<LoopStart> Resume();
  absl::StatusOr<LoopStart> WarmStartAndEvaluate();
  absl::Status RunLoop(LoopStart start, int64_t* steps_done, int64_t* steps_this_run);
  bool HasEval();
  absl::StatusOr<EvalResult> RunEval(const char* when);
  // `background`: the trainer writes it while the job goes on (the loop's periodic ones); the
  // last one of a run waits for its write, and so for every earlier one.
  absl::Status Checkpoint(const std::string& cursor, bool background = false);
  // A line on the console when `level` is at least [logging] level.
  void Log(LogLevel level, const std::string& line) {
    if (level >= log_level_) progress_.Message(absl::StrCat("lockstep run: ", line));
  }
  void Log(const std::string& line) { Log(LogLevel::kInfo, line); }

  const JobConfig config_;
  const JobRunOptions options_;
  const bool resuming_ = !options_.resume_dir.empty();
  const LogLevel log_level_ = ParseLogLevel(config_.logging.level).value_or(LogLevel::kInfo);
  std::optional<RunDir> run_dir_;
  int64_t run_number_ = 1;
  std::string auth_token_;
  std::string model_dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  PromptFormat prompt_format_;
  TaskData data_;
  v1::SamplingParams sampling_;
  JobServices services_;
  ProgressLine progress_;
  EvalResult eval_before_;
  int64_t eval_before_run_ = 0;  // the run that measured eval_before_ (0: unknown)
  RlTotals job_totals_;  // every step of the job: kept records of earlier runs, then this run's
  PromptLedger prompt_ledger_;  // this run's RL loop
};

// The map of a job.
absl::StatusOr<JobSummary> Job::Run() {
  const absl::Time start = absl::Now();
  if (absl::Status s = OpenRunDirectory(); !s.ok()) return s;
  if (absl::Status s = PrepareModelAndData(); !s.ok()) return s;
  if (absl::Status s = services_.Start(Launch(), [this](auto& l) { Log(l); }); !s.ok()) return s;
  if (absl::Status s = services_.FormWeightSyncGroup([this](auto& l) { Log(l); }); !s.ok()) {
    return s;
  }
  absl::StatusOr<LoopStart> loop_start = resuming_ ? Resume() : WarmStartAndEvaluate();
  if (!loop_start.ok()) return loop_start.status();
  JobSummary summary;
  while (true) {
    absl::Status s = RunLoop(*std::move(loop_start), &summary.rl_steps, &summary.rl_steps_this_run);
    if (s.ok()) break;
    // A dead trainer: restarted from its last checkpoint, and the job rolls back to it (the
    // steps after it run again and, on CPU in batch-invariant mode, give the same bits).
    if (absl::IsCancelled(s) || IsRestartBudgetSpent(s) || !services_.TrainerDied(absl::Seconds(3))) {
      return s;
    }
    Log(absl::StrCat("the trainer died at RL step ", summary.rl_steps, ": ", s.message()));
    if (absl::Status restarted = services_.RestartTrainer(); !restarted.ok()) return restarted;
    const RlTotals before_rollback = std::exchange(job_totals_, RlTotals());
    loop_start = Resume();  // folds the kept records again
    if (!loop_start.ok()) return loop_start.status();
    if (!summary.trainer_rollbacks.has_value()) summary.trainer_rollbacks.emplace();
    RollbackCounts& rollbacks = *summary.trainer_rollbacks;
    ++rollbacks.rollbacks;
    rollbacks.steps_discarded += before_rollback.steps - job_totals_.steps;
    rollbacks.rollouts_discarded += before_rollback.samples_trained - job_totals_.samples_trained;
    rollbacks.prompts_in_flight_discarded += prompt_ledger_.in_flight;
    Log(absl::StrCat("rolled back to RL step ", loop_start->steps_done, ": ",
                     before_rollback.steps - job_totals_.steps, " steps and ",
                     before_rollback.samples_trained - job_totals_.samples_trained,
                     " trained rollouts discarded, ", prompt_ledger_.in_flight,
                     " prompts in flight issued again"));
  }
  absl::StatusOr<EvalResult> after = RunEval("after");
  if (!after.ok()) return after.status();

  summary.name = config_.job.name;
  summary.runs = run_number_;
  summary.resumed = resuming_;
  summary.held_out_eval = HasEval();
  summary.eval_before = eval_before_;
  summary.eval_before_run = eval_before_run_;
  summary.eval_after = *after;
  summary.accuracy_before = eval_before_.accuracy;
  summary.accuracy_after = after->accuracy;
  SetTotals(job_totals_, summary);
  if (services_.rewards().environment() != nullptr) summary.episodes = job_totals_.episodes;
  summary.max_staleness = config_.async.max_staleness;
  summary.rewards = services_.rewards().SummaryJson();
  summary.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  summary.restarts = services_.restarts();
  for (const auto& [service, count] : summary.restarts) summary.restarts_total += count;
  summary.prompts = prompt_ledger_;
  if (absl::Status s = WriteSummary(*run_dir_, summary); !s.ok()) return s;
  services_.StopAll();
  PrintSummaryTable(summary, run_dir_->path(), stdout);
  return summary;
}

// A new run directory (config, auth token), or the one resumed; this run's number.
absl::Status Job::OpenRunDirectory() {
  absl::StatusOr<RunDir> dir = resuming_
                                   ? RunDir::Open(options_.resume_dir)
                                   : RunDir::Create(config_.job.output_root, config_.job.name);
  if (!dir.ok()) return dir.status();
  run_dir_ = *std::move(dir);
  if (resuming_) {
    std::error_code error;
    if (fs::is_empty(run_dir_->checkpoints_dir(), error) || error) {
      return absl::NotFoundError(absl::StrCat("--resume ", run_dir_->path(),
                                              ": no checkpoint to resume from in checkpoints/"));
    }
    absl::StatusOr<std::string> token = ReadAuthTokenFile(run_dir_->auth_token_path());
    if (!token.ok()) return token.status();
    auth_token_ = *token;
  } else {
    if (absl::Status s = WriteResolvedConfig(config_, run_dir_->config_path()); !s.ok()) return s;
    auth_token_ = NewAuthToken();
    if (absl::Status s = WriteAuthTokenFile(run_dir_->auth_token_path(), auth_token_); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<int64_t> run = run_dir_->StartRun();
  if (!run.ok()) return run.status();
  // A run directory from before the `runs` file had one run already.
  run_number_ = std::max<int64_t>(*run, resuming_ ? 2 : 1);
  return absl::OkStatus();
}

// The model (a preset written once into the run directory, or the given one), its tokenizer,
// the trainer's options, the task's data and the sampling parameters.
absl::Status Job::PrepareModelAndData() {
  model_dir_ = config_.model.path;
  if (!config_.model.preset.empty()) {
    model_dir_ = run_dir_->model_dir();
    if (!fs::exists(fs::path(model_dir_) / "config.json")) {
      Log(absl::StrCat("creating a ", config_.model.preset, " ", config_.model.arch, " model in ",
                       model_dir_));
      const std::string log = run_dir_->log_path("init_model");
      absl::Status s =
          RunToCompletion({options_.lockstep_binary, "init-model", "--arch", config_.model.arch,
                           "--preset", config_.model.preset, "--out", model_dir_, "--seed",
                           std::to_string(config_.job.seed)},
                          log);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), ": ", LogTail(log, 5)));
    }
  }
  const std::string tokenizer_path =
      config_.tokenizer.path.empty() ? model_dir_ : config_.tokenizer.path;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  tokenizer_ = *std::move(tokenizer);
  const nlohmann::json trainer_options = TrainerOptionsJson(config_, run_dir_->checkpoints_dir());
  if (absl::Status s =
          WriteFileAtomically(run_dir_->trainer_options_path(), trainer_options.dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<PromptFormat> format =
      ResolveJobPromptFormat(config_, model_dir_, tokenizer_path, *tokenizer_);
  if (!format.ok()) return format.status();
  prompt_format_ = *std::move(format);
  absl::StatusOr<TaskData> data = LoadTaskData(config_);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  LogPromptFormat();
  for (int32_t id : prompt_format_.stop_token_ids) sampling_.add_stop_token_ids(id);
  sampling_.set_temperature(config_.generator.temperature);
  sampling_.set_top_p(config_.generator.top_p);
  sampling_.set_top_k(config_.generator.top_k);
  sampling_.set_max_tokens(config_.generator.max_tokens);
  return absl::OkStatus();
}

// The template and stop tokens (info), and the first prompt of each set as the model sees it
// (debug), so that a user can check them before a long run.
void Job::LogPromptFormat() {
  Log(DescribePromptFormat(prompt_format_, *tokenizer_));
  if (prompt_format_.stop_token_ids.empty()) {
    Log(LogLevel::kWarning,
        "no stop tokens (no eos id in the model's files): completions run to max_tokens");
  }
  for (const auto& [name, set] : {std::pair{"train", data_.train.get()},
                                  std::pair{"eval", data_.eval.get()}}) {
    if (set == nullptr) continue;
    absl::StatusOr<std::string> text = PromptText(set->example(0), prompt_format_);
    if (text.ok()) Log(LogLevel::kDebug, absl::StrCat("first ", name, " prompt: ", *text));
  }
}

ServiceLaunch Job::Launch() const {
  ServiceLaunch launch;
  launch.lockstep_binary = options_.lockstep_binary;
  launch.model_dir = model_dir_;
  launch.trainer_options_path = run_dir_->trainer_options_path();
  if (resuming_) launch.resume_checkpoint = run_dir_->checkpoints_dir();
  launch.auth_token = auth_token_;
  launch.auth_token_path = run_dir_->auth_token_path();
  launch.logs_dir = run_dir_->logs_dir();
  launch.checkpoints_dir = run_dir_->checkpoints_dir();
  return launch;
}

// The trainer restarted from its last checkpoint: the loop continues from the checkpoint's
// data cursor, metrics.jsonl loses the steps after it (they run again), and the generators get
// the checkpoint's weights. A checkpoint without a cursor (none after SFT) starts over.
absl::StatusOr<LoopStart> Job::Resume() {
  absl::StatusOr<v1::TrainerStatusResponse> status = services_.trainer().GetStatus();
  if (!status.ok()) return status.status();
  if (status->data_cursor().empty()) return WarmStartAndEvaluate();
  absl::StatusOr<std::pair<DatasetCursor, int64_t>> cursor =
      RlLoop::ParseDataCursor(status->data_cursor());
  if (!cursor.ok()) return cursor.status();
  absl::StatusOr<DatasetIterator> iterator =
      DatasetIterator::Restore(data_.train.get(), cursor->first);
  if (!iterator.ok()) return iterator.status();
  const int64_t steps_done = cursor->second;
  Log(absl::StrCat("resumed from ", status->resumed_from(), " after RL step ", steps_done));
  absl::StatusOr<std::vector<StepRecord>> kept =
      TruncateMetricsAfterStep(run_dir_->metrics_path(), steps_done);
  if (!kept.ok()) return kept.status();
  for (const StepRecord& record : *kept) job_totals_.Add(record);
  if (absl::Status s = services_.Sync(status->weight_version()); !s.ok()) return s;
  // The "before" stays the first run's (a file from before `run` was written says run 1).
  absl::StatusOr<std::string> text = ReadFile(run_dir_->eval_before_path());
  if (text.ok()) {
    nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (json.is_object()) {
      eval_before_ = json.get<EvalResult>();
      eval_before_run_ = json.value("run", int64_t{1});
    }
  }
  return LoopStart{*std::move(iterator), steps_done};
}

// SFT warm start (then a weight sync), and the held-out eval before RL.
absl::StatusOr<LoopStart> Job::WarmStartAndEvaluate() {
  // Nothing of an earlier run counts: the job starts over.
  absl::StatusOr<std::vector<StepRecord>> kept =
      TruncateMetricsAfterStep(run_dir_->metrics_path(), 0);
  if (!kept.ok()) return kept.status();
  job_totals_ = RlTotals();
  const uint64_t seed = static_cast<uint64_t>(config_.job.seed);
  const Dataset& sft_set = data_.sft ? *data_.sft : *data_.train;
  DatasetIterator sft(&sft_set, seed ^ 0x5F7ull);
  const absl::Time start = absl::Now();
  double loss = 0;
  int64_t version = 0;
  for (int64_t step = 0; step < config_.sft.steps; ++step) {
    if (StopRequested()) return absl::CancelledError("stopped by a signal during SFT");
    absl::StatusOr<v1::SftStepRequest> request =
        SftBatch(sft, sft_set, *tokenizer_, prompt_format_, config_.sft.batch_size);
    if (!request.ok()) return request.status();
    absl::StatusOr<v1::TrainStepResponse> response = services_.trainer().SftStep(*request);
    if (!response.ok()) return response.status();
    loss = response->metrics().loss();
    version = response->metrics().weight_version();
  }
  if (config_.sft.steps > 0) {
    if (absl::Status s = services_.Sync(version); !s.ok()) return s;
    Log(absl::StrCat("SFT warm start: ", config_.sft.steps, " steps, final loss ", loss, ", ",
                     absl::ToDoubleSeconds(absl::Now() - start), " s"));
  }
  absl::StatusOr<EvalResult> before = RunEval("before");
  if (!before.ok()) return before.status();
  eval_before_ = *before;
  eval_before_run_ = HasEval() ? run_number_ : 0;
  nlohmann::json eval_before_json = eval_before_;
  eval_before_json["run"] = eval_before_run_;
  if (absl::Status s =
          WriteFileAtomically(run_dir_->eval_before_path(), eval_before_json.dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  return LoopStart{DatasetIterator(data_.train.get(), seed), 0};
}

// The RL loop to job.steps, a record per step (metrics.jsonl, progress line, job totals), a
// checkpoint every K steps and at the end (also when stopped by a signal: Cancelled).
absl::Status Job::RunLoop(LoopStart start, int64_t* steps_done, int64_t* steps_this_run) {
  RlLoopOptions loop_options;
  loop_options.steps = config_.job.steps;
  loop_options.prompts_per_step = config_.algorithm.prompts_per_step;
  loop_options.samples_per_prompt = config_.algorithm.samples_per_prompt;
  loop_options.max_staleness = config_.async.max_staleness;
  loop_options.sampling = sampling_;
  loop_options.prompt_format = prompt_format_;
  absl::StatusOr<trainer::AdvantageKind> kind =
      trainer::ParseAdvantageKind(config_.algorithm.advantage);
  if (!kind.ok()) return kind.status();
  loop_options.advantages.kind = *kind;
  loop_options.advantages.drop_zero_variance_groups = config_.algorithm.drop_zero_variance_groups;
  loop_options.parity = config_.parity.mode;
  loop_options.checkpoint_every = config_.checkpointing.every;
  loop_options.seed = static_cast<uint64_t>(config_.job.seed);
  loop_options.sync_timeout =
      absl::Milliseconds(config_.weight_sync.timeout_ms) + absl::Seconds(10);
  loop_options.investigate_hint =
      absl::StrCat("lockstep diagnose --model ", model_dir_, " (run: ", run_dir_->path(), ")");
  MismatchRecorderOptions& records = loop_options.mismatch_records;
  records.run_dir = std::filesystem::absolute(run_dir_->path());
  records.max_records = config_.parity.max_records;
  records.max_steps = config_.parity.max_record_steps;
  records.temperature = config_.generator.temperature;
  records.top_k = config_.generator.top_k;
  records.top_p = config_.generator.top_p;
  records.generator_mode = records.trainer_mode = config_.model.mode;
  records.generator_threads = static_cast<int>(config_.generator.threads);
  records.trainer_threads = static_cast<int>(config_.trainer.threads);
  std::unique_ptr<EnvironmentRollouts> episodes;
  if (services_.rewards().environment() != nullptr) {
    EnvironmentRolloutOptions episode_options;
    episode_options.samples_per_prompt = config_.algorithm.samples_per_prompt;
    episode_options.max_turns = static_cast<int>(config_.environment.max_turns);
    episode_options.max_sequence_length = config_.trainer.max_sequence_length;
    episode_options.sampling = sampling_;
    episode_options.format = prompt_format_;
    episode_options.generate_timeout = loop_options.generate_timeout;
    episode_options.num_threads = static_cast<int>(std::min<int64_t>(
        64, config_.algorithm.prompts_per_step * config_.algorithm.samples_per_prompt));
    episodes = std::make_unique<EnvironmentRollouts>(services_.rewards().environment(),
                                                     tokenizer_.get(), episode_options);
  }
  // Opened after Resume's truncation, which replaces the file.
  absl::StatusOr<std::unique_ptr<MetricsLog>> metrics = MetricsLog::Open(run_dir_->metrics_path());
  if (!metrics.ok()) return metrics.status();
  // Declared after `episodes`: the loop goes first, waiting for its callbacks.
  // The services this job started are restarted when they die (job_services.h); a generator
  // at a given address that fails a call stops the job.
  GeneratorRecovery* recovery = &services_;
  RlLoop loop(loop_options,
              {&services_.trainer(), services_.generators(), services_.rewards().scorer(),
               tokenizer_.get(), episodes.get(), recovery},
              data_.train.get(), std::move(start.iterator), start.steps_done);
  absl::Status metrics_status;
  absl::Status run = loop.Run(
      [&](const StepRecord& record) {
        job_totals_.Add(record);
        if (metrics_status.ok()) metrics_status = (*metrics)->Append(record);
        progress_.Update(record);
      },
      [&](int64_t, const std::string& cursor) { return Checkpoint(cursor, /*background=*/true); },
      StopRequested);
  progress_.Finish();
  *steps_done = loop.steps_done();
  *steps_this_run = loop.totals().steps;
  prompt_ledger_ = loop.ledger();
  if (absl::IsCancelled(run) || IsRestartBudgetSpent(run)) {
    if (IsRestartBudgetSpent(run)) Log(LogLevel::kWarning, std::string(run.message()));
    Log(LogLevel::kWarning, "stopping: writing a checkpoint first");
    if (absl::Status s = Checkpoint(loop.DataCursor()); !s.ok()) return s;
    return run;
  }
  if (!run.ok()) return run;
  if (!metrics_status.ok()) return metrics_status;
  return Checkpoint(loop.DataCursor());
}

// The held-out eval is single-turn: it has no meaning for a multi-turn job.
bool Job::HasEval() {
  return data_.eval != nullptr && services_.rewards().scorer() != nullptr &&
         !config_.environment.enabled();
}

absl::StatusOr<EvalResult> Job::RunEval(const char* when) {
  if (!HasEval()) return EvalResult{};
  absl::StatusOr<EvalResult> result =
      Evaluate(*data_.eval, *tokenizer_, prompt_format_, services_.generators(),
               *services_.rewards().scorer(), sampling_);
  if (result.ok()) {
    Log(absl::StrCat("eval ", when, " RL: accuracy ", result->accuracy, " (", result->num_correct,
                     "/", result->num_prompts, "), ", result->seconds, " s"));
  }
  return result;
}

absl::Status Job::Checkpoint(const std::string& cursor, bool background) {
  absl::StatusOr<v1::SaveCheckpointResponse> saved =
      services_.trainer().SaveCheckpoint(cursor, background);
  if (!saved.ok()) return saved.status();
  Log(background ? absl::StrCat("checkpoint: ", saved->path(), " (trainer blocked ",
                                absl::SixDigits(saved->blocking_ms()),
                                " ms, written in the background)")
                 : absl::StrCat("checkpoint: ", saved->path(), " (written in ",
                                absl::SixDigits(saved->write_ms()), " ms)"));
  return absl::OkStatus();
}

}  // namespace

std::string RunDirectory(const JobConfig& config) {
  return (fs::path(config.job.output_root) / config.job.name).string();
}

absl::StatusOr<JobSummary> RunJob(const JobConfig& config, const JobRunOptions& options) {
  // The model's sampling defaults are resolved first, so that everything (the trainer's
  // temperature, the resolved config.toml, mismatch records) sees the values that sample.
  JobConfig effective = config;
  if (!config.model.path.empty()) {
    if (absl::Status s = ApplyGenerationConfigDefaults(config.model.path, &effective); !s.ok()) {
      return s;
    }
  }
  Job job(effective, options);
  return job.Run();
}

}  // namespace lockstep::orchestrator
