// Value ranges, referenced files and impossible combinations of a JobConfig.
#include "orchestrator/config_validate.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rewards/reward_registry.h"
#include "sandbox/executor.h"

namespace lockstep::orchestrator {
namespace {

// Validation builds the built-in reward to check its options, but reaches no sandbox service
// (it may not be up yet): code_tests with a sandbox address gets an executor never called, and
// does not probe the in-process sandbox it will not use.
class UncalledSandbox final : public sandbox::Executor {
 public:
  absl::StatusOr<sandbox::ExecResult> Execute(const sandbox::ExecRequest&) override {
    return absl::FailedPreconditionError("config validation runs no program");
  }
};

rewards::BuiltinContext ValidationContext(const RewardsSection& rewards) {
  rewards::BuiltinContext context;
  context.sandbox_address = rewards.sandbox_address;
  context.connect_sandbox =
      [](const std::string&) -> absl::StatusOr<std::shared_ptr<sandbox::Executor>> {
    return std::make_shared<UncalledSandbox>();
  };
  return context;
}

// Collects "WHERE: [section] key: message" lines.
class Problems {
 public:
  explicit Problems(const KeyLocator& where) : where_(where) {}

  // `dotted_key` is "section.key"; the message follows "[section] key: ".
  void Add(const std::string& dotted_key, const std::string& message) {
    size_t dot = dotted_key.rfind('.');
    std::string section = dotted_key.substr(0, dot);
    std::string key = dotted_key.substr(dot + 1);
    messages_.push_back(absl::StrCat(where_(dotted_key), ": [", section, "] ", key, ": ", message));
  }

  void Positive(const std::string& key, double value) {
    if (!(value > 0)) Add(key, absl::StrCat("must be > 0, got ", value));
  }
  void NonNegative(const std::string& key, double value) {
    if (!(value >= 0)) Add(key, absl::StrCat("must be >= 0, got ", value));
  }
  void AtLeast(const std::string& key, int64_t value, int64_t minimum) {
    if (value < minimum) Add(key, absl::StrCat("must be >= ", minimum, ", got ", value));
  }
  void OneOf(const std::string& key, const std::string& value,
             const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    Add(key, absl::StrCat("must be one of \"", absl::StrJoin(allowed, "\", \""), "\", got \"",
                          value, "\""));
  }
  void ExistingFile(const std::string& key, const std::string& path, bool directory = false) {
    if (path.empty()) return;
    struct stat info;
    if (stat(path.c_str(), &info) != 0) {
      Add(key, absl::StrCat(directory ? "directory" : "file", " not found: ", path));
    } else if (directory && !S_ISDIR(info.st_mode)) {
      Add(key, absl::StrCat("not a directory: ", path));
    } else if (!directory && S_ISDIR(info.st_mode)) {
      Add(key, absl::StrCat("is a directory, expected a file: ", path));
    }
  }

  const KeyLocator& where() const { return where_; }
  std::vector<std::string> Take() { return std::move(messages_); }

 private:
  const KeyLocator& where_;
  std::vector<std::string> messages_;
};

void CheckModelAndData(const JobConfig& c, Problems& p) {
  if (c.job.name.empty() || c.job.name.find('/') != std::string::npos || c.job.name == "." ||
      c.job.name == "..") {
    p.Add("job.name", absl::StrCat("must be a plain directory name, got \"", c.job.name, "\""));
  }
  p.AtLeast("job.steps", c.job.steps, 1);
  if (c.job.output_root.empty()) p.Add("job.output_root", "must not be empty");

  if (c.model.preset.empty() == c.model.path.empty()) {
    p.Add("model.preset", "give exactly one of [model] preset and [model] path");
  }
  p.ExistingFile("model.path", c.model.path, /*directory=*/true);
  p.OneOf("model.mode", c.model.mode, {"batch_invariant", "fast"});
  p.OneOf("model.arch", c.model.arch, {"qwen3", "llama", "qwen3_moe"});
  p.OneOf("tokenizer.chat_template", c.tokenizer.chat_template,
          {"auto", "qwen3", "llama3", "none"});
  p.ExistingFile("tokenizer.path", c.tokenizer.path);

  if (c.data.task.empty() == c.data.train_file.empty()) {
    p.Add("data.task", "give exactly one of [data] task and [data] train_file");
  }
  if (!c.data.task.empty()) p.OneOf("data.task", c.data.task, {"arithmetic", "arithmetic_code"});
  p.ExistingFile("data.train_file", c.data.train_file);
  p.ExistingFile("data.eval_file", c.data.eval_file);
  p.AtLeast("data.eval_size", c.data.eval_size, 0);
  p.AtLeast("data.max_operand", c.data.max_operand, 1);
  if (!(c.data.teacher_carry_error >= 0 && c.data.teacher_carry_error <= 1)) {
    p.Add("data.teacher_carry_error", "must be in [0, 1]");
  }
  p.AtLeast("data.teacher_draws", c.data.teacher_draws, 1);
  if (c.data.prompt_field.empty()) p.Add("data.prompt_field", "must not be empty");
  if (c.data.answer_field.empty()) p.Add("data.answer_field", "must not be empty");

  p.AtLeast("sft.steps", c.sft.steps, 0);
  p.AtLeast("sft.batch_size", c.sft.batch_size, 1);
  p.Positive("sft.lr", c.sft.lr);
}

void CheckServices(const JobConfig& c, Problems& p) {
  const GeneratorSection& g = c.generator;
  p.AtLeast("generator.count", g.count, 0);
  if (g.count == 0 && g.addresses.empty()) {
    p.Add("generator.count", "0 generators and no [generator] addresses: nothing would generate");
  }
  if (!g.addresses.empty() && g.count != static_cast<int64_t>(g.addresses.size())) {
    p.Add("generator.count",
          absl::StrCat(g.count, " does not match the ", g.addresses.size(),
                       " [generator] addresses (leave count out when giving addresses)"));
  }
  p.Positive("generator.kv_bytes", static_cast<double>(g.kv_bytes));
  p.AtLeast("generator.threads", g.threads, 1);
  p.Positive("generator.temperature", g.temperature);
  if (!(g.top_p > 0 && g.top_p <= 1)) {
    p.Add("generator.top_p", absl::StrCat("must be in (0, 1], got ", g.top_p));
  }
  p.AtLeast("generator.top_k", g.top_k, 0);
  p.AtLeast("generator.max_tokens", g.max_tokens, 1);
  p.AtLeast("generator.max_restarts", g.max_restarts, 0);

  const TrainerSection& t = c.trainer;
  p.Positive("trainer.lr", t.lr);
  p.AtLeast("trainer.max_restarts", t.max_restarts, 0);
  if (t.betas.size() != 2 ||
      !std::all_of(t.betas.begin(), t.betas.end(), [](double b) { return b >= 0 && b < 1; })) {
    p.Add("trainer.betas", "must be two numbers in [0, 1), e.g. [0.9, 0.999]");
  }
  p.Positive("trainer.eps", t.eps);
  p.NonNegative("trainer.weight_decay", t.weight_decay);
  p.NonNegative("trainer.grad_clip", t.grad_clip);
  p.AtLeast("trainer.warmup_steps", t.warmup_steps, 0);
  p.OneOf("trainer.schedule", t.schedule, {"constant", "cosine"});
  if (t.schedule == "cosine" && c.job.steps <= t.warmup_steps) {
    p.Add(
        "trainer.warmup_steps",
        absl::StrCat(t.warmup_steps,
                     " leaves no decay for the cosine schedule over [job] steps = ", c.job.steps));
  }
  if (!(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1)) {
    p.Add("trainer.min_lr_ratio", absl::StrCat("must be in [0, 1], got ", t.min_lr_ratio));
  }
  p.AtLeast("trainer.micro_batch_tokens", t.micro_batch_tokens, 1);
  p.AtLeast("trainer.max_sequence_length", t.max_sequence_length, 2);
  p.AtLeast("trainer.threads", t.threads, 1);
  if (g.max_tokens >= t.max_sequence_length) {
    p.Add("generator.max_tokens", absl::StrCat(g.max_tokens,
                                               " leaves no room for the prompt within [trainer] "
                                               "max_sequence_length = ",
                                               t.max_sequence_length));
  }
}

void CheckAlgorithm(const JobConfig& c, Problems& p) {
  const AlgorithmSection& a = c.algorithm;
  p.OneOf("algorithm.advantage", a.advantage, {"grpo", "dr_grpo", "rloo"});
  p.OneOf("algorithm.loss", a.loss, {"grpo", "gspo"});
  if (!(a.clip_eps_low >= 0 && a.clip_eps_low < 1)) {
    p.Add("algorithm.clip_eps_low", absl::StrCat("must be in [0, 1), got ", a.clip_eps_low));
  }
  p.NonNegative("algorithm.clip_eps_high", a.clip_eps_high);
  p.Positive("algorithm.log_ratio_clamp", a.log_ratio_clamp);
  p.OneOf("algorithm.aggregation", a.aggregation,
          {"token_mean", "seq_mean_token_mean", "constant"});
  p.Positive("algorithm.constant_normalizer", a.constant_normalizer);
  p.NonNegative("algorithm.kl_coef", a.kl_coef);
  p.NonNegative("algorithm.moe_aux_loss_coef", a.moe_aux_loss_coef);
  p.NonNegative("algorithm.moe_z_loss_coef", a.moe_z_loss_coef);
  p.NonNegative("algorithm.tis_cap", a.tis_cap);
  p.AtLeast("algorithm.samples_per_prompt", a.samples_per_prompt, 1);
  if (IsGroupAdvantage(a.advantage) && a.samples_per_prompt < 2) {
    p.Add("algorithm.samples_per_prompt",
          absl::StrCat("must be >= 2 with the group advantage \"", a.advantage,
                       "\" (a group of one has no baseline), got ", a.samples_per_prompt));
  }
  p.AtLeast("algorithm.prompts_per_step", a.prompts_per_step, 1);

  p.AtLeast("async.max_staleness", c.async.max_staleness, 0);
  p.OneOf("parity.mode", c.parity.mode, {"strict", "report", "off"});
  if (c.parity.mode == "strict" && c.model.mode != "batch_invariant") {
    p.Add("parity.mode",
          absl::StrCat("\"strict\" needs [model] mode = \"batch_invariant\" (bit-identical "
                       "log-probs), but mode is \"",
                       c.model.mode, "\" (", p.where()("model.mode"),
                       "); use parity.mode = \"report\""));
  }
  p.AtLeast("parity.max_records", c.parity.max_records, 0);
  p.AtLeast("parity.max_record_steps", c.parity.max_record_steps, 0);
  p.AtLeast("checkpointing.every", c.checkpointing.every, 0);
  p.AtLeast("checkpointing.keep_last", c.checkpointing.keep_last, 0);
  p.OneOf("logging.level", c.logging.level, {"debug", "info", "warning", "error"});
  p.OneOf("weight_sync.transport", c.weight_sync.transport,
          {"auto", "gloo", "shm", "nccl", "cuda_ipc"});
  p.AtLeast("weight_sync.bucket_mb", c.weight_sync.bucket_mb, 1);
  p.AtLeast("weight_sync.timeout_ms", c.weight_sync.timeout_ms, 1);
}

void CheckRewards(const JobConfig& c, Problems& p) {
  const RewardsSection& r = c.rewards;
  if (r.builtin.empty() && r.servers.empty() && !c.environment.enabled()) {
    p.Add("rewards.builtin",
          "no reward: name a built-in, add [[rewards.servers]] or an "
          "[environment]");
  }
  if (!r.builtin.empty()) {
    absl::StatusOr<std::unique_ptr<rewards::Reward>> reward =
        rewards::CreateBuiltinReward(r.builtin, r.options, ValidationContext(r));
    if (!reward.ok()) p.Add("rewards.builtin", std::string(reward.status().message()));
  }
  if (!std::isfinite(r.weight)) p.Add("rewards.weight", "must be finite");
  p.AtLeast("rewards.max_restarts", r.max_restarts, 0);
  std::set<std::string> names;
  for (size_t i = 0; i < r.servers.size(); ++i) {
    const RewardServerConfig& s = r.servers[i];
    std::string prefix = absl::StrCat("rewards.servers[", i, "].");
    if (s.command.empty() == s.address.empty()) {
      p.Add(prefix + "command", "give exactly one of command and address");
    }
    if (!names.insert(s.name).second) {
      p.Add(prefix + "name", absl::StrCat("\"", s.name, "\" is used by another server"));
    }
    p.AtLeast(prefix + "deadline_ms", s.deadline_ms, 1);
    p.AtLeast(prefix + "max_attempts", s.max_attempts, 1);
    p.AtLeast(prefix + "max_concurrency", s.max_concurrency, 1);
    if (!std::isfinite(s.weight)) p.Add(prefix + "weight", "must be finite");
  }
  const EnvironmentSection& e = c.environment;
  if (!e.command.empty() && !e.address.empty()) {
    p.Add("environment.command", "give at most one of command and address");
  }
  p.AtLeast("environment.max_turns", e.max_turns, 1);
  p.AtLeast("environment.deadline_ms", e.deadline_ms, 1);
}

}  // namespace

bool IsGroupAdvantage(const std::string& advantage) {
  return advantage == "grpo" || advantage == "dr_grpo" || advantage == "rloo";
}

std::vector<std::string> CheckJobConfig(const JobConfig& config, const KeyLocator& where) {
  Problems problems(where);
  CheckModelAndData(config, problems);
  CheckServices(config, problems);
  CheckAlgorithm(config, problems);
  CheckRewards(config, problems);
  return problems.Take();
}

}  // namespace lockstep::orchestrator
