#include "orchestrator/config_schema.h"

#include <string_view>

namespace lockstep::orchestrator {
namespace {

// One key of a plain section: JobSections groups these into SectionFields.
struct SchemaRow {
  const char* section;
  const char* key;
  FieldRef field;
};

}  // namespace

std::vector<SectionFields> JobSections(JobConfig& c) {
  // One row per key: section, key, field. A section's rows stand together.
  const SchemaRow rows[] = {
      {"job", "name", &c.job.name},
      {"job", "seed", &c.job.seed},
      {"job", "steps", &c.job.steps},
      {"job", "output_root", &c.job.output_root},
      {"model", "preset", &c.model.preset},
      {"model", "arch", &c.model.arch},
      {"model", "path", &c.model.path},
      {"model", "mode", &c.model.mode},
      {"tokenizer", "path", &c.tokenizer.path},
      {"tokenizer", "chat_template", &c.tokenizer.chat_template},
      {"tokenizer", "enable_thinking", &c.tokenizer.enable_thinking},
      {"data", "task", &c.data.task},
      {"data", "train_file", &c.data.train_file},
      {"data", "eval_file", &c.data.eval_file},
      {"data", "eval_size", &c.data.eval_size},
      {"data", "max_operand", &c.data.max_operand},
      {"data", "teacher_carry_error", &c.data.teacher_carry_error},
      {"data", "teacher_draws", &c.data.teacher_draws},
      {"data", "prompt_field", &c.data.prompt_field},
      {"data", "answer_field", &c.data.answer_field},
      {"data", "apply_chat_template", &c.data.apply_chat_template},
      {"sft", "steps", &c.sft.steps},
      {"sft", "batch_size", &c.sft.batch_size},
      {"sft", "lr", &c.sft.lr},
      {"generator", "count", &c.generator.count},
      {"generator", "addresses", &c.generator.addresses},
      {"generator", "kv_bytes", &c.generator.kv_bytes},
      {"generator", "threads", &c.generator.threads},
      {"generator", "temperature", &c.generator.temperature},
      {"generator", "top_p", &c.generator.top_p},
      {"generator", "top_k", &c.generator.top_k},
      {"generator", "max_tokens", &c.generator.max_tokens},
      {"generator", "max_restarts", &c.generator.max_restarts},
      {"trainer", "address", &c.trainer.address},
      {"trainer", "max_restarts", &c.trainer.max_restarts},
      {"trainer", "lr", &c.trainer.lr},
      {"trainer", "betas", &c.trainer.betas},
      {"trainer", "eps", &c.trainer.eps},
      {"trainer", "weight_decay", &c.trainer.weight_decay},
      {"trainer", "grad_clip", &c.trainer.grad_clip},
      {"trainer", "warmup_steps", &c.trainer.warmup_steps},
      {"trainer", "schedule", &c.trainer.schedule},
      {"trainer", "min_lr_ratio", &c.trainer.min_lr_ratio},
      {"trainer", "micro_batch_tokens", &c.trainer.micro_batch_tokens},
      {"trainer", "max_sequence_length", &c.trainer.max_sequence_length},
      {"trainer", "threads", &c.trainer.threads},
      {"algorithm", "advantage", &c.algorithm.advantage},
      {"algorithm", "loss", &c.algorithm.loss},
      {"algorithm", "clip_eps_low", &c.algorithm.clip_eps_low},
      {"algorithm", "clip_eps_high", &c.algorithm.clip_eps_high},
      {"algorithm", "log_ratio_clamp", &c.algorithm.log_ratio_clamp},
      {"algorithm", "aggregation", &c.algorithm.aggregation},
      {"algorithm", "constant_normalizer", &c.algorithm.constant_normalizer},
      {"algorithm", "drop_zero_variance_groups", &c.algorithm.drop_zero_variance_groups},
      {"algorithm", "kl_coef", &c.algorithm.kl_coef},
      {"algorithm", "tis_cap", &c.algorithm.tis_cap},
      {"algorithm", "moe_aux_loss_coef", &c.algorithm.moe_aux_loss_coef},
      {"algorithm", "moe_z_loss_coef", &c.algorithm.moe_z_loss_coef},
      {"algorithm", "samples_per_prompt", &c.algorithm.samples_per_prompt},
      {"algorithm", "prompts_per_step", &c.algorithm.prompts_per_step},
      {"rewards", "builtin", &c.rewards.builtin},
      {"rewards", "options", &c.rewards.options},
      {"rewards", "weight", &c.rewards.weight},
      {"rewards", "sandbox_address", &c.rewards.sandbox_address},
      {"rewards", "max_restarts", &c.rewards.max_restarts},
      {"environment", "command", &c.environment.command},
      {"environment", "address", &c.environment.address},
      {"environment", "max_turns", &c.environment.max_turns},
      {"environment", "deadline_ms", &c.environment.deadline_ms},
      {"async", "max_staleness", &c.async.max_staleness},
      {"parity", "mode", &c.parity.mode},
      {"parity", "max_records", &c.parity.max_records},
      {"parity", "max_record_steps", &c.parity.max_record_steps},
      {"checkpointing", "every", &c.checkpointing.every},
      {"checkpointing", "keep_last", &c.checkpointing.keep_last},
      {"logging", "progress", &c.logging.progress},
      {"logging", "level", &c.logging.level},
      {"weight_sync", "bucket_mb", &c.weight_sync.bucket_mb},
      {"weight_sync", "timeout_ms", &c.weight_sync.timeout_ms},
      {"weight_sync", "verify", &c.weight_sync.verify},
      {"weight_sync", "transport", &c.weight_sync.transport},
  };
  std::vector<SectionFields> sections;
  for (const SchemaRow& row : rows) {
    if (sections.empty() || std::string_view(sections.back().name) != row.section) {
      sections.push_back({row.section, {}});
    }
    sections.back().keys.push_back({row.key, row.field});
  }
  return sections;
}

std::vector<KeyField> RewardServerFields(RewardServerConfig& s) {
  return {{"name", &s.name},
          {"command", &s.command},
          {"address", &s.address},
          {"deadline_ms", &s.deadline_ms},
          {"max_attempts", &s.max_attempts},
          {"max_concurrency", &s.max_concurrency},
          {"weight", &s.weight}};
}

const std::map<std::string, std::vector<std::string>>& KnownKeys() {
  static const auto* known = [] {
    auto* names = new std::map<std::string, std::vector<std::string>>;
    JobConfig config;
    for (const SectionFields& section : JobSections(config)) {
      std::vector<std::string>& keys = (*names)[section.name];
      for (const KeyField& key : section.keys) keys.push_back(key.name);
    }
    (*names)["rewards"].push_back("servers");
    RewardServerConfig server;
    for (const KeyField& key : RewardServerFields(server)) {
      (*names)["rewards.servers"].push_back(key.name);
    }
    return names;
  }();
  return *known;
}

}  // namespace lockstep::orchestrator
