// Writing a JobConfig back out: the resolved TOML of a run, and the trainer's JSON options.
#include <toml++/toml.h>

#include <cmath>
#include <sstream>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "orchestrator/config.h"
#include "orchestrator/config_schema.h"

namespace lockstep::orchestrator {
namespace {

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

// One key's value as TOML, into `table`.
void InsertField(toml::table* table, const char* name, const FieldRef& field) {
  std::visit(
      [&](const auto* value) {
        using T = std::decay_t<decltype(*value)>;
        if constexpr (std::is_same_v<T, nlohmann::json>) {
          toml::table options;
          for (const auto& [key, item] : value->items()) InsertJson(&options, key, item);
          table->insert(name, std::move(options));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                             std::is_same_v<T, std::vector<double>>) {
          toml::array array;
          for (const auto& element : *value) array.push_back(element);
          table->insert(name, std::move(array));
        } else {
          table->insert(name, *value);
        }
      },
      field);
}

toml::table ToToml(const JobConfig& config) {
  JobConfig c = config;  // the schema's fields are pointers into a mutable config
  toml::table root;
  for (const SectionFields& section : JobSections(c)) {
    toml::table table;
    for (const KeyField& key : section.keys) InsertField(&table, key.name, key.field);
    root.insert(section.name, std::move(table));
  }
  toml::array servers;
  for (RewardServerConfig& server : c.rewards.servers) {
    toml::table table;
    for (const KeyField& key : RewardServerFields(server)) InsertField(&table, key.name, key.field);
    servers.push_back(std::move(table));
  }
  root["rewards"].as_table()->insert("servers", std::move(servers));
  return root;
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
  return WriteFileAtomically(path, ResolvedConfigToml(config));
}

nlohmann::json TrainerOptionsJson(const JobConfig& config, const std::string& checkpoint_dir) {
  // One row per option: its name, the config key it comes from.
  return nlohmann::json{
      {"mode", config.model.mode},
      {"lr", config.trainer.lr},
      {"sft_lr", config.sft.lr},  // SftStep's own constant rate
      {"betas", config.trainer.betas},
      {"eps", config.trainer.eps},
      {"weight_decay", config.trainer.weight_decay},
      {"grad_clip", config.trainer.grad_clip},
      {"warmup_steps", config.trainer.warmup_steps},
      {"total_steps", config.job.steps},
      {"schedule", config.trainer.schedule},
      {"min_lr_ratio", config.trainer.min_lr_ratio},
      {"micro_batch_tokens", config.trainer.micro_batch_tokens},
      {"max_sequence_length", config.trainer.max_sequence_length},
      {"loss", config.algorithm.loss},
      {"clip_eps_low", config.algorithm.clip_eps_low},
      {"clip_eps_high", config.algorithm.clip_eps_high},
      {"log_ratio_clamp", config.algorithm.log_ratio_clamp},
      {"aggregation", config.algorithm.aggregation},
      {"constant_normalizer", config.algorithm.constant_normalizer},
      {"tis_cap", config.algorithm.tis_cap},
      {"kl_coef", config.algorithm.kl_coef},
      {"moe_aux_loss_coef", config.algorithm.moe_aux_loss_coef},
      {"moe_z_loss_coef", config.algorithm.moe_z_loss_coef},
      {"temperature", config.generator.temperature},
      {"checkpoint_dir", checkpoint_dir},
      {"keep_last", config.checkpointing.keep_last},
      {"seed", config.job.seed},
  };
}

}  // namespace lockstep::orchestrator
