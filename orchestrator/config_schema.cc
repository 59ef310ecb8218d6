#include "orchestrator/config_schema.h"

namespace lockstep::orchestrator {

std::vector<SectionFields> JobSections(JobConfig& c) {
  return {
      {"job",
       {{"name", &c.job.name},
        {"seed", &c.job.seed},
        {"steps", &c.job.steps},
        {"output_root", &c.job.output_root}}},
      {"model", {{"preset", &c.model.preset}, {"path", &c.model.path}, {"mode", &c.model.mode}}},
      {"tokenizer",
       {{"path", &c.tokenizer.path},
        {"chat_template", &c.tokenizer.chat_template},
        {"enable_thinking", &c.tokenizer.enable_thinking}}},
      {"data",
       {{"task", &c.data.task},
        {"train_file", &c.data.train_file},
        {"eval_file", &c.data.eval_file},
        {"eval_size", &c.data.eval_size},
        {"max_operand", &c.data.max_operand},
        {"teacher_carry_error", &c.data.teacher_carry_error},
        {"teacher_draws", &c.data.teacher_draws},
        {"prompt_field", &c.data.prompt_field},
        {"answer_field", &c.data.answer_field},
        {"apply_chat_template", &c.data.apply_chat_template}}},
      {"sft", {{"steps", &c.sft.steps}, {"batch_size", &c.sft.batch_size}, {"lr", &c.sft.lr}}},
      {"generator",
       {{"count", &c.generator.count},
        {"addresses", &c.generator.addresses},
        {"kv_bytes", &c.generator.kv_bytes},
        {"threads", &c.generator.threads},
        {"temperature", &c.generator.temperature},
        {"top_p", &c.generator.top_p},
        {"top_k", &c.generator.top_k},
        {"max_tokens", &c.generator.max_tokens},
        {"max_restarts", &c.generator.max_restarts}}},
      {"trainer",
       {{"address", &c.trainer.address},
        {"max_restarts", &c.trainer.max_restarts},
        {"lr", &c.trainer.lr},
        {"betas", &c.trainer.betas},
        {"eps", &c.trainer.eps},
        {"weight_decay", &c.trainer.weight_decay},
        {"grad_clip", &c.trainer.grad_clip},
        {"warmup_steps", &c.trainer.warmup_steps},
        {"schedule", &c.trainer.schedule},
        {"min_lr_ratio", &c.trainer.min_lr_ratio},
        {"micro_batch_tokens", &c.trainer.micro_batch_tokens},
        {"max_sequence_length", &c.trainer.max_sequence_length},
        {"threads", &c.trainer.threads}}},
      {"algorithm",
       {{"advantage", &c.algorithm.advantage},
        {"loss", &c.algorithm.loss},
        {"clip_eps_low", &c.algorithm.clip_eps_low},
        {"clip_eps_high", &c.algorithm.clip_eps_high},
        {"log_ratio_clamp", &c.algorithm.log_ratio_clamp},
        {"aggregation", &c.algorithm.aggregation},
        {"constant_normalizer", &c.algorithm.constant_normalizer},
        {"drop_zero_variance_groups", &c.algorithm.drop_zero_variance_groups},
        {"kl_coef", &c.algorithm.kl_coef},
        {"tis_cap", &c.algorithm.tis_cap},
        {"samples_per_prompt", &c.algorithm.samples_per_prompt},
        {"prompts_per_step", &c.algorithm.prompts_per_step}}},
      {"rewards",
       {{"builtin", &c.rewards.builtin},
        {"options", &c.rewards.options},
        {"weight", &c.rewards.weight},
        {"sandbox_address", &c.rewards.sandbox_address},
        {"max_restarts", &c.rewards.max_restarts}}},
      {"environment",
       {{"command", &c.environment.command},
        {"address", &c.environment.address},
        {"max_turns", &c.environment.max_turns},
        {"deadline_ms", &c.environment.deadline_ms}}},
      {"async", {{"max_staleness", &c.async.max_staleness}}},
      {"parity",
       {{"mode", &c.parity.mode},
        {"max_records", &c.parity.max_records},
        {"max_record_steps", &c.parity.max_record_steps}}},
      {"checkpointing",
       {{"every", &c.checkpointing.every}, {"keep_last", &c.checkpointing.keep_last}}},
      {"logging", {{"progress", &c.logging.progress}, {"level", &c.logging.level}}},
      {"weight_sync",
       {{"bucket_mb", &c.weight_sync.bucket_mb},
        {"timeout_ms", &c.weight_sync.timeout_ms},
        {"verify", &c.weight_sync.verify},
        {"transport", &c.weight_sync.transport}}},
  };
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
