// Writing a JobConfig back out: the resolved TOML of a run, and the trainer's JSON options.
#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "orchestrator/config.h"

namespace lockstep::orchestrator {
namespace {

toml::array StringArray(const std::vector<std::string>& values) {
  toml::array array;
  for (const std::string& value : values) array.push_back(value);
  return array;
}

// JSON options → TOML (nulls have no TOML form and are left out).
void InsertJson(toml::table* table, const std::string& key, const nlohmann::json& value);

toml::array JsonArray(const nlohmann::json& value) {
  toml::array array;
  for (const nlohmann::json& element : value) {
    if (element.is_object()) {
      toml::table table;
      for (const auto& [key, item] : element.items()) InsertJson(&table, key, item);
      array.push_back(std::move(table));
    } else if (element.is_array()) {
      array.push_back(JsonArray(element));
    } else if (element.is_string()) {
      array.push_back(element.get<std::string>());
    } else if (element.is_boolean()) {
      array.push_back(element.get<bool>());
    } else if (element.is_number_integer()) {
      array.push_back(element.get<int64_t>());
    } else if (element.is_number()) {
      array.push_back(element.get<double>());
    }
  }
  return array;
}

void InsertJson(toml::table* table, const std::string& key, const nlohmann::json& value) {
  if (value.is_object()) {
    toml::table child;
    for (const auto& [child_key, item] : value.items()) InsertJson(&child, child_key, item);
    table->insert(key, std::move(child));
  } else if (value.is_array()) {
    table->insert(key, JsonArray(value));
  } else if (value.is_string()) {
    table->insert(key, value.get<std::string>());
  } else if (value.is_boolean()) {
    table->insert(key, value.get<bool>());
  } else if (value.is_number_integer()) {
    table->insert(key, value.get<int64_t>());
  } else if (value.is_number()) {
    table->insert(key, value.get<double>());
  }
}

toml::table ToToml(const JobConfig& c) {
  toml::table rewards{{"builtin", c.rewards.builtin},
                      {"weight", c.rewards.weight},
                      {"sandbox_address", c.rewards.sandbox_address},
                      {"max_restarts", c.rewards.max_restarts}};
  toml::table options;
  for (const auto& [key, item] : c.rewards.options.items()) InsertJson(&options, key, item);
  rewards.insert("options", std::move(options));
  toml::array servers;
  for (const RewardServerConfig& s : c.rewards.servers) {
    servers.push_back(toml::table{{"name", s.name},
                                  {"command", StringArray(s.command)},
                                  {"address", s.address},
                                  {"deadline_ms", s.deadline_ms},
                                  {"max_attempts", s.max_attempts},
                                  {"max_concurrency", s.max_concurrency},
                                  {"weight", s.weight}});
  }
  rewards.insert("servers", std::move(servers));

  toml::array betas;
  for (double beta : c.trainer.betas) betas.push_back(beta);

  return toml::table{
      {"job", toml::table{{"name", c.job.name},
                          {"seed", c.job.seed},
                          {"steps", c.job.steps},
                          {"output_root", c.job.output_root}}},
      {"model", toml::table{{"preset", c.model.preset},
                            {"path", c.model.path},
                            {"mode", c.model.mode}}},
      {"tokenizer", toml::table{{"path", c.tokenizer.path},
                                {"chat_template", c.tokenizer.chat_template},
                                {"enable_thinking", c.tokenizer.enable_thinking}}},
      {"data", toml::table{{"task", c.data.task},
                           {"train_file", c.data.train_file},
                           {"eval_file", c.data.eval_file},
                           {"eval_size", c.data.eval_size},
                           {"max_operand", c.data.max_operand},
                           {"teacher_carry_error", c.data.teacher_carry_error},
                           {"teacher_draws", c.data.teacher_draws},
                           {"prompt_field", c.data.prompt_field},
                           {"answer_field", c.data.answer_field},
                           {"apply_chat_template", c.data.apply_chat_template}}},
      {"sft",
       toml::table{{"steps", c.sft.steps}, {"batch_size", c.sft.batch_size}, {"lr", c.sft.lr}}},
      {"generator", toml::table{{"count", c.generator.count},
                                {"addresses", StringArray(c.generator.addresses)},
                                {"kv_bytes", c.generator.kv_bytes},
                                {"threads", c.generator.threads},
                                {"temperature", c.generator.temperature},
                                {"top_p", c.generator.top_p},
                                {"top_k", c.generator.top_k},
                                {"max_tokens", c.generator.max_tokens},
                                {"max_restarts", c.generator.max_restarts}}},
      {"trainer", toml::table{{"address", c.trainer.address},
                              {"max_restarts", c.trainer.max_restarts},
                              {"lr", c.trainer.lr},
                              {"betas", std::move(betas)},
                              {"eps", c.trainer.eps},
                              {"weight_decay", c.trainer.weight_decay},
                              {"grad_clip", c.trainer.grad_clip},
                              {"warmup_steps", c.trainer.warmup_steps},
                              {"schedule", c.trainer.schedule},
                              {"min_lr_ratio", c.trainer.min_lr_ratio},
                              {"micro_batch_tokens", c.trainer.micro_batch_tokens},
                              {"max_sequence_length", c.trainer.max_sequence_length},
                              {"threads", c.trainer.threads}}},
      {"algorithm",
       toml::table{{"advantage", c.algorithm.advantage},
                   {"loss", c.algorithm.loss},
                   {"clip_eps_low", c.algorithm.clip_eps_low},
                   {"clip_eps_high", c.algorithm.clip_eps_high},
                   {"log_ratio_clamp", c.algorithm.log_ratio_clamp},
                   {"aggregation", c.algorithm.aggregation},
                   {"constant_normalizer", c.algorithm.constant_normalizer},
                   {"drop_zero_variance_groups", c.algorithm.drop_zero_variance_groups},
                   {"kl_coef", c.algorithm.kl_coef},
                   {"tis_cap", c.algorithm.tis_cap},
                   {"samples_per_prompt", c.algorithm.samples_per_prompt},
                   {"prompts_per_step", c.algorithm.prompts_per_step}}},
      {"rewards", std::move(rewards)},
      {"environment", toml::table{{"command", StringArray(c.environment.command)},
                                  {"address", c.environment.address},
                                  {"max_turns", c.environment.max_turns},
                                  {"deadline_ms", c.environment.deadline_ms}}},
      {"async", toml::table{{"max_staleness", c.async.max_staleness}}},
      {"parity", toml::table{{"mode", c.parity.mode},
                             {"max_records", c.parity.max_records},
                             {"max_record_steps", c.parity.max_record_steps}}},
      {"checkpointing",
       toml::table{{"every", c.checkpointing.every}, {"keep_last", c.checkpointing.keep_last}}},
      {"logging", toml::table{{"progress", c.logging.progress}, {"level", c.logging.level}}},
      {"weight_sync", toml::table{{"bucket_mb", c.weight_sync.bucket_mb},
                                  {"timeout_ms", c.weight_sync.timeout_ms},
                                  {"verify", c.weight_sync.verify},
                                  {"transport", c.weight_sync.transport}}},
  };
}

}  // namespace

std::string ResolvedConfigToml(const JobConfig& config) {
  std::ostringstream text;
  text << "# Resolved job config written by lockstep (every key, defaults included).\n";
  if (!config.source.empty()) text << "# Source: " << config.source << "\n";
  text << "\n" << ToToml(config) << "\n";
  return text.str();
}

absl::Status WriteResolvedConfig(const JobConfig& config, const std::string& path) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", temporary));
    file << ResolvedConfigToml(config);
    file.flush();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

nlohmann::json TrainerOptionsJson(const JobConfig& config, const std::string& checkpoint_dir) {
  const TrainerSection& t = config.trainer;
  const AlgorithmSection& a = config.algorithm;
  return nlohmann::json{
      {"mode", config.model.mode},
      {"lr", t.lr},
      {"sft_lr", config.sft.lr},  // SftStep's own constant rate
      {"betas", t.betas},
      {"eps", t.eps},
      {"weight_decay", t.weight_decay},
      {"grad_clip", t.grad_clip},
      {"warmup_steps", t.warmup_steps},
      {"total_steps", config.job.steps},
      {"schedule", t.schedule},
      {"min_lr_ratio", t.min_lr_ratio},
      {"micro_batch_tokens", t.micro_batch_tokens},
      {"max_sequence_length", t.max_sequence_length},
      {"loss", a.loss},
      {"clip_eps_low", a.clip_eps_low},
      {"clip_eps_high", a.clip_eps_high},
      {"log_ratio_clamp", a.log_ratio_clamp},
      {"aggregation", a.aggregation},
      {"constant_normalizer", a.constant_normalizer},
      {"tis_cap", a.tis_cap},
      {"kl_coef", a.kl_coef},
      {"temperature", config.generator.temperature},
      {"checkpoint_dir", checkpoint_dir},
      {"keep_last", config.checkpointing.keep_last},
      {"seed", config.job.seed},
  };
}

}  // namespace lockstep::orchestrator
