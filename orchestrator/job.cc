#include "orchestrator/job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/free_port.h"
#include "data/arithmetic_task.h"
#include "data/dataset_iterator.h"
#include "orchestrator/environment_rollouts.h"
#include "orchestrator/evaluation.h"
#include "orchestrator/generator_client.h"
#include "orchestrator/job_rewards.h"
#include "orchestrator/process_supervisor.h"
#include "orchestrator/rl_loop.h"
#include "orchestrator/stop_signal.h"
#include "orchestrator/trainer_client.h"
#include "orchestrator/weight_sync_driver.h"

namespace lockstep::orchestrator {
namespace {

namespace fs = std::filesystem;

// Where a job keeps its files, under the run directory.
struct RunPaths {
  fs::path root;
  fs::path model() const { return root / "model"; }
  fs::path checkpoints() const { return root / "checkpoints"; }
  fs::path logs() const { return root / "logs"; }
  fs::path token() const { return root / "auth_token"; }
  fs::path trainer_options() const { return root / "trainer_options.json"; }
  fs::path config() const { return root / "config.toml"; }
  fs::path metrics() const { return root / "metrics.jsonl"; }
  fs::path summary() const { return root / "summary.json"; }
  fs::path eval_before() const { return root / "eval_before.json"; }
};

absl::Status WriteTextFile(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", temporary.string()));
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) return absl::InternalError(absl::StrCat("cannot rename to ", path.string()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs argv to completion with output appended to `log_path`; error naming the command.
absl::Status RunToCompletion(const std::vector<std::string>& argv, const fs::path& log_path) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    FILE* log = std::fopen(log_path.c_str(), "a");
    if (log != nullptr) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("'", absl::StrJoin(argv, " "), "' failed (log: ",
                                            log_path.string(), "): ", LogTail(log_path, 5)));
  }
  return absl::OkStatus();
}

// The tokens after which a completion ends: the tokenizer's end-of-turn and end-of-text.
std::vector<int64_t> StopTokens(const Tokenizer& tokenizer) {
  std::vector<int64_t> ids;
  for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
    if (std::optional<int32_t> id = tokenizer.TokenToId(token)) ids.push_back(*id);
  }
  return ids;
}

struct TaskData {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> eval;
  std::unique_ptr<Dataset> sft;  // the warm-start set when it differs from train
};

absl::StatusOr<TaskData> LoadTaskData(const JobConfig& config) {
  TaskData data;
  if (config.data.task == "arithmetic") {
    ArithmeticTaskOptions options;
    options.max_operand = config.data.max_operand;
    options.teacher_carry_error = config.data.teacher_carry_error;
    options.teacher_draws = config.data.teacher_draws;
    options.eval_size = std::max<int64_t>(1, config.data.eval_size);
    options.seed = static_cast<uint64_t>(config.job.seed);
    absl::StatusOr<ArithmeticTask> task = MakeArithmeticTask(options);
    if (!task.ok()) return task.status();
    data.train = std::make_unique<Dataset>(std::move(task->train));
    data.sft = std::make_unique<Dataset>(std::move(task->sft));
    if (config.data.eval_size > 0) data.eval = std::make_unique<Dataset>(std::move(task->eval));
    return data;
  }
  absl::StatusOr<Dataset> train = LoadJsonlDataset(config.data.train_file);
  if (!train.ok()) return train.status();
  data.train = std::make_unique<Dataset>(*std::move(train));
  if (!config.data.eval_file.empty()) {
    absl::StatusOr<Dataset> eval = LoadJsonlDataset(config.data.eval_file);
    if (!eval.ok()) return eval.status();
    data.eval = std::make_unique<Dataset>(*std::move(eval));
  }
  return data;
}

// A batch of SFT examples: prompt tokens, then the reference answer and the stop token.
absl::StatusOr<v1::SftStepRequest> SftBatch(DatasetIterator& iterator, const Tokenizer& tokenizer,
                                            int64_t batch_size, int64_t stop_token) {
  v1::SftStepRequest request;
  for (int64_t i = 0; i < batch_size; ++i) {
    const Example& example = iterator.Next();
    if (!example.prompt.has_value() || !example.answer.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("sft: example at line ", example.line_number,
                                                     " needs a prompt and an answer"));
    }
    absl::StatusOr<std::vector<int32_t>> prompt = tokenizer.Encode(*example.prompt);
    if (!prompt.ok()) return prompt.status();
    absl::StatusOr<std::vector<int32_t>> answer = tokenizer.Encode(*example.answer);
    if (!answer.ok()) return answer.status();
    v1::SftExample* out = request.add_examples();
    for (int32_t id : *prompt) out->add_prompt_token_ids(id);
    for (int32_t id : *answer) out->add_completion_token_ids(id);
    if (stop_token >= 0) out->add_completion_token_ids(stop_token);
  }
  return request;
}

nlohmann::json EvalJson(const EvalResult& result) {
  return {{"accuracy", result.accuracy},       {"num_prompts", result.num_prompts},
          {"num_correct", result.num_correct}, {"num_failed", result.num_failed},
          {"reward_mean", result.reward_mean}, {"seconds", result.seconds}};
}

// Everything the job holds while it runs; the destructor stops the children.
class Job {
 public:
  Job(const JobConfig& config, const JobRunOptions& options)
      : config_(config), options_(options), paths_{RunDirectory(config)}, rewards_(config_) {
    if (!options.resume_dir.empty()) paths_.root = options.resume_dir;
  }

  absl::StatusOr<nlohmann::json> Run();

 private:
  absl::Status PrepareRunDirectory();
  absl::Status StartServices(const std::string& resume_checkpoint);
  absl::Status WarmStart(DatasetIterator& sft_iterator);
  absl::StatusOr<EvalResult> RunEval(const char* when);
  absl::Status Sync(int64_t version);
  absl::Status Checkpoint(const std::string& cursor);
  void Log(const std::string& line) { std::fprintf(stderr, "lockstep run: %s\n", line.c_str()); }

  const JobConfig config_;
  const JobRunOptions options_;
  RunPaths paths_;
  const bool resuming_ = !options_.resume_dir.empty();
  std::string auth_token_;
  std::unique_ptr<Tokenizer> tokenizer_;
  TaskData data_;
  ProcessSupervisor supervisor_;
  std::unique_ptr<TrainerClient> trainer_;
  std::vector<std::unique_ptr<GeneratorClient>> generator_clients_;
  std::vector<GeneratorClient*> generators_;
  JobRewards rewards_;  // reward servers, the environment, the weighted reward pipeline
  std::string model_dir_;
  v1::SamplingParams sampling_;
  int64_t stop_token_ = -1;
};

absl::Status Job::PrepareRunDirectory() {
  std::error_code error;
  if (!resuming_) {
    if (fs::exists(paths_.metrics()) || fs::exists(paths_.summary())) {
      return absl::AlreadyExistsError(
          absl::StrCat("run directory ", paths_.root.string(),
                       " already holds a run: choose another --name, or continue it with --resume ",
                       paths_.root.string()));
    }
    fs::create_directories(paths_.logs(), error);
    if (error) return absl::InternalError(absl::StrCat("cannot create ", paths_.logs().string()));
    if (absl::Status s = WriteResolvedConfig(config_, paths_.config().string()); !s.ok()) return s;
    auth_token_ = NewAuthToken();
    if (absl::Status s = WriteAuthTokenFile(paths_.token().string(), auth_token_); !s.ok()) {
      return s;
    }
  } else {
    absl::StatusOr<std::string> token = ReadAuthTokenFile(paths_.token().string());
    if (!token.ok()) return token.status();
    auth_token_ = *token;
  }
  // The model: a fresh preset written once into the run directory, or the given directory.
  std::string model_dir = config_.model.path;
  if (!config_.model.preset.empty()) {
    model_dir = paths_.model().string();
    if (!fs::exists(paths_.model() / "config.json")) {
      Log(absl::StrCat("creating a ", config_.model.preset, " model in ", model_dir));
      absl::Status s =
          RunToCompletion({options_.lockstep_binary, "init-model", "--preset", config_.model.preset,
                           "--out", model_dir, "--seed", std::to_string(config_.job.seed)},
                          paths_.logs() / "init_model.log");
      if (!s.ok()) return s;
    }
  }
  model_dir_ = model_dir;
  const std::string tokenizer_path =
      config_.tokenizer.path.empty() ? model_dir : config_.tokenizer.path;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  tokenizer_ = *std::move(tokenizer);
  nlohmann::json trainer_options = TrainerOptionsJson(config_, paths_.checkpoints().string());
  return WriteTextFile(paths_.trainer_options(), trainer_options.dump(2) + "\n");
}

absl::Status Job::StartServices(const std::string& resume_checkpoint) {
  const std::string token_file = paths_.token().string();
  if (config_.trainer.address.empty()) {
    std::vector<std::string> argv = {options_.lockstep_binary,
                                     "serve",
                                     "trainer",
                                     "--model",
                                     model_dir_,
                                     "--options",
                                     paths_.trainer_options().string(),
                                     "--threads",
                                     std::to_string(config_.trainer.threads),
                                     "--port",
                                     "0",
                                     "--auth-token-file",
                                     token_file};
    if (!resume_checkpoint.empty()) {
      argv.push_back("--resume");
      argv.push_back(resume_checkpoint);
    }
    absl::StatusOr<pid_t> pid =
        supervisor_.Start({"trainer", argv, {}, (paths_.logs() / "trainer.log").string()});
    if (!pid.ok()) return pid.status();
  }
  std::vector<std::string> generator_names;
  if (config_.generator.addresses.empty()) {
    for (int64_t g = 0; g < config_.generator.count; ++g) {
      const std::string name = absl::StrCat("generator", g);
      absl::StatusOr<pid_t> pid = supervisor_.Start(
          {name,
           {options_.lockstep_binary, "serve", "generator", "--model", model_dir_, "--mode",
            config_.model.mode, "--threads", std::to_string(config_.generator.threads),
            "--kv-bytes", std::to_string(config_.generator.kv_bytes), "--port", "0",
            "--auth-token-file", token_file},
           {},
           (paths_.logs() / (name + ".log")).string()});
      if (!pid.ok()) return pid.status();
      generator_names.push_back(name);
    }
  }
  if (absl::Status s = rewards_.Launch(supervisor_, options_.lockstep_binary, token_file,
                                       paths_.logs().string());
      !s.ok()) {
    return s;
  }
  // Wait for every child (they start in parallel).
  std::string trainer_address = config_.trainer.address;
  if (trainer_address.empty()) {
    absl::StatusOr<std::string> address = supervisor_.WaitUntilServing("trainer");
    if (!address.ok()) return address.status();
    trainer_address = *address;
  }
  trainer_ = std::make_unique<TrainerClient>(trainer_address, auth_token_);
  std::vector<std::string> generator_addresses = config_.generator.addresses;
  for (const std::string& name : generator_names) {
    absl::StatusOr<std::string> address = supervisor_.WaitUntilServing(name);
    if (!address.ok()) return address.status();
    generator_addresses.push_back(*address);
  }
  for (const std::string& address : generator_addresses) {
    generator_clients_.push_back(std::make_unique<GeneratorClient>(address, auth_token_));
    generators_.push_back(generator_clients_.back().get());
  }
  Log(absl::StrCat("trainer at ", trainer_address, ", ", generators_.size(), " generator(s) at ",
                   absl::StrJoin(generator_addresses, ", ")));
  if (absl::Status s = rewards_.Connect(supervisor_, auth_token_); !s.ok()) return s;
  if (rewards_.scorer() != nullptr) Log(absl::StrCat("reward: ", rewards_.scorer()->name()));
  if (rewards_.environment() != nullptr) {
    Log(absl::StrCat("environment at ", rewards_.environment_address(), ", up to ",
                     config_.environment.max_turns, " turn(s) per episode"));
  }
  // The weight-sync group {trainer rank 0, generators 1..N}.
  absl::StatusOr<int> store_port = PickFreePort();
  if (!store_port.ok()) return store_port.status();
  WeightSyncGroupOptions group;
  group.store_port = *store_port;
  group.group_name = absl::StrCat("sync-", NewAuthToken().substr(0, 8));
  group.timeout_ms = config_.weight_sync.timeout_ms;
  group.bucket_bytes = config_.weight_sync.bucket_mb << 20;
  group.verify = config_.weight_sync.verify;
  group.transport = config_.weight_sync.transport == "gloo" ? v1::WEIGHT_SYNC_TRANSPORT_GLOO
                    : config_.weight_sync.transport == "shm"
                        ? v1::WEIGHT_SYNC_TRANSPORT_SHARED_MEMORY
                        : v1::WEIGHT_SYNC_TRANSPORT_AUTO;
  absl::StatusOr<v1::JoinWeightSyncResponse> joined =
      FormWeightSyncGroup(*trainer_, generators_, group);
  if (!joined.ok()) return joined.status();
  Log(absl::StrCat("weight-sync group formed: ", joined->num_parameters(), " tensors, ",
                   joined->total_bytes() / 1e6, " MB in ", joined->num_buckets(), " bucket(s)"));
  return absl::OkStatus();
}

absl::Status Job::Sync(int64_t version) {
  absl::StatusOr<SyncFigures> figures =
      SyncWeights(*trainer_, generators_, version,
                  absl::Milliseconds(config_.weight_sync.timeout_ms) + absl::Seconds(10));
  return figures.status();
}

absl::Status Job::WarmStart(DatasetIterator& sft_iterator) {
  const absl::Time start = absl::Now();
  double loss = 0;
  int64_t version = 0;
  for (int64_t step = 0; step < config_.sft.steps; ++step) {
    if (StopRequested()) return absl::CancelledError("stopped by a signal during SFT");
    absl::StatusOr<v1::SftStepRequest> request =
        SftBatch(sft_iterator, *tokenizer_, config_.sft.batch_size, stop_token_);
    if (!request.ok()) return request.status();
    absl::StatusOr<v1::TrainStepResponse> response = trainer_->SftStep(*request);
    if (!response.ok()) return response.status();
    loss = response->metrics().loss();
    version = response->metrics().weight_version();
  }
  if (config_.sft.steps > 0) {
    if (absl::Status s = Sync(version); !s.ok()) return s;
    Log(absl::StrCat("SFT warm start: ", config_.sft.steps, " steps, final loss ", loss, ", ",
                     absl::ToDoubleSeconds(absl::Now() - start), " s"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalResult> Job::RunEval(const char* when) {
  // The held-out eval is single-turn: it has no meaning for a multi-turn job.
  if (data_.eval == nullptr || rewards_.scorer() == nullptr || config_.environment.enabled()) {
    return EvalResult{};
  }
  absl::StatusOr<EvalResult> result =
      Evaluate(*data_.eval, *tokenizer_, generators_, *rewards_.scorer(), sampling_);
  if (result.ok()) {
    Log(absl::StrCat("eval ", when, " RL: accuracy ", result->accuracy, " (", result->num_correct,
                     "/", result->num_prompts, "), ", result->seconds, " s"));
  }
  return result;
}

absl::Status Job::Checkpoint(const std::string& cursor) {
  absl::StatusOr<v1::SaveCheckpointResponse> saved = trainer_->SaveCheckpoint(cursor);
  if (!saved.ok()) return saved.status();
  Log(absl::StrCat("checkpoint: ", saved->path()));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Job::Run() {
  const absl::Time start = absl::Now();
  if (absl::Status s = PrepareRunDirectory(); !s.ok()) return s;
  absl::StatusOr<TaskData> data = LoadTaskData(config_);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  for (int64_t id : StopTokens(*tokenizer_)) sampling_.add_stop_token_ids(id);
  stop_token_ = sampling_.stop_token_ids_size() > 0 ? sampling_.stop_token_ids(0) : -1;
  sampling_.set_temperature(config_.generator.temperature);
  sampling_.set_top_p(config_.generator.top_p);
  sampling_.set_top_k(config_.generator.top_k);
  sampling_.set_max_tokens(config_.generator.max_tokens);

  std::string resume_checkpoint;
  if (resuming_) {
    if (!fs::exists(paths_.checkpoints())) {
      return absl::NotFoundError(
          absl::StrCat("--resume ", paths_.root.string(), ": no checkpoints/ to resume from"));
    }
    resume_checkpoint = paths_.checkpoints().string();
  }
  if (absl::Status s = StartServices(resume_checkpoint); !s.ok()) return s;

  absl::StatusOr<v1::TrainerStatusResponse> status = trainer_->GetStatus();
  if (!status.ok()) return status.status();
  const uint64_t seed = static_cast<uint64_t>(config_.job.seed);
  DatasetIterator rl_iterator(data_.train.get(), seed);
  int64_t rl_steps_done = 0;
  nlohmann::json eval_before;
  if (!status->data_cursor().empty()) {
    absl::StatusOr<std::pair<DatasetCursor, int64_t>> cursor =
        RlLoop::ParseDataCursor(status->data_cursor());
    if (!cursor.ok()) return cursor.status();
    absl::StatusOr<DatasetIterator> restored =
        DatasetIterator::Restore(data_.train.get(), cursor->first);
    if (!restored.ok()) return restored.status();
    rl_iterator = *std::move(restored);
    rl_steps_done = cursor->second;
    Log(absl::StrCat("resumed from ", status->resumed_from(), " after RL step ", rl_steps_done));
    if (absl::Status s = Sync(status->weight_version()); !s.ok()) return s;
    absl::StatusOr<std::string> text = ReadTextFile(paths_.eval_before());
    if (text.ok()) eval_before = nlohmann::json::parse(*text, nullptr, false);
  } else {
    DatasetIterator sft_iterator(data_.sft ? data_.sft.get() : data_.train.get(), seed ^ 0x5F7ull);
    if (absl::Status s = WarmStart(sft_iterator); !s.ok()) return s;
    absl::StatusOr<EvalResult> before = RunEval("before");
    if (!before.ok()) return before.status();
    eval_before = EvalJson(*before);
    if (absl::Status s = WriteTextFile(paths_.eval_before(), eval_before.dump(2) + "\n"); !s.ok()) {
      return s;
    }
  }

  RlLoopOptions loop_options;
  loop_options.steps = config_.job.steps;
  loop_options.prompts_per_step = config_.algorithm.prompts_per_step;
  loop_options.samples_per_prompt = config_.algorithm.samples_per_prompt;
  loop_options.max_staleness = config_.async.max_staleness;
  loop_options.sampling = sampling_;
  absl::StatusOr<trainer::AdvantageKind> kind =
      trainer::ParseAdvantageKind(config_.algorithm.advantage);
  if (!kind.ok()) return kind.status();
  loop_options.advantages.kind = *kind;
  loop_options.advantages.drop_zero_variance_groups = config_.algorithm.drop_zero_variance_groups;
  loop_options.parity = config_.parity.mode;
  loop_options.checkpoint_every = config_.checkpointing.every;
  loop_options.seed = seed;
  loop_options.sync_timeout =
      absl::Milliseconds(config_.weight_sync.timeout_ms) + absl::Seconds(10);
  loop_options.investigate_hint =
      absl::StrCat("lockstep diagnose --model ", model_dir_, " (run: ", paths_.root.string(), ")");
  std::unique_ptr<EnvironmentRollouts> episodes;
  if (rewards_.environment() != nullptr) {
    EnvironmentRolloutOptions episode_options;
    episode_options.samples_per_prompt = config_.algorithm.samples_per_prompt;
    episode_options.max_turns = static_cast<int>(config_.environment.max_turns);
    episode_options.max_sequence_length = config_.trainer.max_sequence_length;
    episode_options.sampling = sampling_;
    episode_options.generate_timeout = loop_options.generate_timeout;
    episode_options.num_threads = static_cast<int>(std::min<int64_t>(
        64, config_.algorithm.prompts_per_step * config_.algorithm.samples_per_prompt));
    episodes = std::make_unique<EnvironmentRollouts>(rewards_.environment(), tokenizer_.get(),
                                                     episode_options);
  }
  // Declared after `episodes`: the loop goes first, waiting for its callbacks.
  RlLoop loop(loop_options,
              {trainer_.get(), generators_, rewards_.scorer(), tokenizer_.get(), episodes.get()},
              data_.train.get(), std::move(rl_iterator), rl_steps_done);

  std::ofstream metrics(paths_.metrics(), std::ios::app);
  const absl::Time rl_start = absl::Now();
  absl::Status run = loop.Run(
      [&](const nlohmann::json& record) {
        metrics << record.dump() << "\n";
        metrics.flush();
        if (config_.logging.progress) {
          const int64_t done = record["step"].get<int64_t>();
          const double per_step =
              absl::ToDoubleSeconds(absl::Now() - rl_start) / (done - rl_steps_done);
          std::fprintf(stderr,
                       "\rstep %lld/%lld  reward %.3f  acc %.3f  parity %lld/%lld  gen %.0f tok/s"
                       "  train %.0f tok/s  ETA %.0fs   ",
                       static_cast<long long>(done), static_cast<long long>(config_.job.steps),
                       record["reward_mean"].get<double>(), record["accuracy"].get<double>(),
                       static_cast<long long>(record["parity"]["tokens_mismatched"].get<int64_t>()),
                       static_cast<long long>(record["parity"]["tokens_compared"].get<int64_t>()),
                       record["gen_tokens_per_s"].get<double>(),
                       record["train_tokens_per_s"].get<double>(),
                       per_step * (config_.job.steps - done));
          if (done == config_.job.steps) std::fprintf(stderr, "\n");
        }
      },
      [&](int64_t, const std::string& cursor) { return Checkpoint(cursor); }, StopRequested);
  if (absl::IsCancelled(run)) {
    std::fprintf(stderr, "\n");
    Log("stopping: writing a checkpoint first");
    if (absl::Status s = Checkpoint(loop.DataCursor()); !s.ok()) return s;
    return run;
  }
  if (!run.ok()) return run;
  if (absl::Status s = Checkpoint(loop.DataCursor()); !s.ok()) return s;
  absl::StatusOr<EvalResult> after = RunEval("after");
  if (!after.ok()) return after.status();

  const RlTotals& totals = loop.totals();
  nlohmann::json summary;
  summary["name"] = config_.job.name;
  summary["accuracy_before"] = eval_before.value("accuracy", 0.0);
  summary["accuracy_after"] = after->accuracy;
  summary["eval_before"] = eval_before;
  summary["eval_after"] = EvalJson(*after);
  summary["parity_tokens_compared"] = totals.parity_tokens_compared;
  summary["parity_tokens_mismatched"] = totals.parity_tokens_mismatched;
  summary["parity_max_abs_diff"] = totals.parity_max_abs_diff;
  summary["rl_steps"] = loop.steps_done();
  summary["rl_steps_this_run"] = totals.steps;
  summary["samples_trained"] = totals.samples_trained;
  summary["reward_items_sent"] = totals.reward_items_sent;
  summary["reward_items_scored"] = totals.reward_items_scored;
  summary["reward_items_failed"] = totals.reward_items_failed;
  summary["model_tokens_trained"] = totals.model_tokens_trained;
  summary["environment_tokens_trained"] = totals.environment_tokens_trained;
  summary["rewards"] = rewards_.SummaryJson();
  if (episodes != nullptr) {
    const EnvironmentTotals e = episodes->totals();
    summary["episodes"] = {{"episodes", e.episodes},
                           {"failed", e.episodes_failed},
                           {"truncated", e.episodes_truncated},
                           {"turns", e.turns}};
  }
  nlohmann::json ages = nlohmann::json::object();
  for (const auto& [age, count] : totals.ages) ages[std::to_string(age)] = count;
  summary["staleness"] = ages;
  summary["max_staleness"] = config_.async.max_staleness;
  summary["resumed"] = resuming_;
  summary["wall_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  if (absl::Status s = WriteTextFile(paths_.summary(), summary.dump(2) + "\n"); !s.ok()) return s;
  supervisor_.StopAll();

  std::printf("\n  %-28s %s\n", "run", paths_.root.c_str());
  if (config_.environment.enabled()) {
    const nlohmann::json& episodes = summary["episodes"];
    std::printf("  %-28s %lld (%lld failed, %lld turns)\n", "episodes",
                static_cast<long long>(episodes["episodes"].get<int64_t>()),
                static_cast<long long>(episodes["failed"].get<int64_t>()),
                static_cast<long long>(episodes["turns"].get<int64_t>()));
  } else {
    std::printf("  %-28s %.3f\n", "held-out accuracy before RL",
                summary["accuracy_before"].get<double>());
    std::printf("  %-28s %.3f\n", "held-out accuracy after RL", after->accuracy);
  }
  std::printf("  %-28s %lld of %lld\n", "reward items failed",
              static_cast<long long>(totals.reward_items_failed),
              static_cast<long long>(totals.reward_items_sent));
  std::printf("  %-28s %lld\n", "parity tokens compared",
              static_cast<long long>(totals.parity_tokens_compared));
  std::printf("  %-28s %lld\n", "parity tokens mismatched",
              static_cast<long long>(totals.parity_tokens_mismatched));
  std::printf("  %-28s %.1f s\n", "wall time", summary["wall_s"].get<double>());
  return summary;
}

}  // namespace

std::string RunDirectory(const JobConfig& config) {
  return (fs::path(config.job.output_root) / config.job.name).string();
}

absl::StatusOr<nlohmann::json> RunJob(const JobConfig& config, const JobRunOptions& options) {
  Job job(config, options);
  return job.Run();
}

}  // namespace lockstep::orchestrator
