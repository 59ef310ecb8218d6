// The job config of `lockstep run`: a TOML recipe (configs/*.toml) read into a typed JobConfig.
//
// Every key has a default, so a recipe states only what matters. Loading checks everything
// before anything starts: unknown keys (named, with the closest known key suggested), wrong
// types, missing files and impossible combinations fail with "FILE:LINE: [section] key: ...".
// `--set section.key=value` overrides are applied on top of the file (the value is parsed as
// TOML; a bare word that is not TOML is taken as a string).
//
//   absl::StatusOr<JobConfig> config = LoadJobConfig("configs/demo.toml", {"job.steps=20"});
//   WriteResolvedConfig(*config, "runs/demo/config.toml");
//
// Plain data and free functions: thread-compatible, no shared state.
#ifndef LOCKSTEP_ORCHESTRATOR_CONFIG_H_
#define LOCKSTEP_ORCHESTRATOR_CONFIG_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::orchestrator {

// [job]
struct JobSection {
  std::string name = "job";  // the run directory is <output_root>/<name>
  int64_t seed = 0;
  int64_t steps = 100;  // RL optimizer steps
  std::string output_root = "runs";
};

// [model]: exactly one of `preset` (a built-in tiny model created fresh) and `path` (a
// Hugging Face style directory: config.json + *.safetensors). Both services load the weights
// into float32 whatever their storage dtype (bf16/fp16 widen exactly), so the trainer and the
// generators compute on the same numbers; there is no compute-dtype key.
struct ModelSection {
  std::string preset;
  std::string arch = "qwen3";  // the preset's architecture: "qwen3" | "llama" | "qwen3_moe"
  std::string path;
  std::string mode = "batch_invariant";  // "batch_invariant" | "fast"
};

// [tokenizer]: `path` to a tokenizer.json; empty = the model directory's own tokenizer, or the
// byte-level tokenizer for a preset. The chat template and stop tokens come from the tokenizer's
// directory (task_data.h ResolvePromptFormat).
struct TokenizerSection {
  std::string path;
  // "auto" (recognised from tokenizer_config.json; an unknown template is an error) | "qwen3" |
  // "llama3" | "none" (no markup).
  std::string chat_template = "auto";
  bool enable_thinking = true;  // Qwen3: false opens the reply with an empty <think></think>
};

// [data]: a built-in `task` ("arithmetic", "arithmetic_code") or JSONL files (one per line).
struct DataSection {
  std::string task;         // "arithmetic", "arithmetic_code" or empty
  std::string train_file;   // JSONL; required when task is empty
  std::string eval_file;    // JSONL; optional (empty: held-out examples of the task)
  int64_t eval_size = 200;  // held-out prompts scored before and after RL
  int64_t max_operand = 9;  // arithmetic task: operands in [0, max_operand]
  // arithmetic task, SFT set only: the teacher drops the carry in this share of a carry
  // problem's teacher_draws answers (data/arithmetic_task.h). RL and eval use the true sums.
  double teacher_carry_error = 0.0;
  int64_t teacher_draws = 1;
  // Where each JSONL row keeps its prompt and answer: a key or a dotted path (data/example.h).
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  // Plain-string prompts are sent as one user message through the chat template (none: raw).
  bool apply_chat_template = true;
};

// [sft]: supervised warm start before RL; steps = 0 turns it off.
struct SftSection {
  int64_t steps = 0;
  int64_t batch_size = 32;
  double lr = 1e-3;
};

// [generator]
struct GeneratorSection {
  int64_t count = 1;                   // generators started as child processes
  std::vector<std::string> addresses;  // "host:port" of running generators (used instead)
  int64_t kv_bytes = 64ll << 20;       // KV cache pool per generator
  int64_t threads = 1;                 // intra-op threads per generator
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;        // 0 = off
  int64_t max_tokens = 64;  // completion tokens per sample
  // Restarts of each started generator after it dies (a clean stop after a checkpoint once
  // spent); 0 = a dead generator stops the job.
  int64_t max_restarts = 3;
};

// [trainer]: optimizer and batching options (sent to the trainer as JSON, see
// TrainerOptionsJson). `address` connects to a running trainer instead of starting one.
struct TrainerSection {
  std::string address;
  // Restarts of a started trainer that dies: from its last checkpoint, the job rolled back to it
  // (the steps after it run again, to the same bits); 0 = a dead trainer stops the job.
  int64_t max_restarts = 3;
  double lr = 1e-5;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // global norm; 0 = off
  int64_t warmup_steps = 0;
  std::string schedule = "constant";  // "constant" | "cosine" (decays over job.steps)
  double min_lr_ratio = 0.0;          // floor of the decayed schedule, as a fraction of lr
  int64_t micro_batch_tokens = 4096;
  int64_t max_sequence_length = 2048;
  int64_t threads = 1;  // intra-op threads of the trainer
};

// [algorithm]
struct AlgorithmSection {
  std::string advantage = "grpo";  // "grpo" | "dr_grpo" | "rloo"
  std::string loss = "grpo";       // "grpo" (token ratio, clipped) | "gspo" (sequence)
  double clip_eps_low = 0.2;
  double clip_eps_high = 0.2;  // > clip_eps_low = DAPO clip-higher
  double log_ratio_clamp = 20.0;
  std::string aggregation = "token_mean";  // "token_mean" | "seq_mean_token_mean" | "constant"
  double constant_normalizer = 1.0;        // for aggregation "constant" (e.g. max_tokens)
  bool drop_zero_variance_groups = true;
  double kl_coef = 0.0;  // k3 penalty to the initial model; 0 = off
  double tis_cap = 0.0;  // truncated importance sampling cap; 0 = off
  double moe_aux_loss_coef = 0.0;  // MoE load-balancing loss; 0 = off
  double moe_z_loss_coef = 0.0;    // MoE router z-loss; 0 = off
  int64_t samples_per_prompt = 8;
  int64_t prompts_per_step = 8;
};

// One remote reward server ([[rewards.servers]]): exactly one of `command` (argv of a server
// the orchestrator starts; it gets --port and --auth-token-file appended) and `address`.
struct RewardServerConfig {
  std::string name;  // used in logs and metrics; default "server<i>"
  std::vector<std::string> command;
  std::string address;
  int64_t deadline_ms = 10000;
  int64_t max_attempts = 3;
  int64_t max_concurrency = 16;
  double weight = 1.0;
};

// [rewards]: an in-process built-in (rewards/reward_registry.h names) and/or remote servers.
// The reward of a sample is the weighted sum.
struct RewardsSection {
  std::string builtin = "math";                       // empty = none
  nlohmann::json options = nlohmann::json::object();  // the built-in's options
  double weight = 1.0;                                // the built-in's weight
  std::vector<RewardServerConfig> servers;
  // Restarts of each reward or environment server the job started (from a `command`) after it
  // dies; its items that still fail after the client's retries are counted failed.
  int64_t max_restarts = 3;
  // A running `lockstep serve sandbox` ("host:port") that code_tests runs programs on, called
  // with the job's token; "" = the in-process sandbox.
  std::string sandbox_address;
};

// [environment]: optional multi-turn environment server (lockstep.v1.Environment); enabled
// when `command` or `address` is set.
struct EnvironmentSection {
  std::vector<std::string> command;
  std::string address;
  int64_t max_turns = 1;
  int64_t deadline_ms = 10000;
  bool enabled() const { return !command.empty() || !address.empty(); }
};

// [async]
struct AsyncSection {
  int64_t max_staleness = 0;  // a sample from version v trains at step t only if t - v <= this
};

// [parity]
struct ParitySection {
  std::string mode = "strict";  // "strict" (stop on first mismatch) | "report" | "off"
  // Rollouts with a mismatched token recorded per step under runs/<name>/mismatches/ for
  // `lockstep diagnose` (0 = none), and how many steps record (each saves a weights copy).
  int64_t max_records = 4;
  int64_t max_record_steps = 3;
};

// [checkpointing]
struct CheckpointingSection {
  int64_t every = 0;      // steps between checkpoints; 0 = only at the end (and on Ctrl-C)
  int64_t keep_last = 3;  // checkpoints kept; 0 = all
};

// [logging]
struct LoggingSection {
  bool progress = true;        // live console progress line on stderr
  std::string level = "info";  // "debug" | "info" | "warning" | "error"
};

// [weight_sync]
struct WeightSyncSection {
  int64_t bucket_mb = 64;
  int64_t timeout_ms = 60000;
  bool verify = true;  // compare a checksum of the received weights on every generator
  // "auto" (shared memory on one host, else Gloo; GPU transports for weights on CUDA) | "gloo" |
  // "shm" | "nccl" | "cuda_ipc" (the last two need the services' weights on CUDA)
  std::string transport = "auto";
};

struct JobConfig {
  JobSection job;
  ModelSection model;
  TokenizerSection tokenizer;
  DataSection data;
  SftSection sft;
  GeneratorSection generator;
  TrainerSection trainer;
  AlgorithmSection algorithm;
  RewardsSection rewards;
  EnvironmentSection environment;
  AsyncSection async;
  ParitySection parity;
  CheckpointingSection checkpointing;
  LoggingSection logging;
  WeightSyncSection weight_sync;

  // Where the config came from (a path, or "<string>"); for messages only.
  std::string source;
  // The keys ("section.key") the recipe or a --set override gave; the others hold defaults
  // (which the model's generation_config.json may replace: task_data.h).
  std::set<std::string> given_keys;
};

// Reads `path`, applies `overrides` ("section.key=value", in order) and validates the result.
// NotFound for a missing file; InvalidArgument "FILE:LINE: [section] key: problem" for a
// syntax error, unknown key, wrong type, bad value, missing referenced file or impossible
// combination (an override's location reads "--set section.key=value").
absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const std::vector<std::string>& overrides = {});

// As LoadJobConfig, from TOML text; `source_name` stands in for the path in messages.
absl::StatusOr<JobConfig> ParseJobConfig(const std::string& toml_text,
                                         const std::string& source_name,
                                         const std::vector<std::string>& overrides = {});

// The combination and file checks alone (LoadJobConfig runs them); for configs built in code.
absl::Status ValidateJobConfig(const JobConfig& config);

// The fully resolved config (every key, defaults included) as TOML text that ParseJobConfig
// reads back to an equal JobConfig.
std::string ResolvedConfigToml(const JobConfig& config);

// Writes ResolvedConfigToml to `path` (write to a temporary file, then rename).
absl::Status WriteResolvedConfig(const JobConfig& config, const std::string& path);

// The trainer's JSON options (trainer/trainer_options.h names): mode, lr, betas, eps,
// weight_decay, grad_clip, warmup_steps, total_steps, schedule, min_lr_ratio,
// micro_batch_tokens, max_sequence_length, loss, clip_eps_low, clip_eps_high, log_ratio_clamp,
// aggregation, constant_normalizer, tis_cap, kl_coef, temperature, checkpoint_dir, keep_last,
// seed. `checkpoint_dir` is the run's checkpoints/ folder.
nlohmann::json TrainerOptionsJson(const JobConfig& config, const std::string& checkpoint_dir = "");

// Whether `advantage` compares samples within a prompt's group (all built-ins do).
bool IsGroupAdvantage(const std::string& advantage);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_CONFIG_H_
