#include "trainer/trainer_options.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::trainer {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("trainer options: ", field, " ", why));
}

template <typename E>
absl::StatusOr<E> ParseName(const std::string& key, const std::string& value,
                            std::initializer_list<std::pair<const char*, E>> names) {
  std::string known;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    absl::StrAppend(&known, known.empty() ? "" : ", ", name);
  }
  return Invalid(key, absl::StrCat("'", value, "' is not one of: ", known));
}

const std::set<std::string>& SectionNames() {
  static const std::set<std::string> names = {"model", "optimizer", "lr_schedule",
                                              "loss",  "batching",  "checkpoint"};
  return names;
}

// Applies one key. `path` is the key as written (with its section) for messages.
absl::Status ApplyKey(TrainerOptions& o, const std::string& key, const json& value,
                      const std::string& path) {
  try {
    if (key == "mode") {
      absl::StatusOr<NumericMode> mode = ParseNumericMode(value.get<std::string>());
      if (!mode.ok()) return Invalid(path, mode.status().message());
      o.mode = *mode;
    } else if (key == "max_sequence_length") {
      o.max_sequence_length = value.get<int64_t>();
    } else if (key == "temperature") {
      o.temperature = value.get<double>();
    } else if (key == "lr") {
      o.lr = value.get<double>();
    } else if (key == "sft_lr") {
      o.sft_lr = value.get<double>();
    } else if (key == "betas") {
      if (!value.is_array() || value.size() != 2) return Invalid(path, "must be [beta1, beta2]");
      o.beta1 = value[0].get<double>();
      o.beta2 = value[1].get<double>();
    } else if (key == "eps") {
      o.eps = value.get<double>();
    } else if (key == "weight_decay") {
      o.weight_decay = value.get<double>();
    } else if (key == "grad_clip") {
      o.grad_clip = value.get<double>();
    } else if (key == "schedule") {
      absl::StatusOr<ScheduleKind> kind = ParseName<ScheduleKind>(
          path, value.get<std::string>(),
          {{"cosine", ScheduleKind::kCosine}, {"constant", ScheduleKind::kConstant}});
      if (!kind.ok()) return kind.status();
      o.schedule = *kind;
    } else if (key == "warmup_steps") {
      o.warmup_steps = value.get<int64_t>();
    } else if (key == "total_steps") {
      o.total_steps = value.get<int64_t>();
    } else if (key == "min_lr_ratio") {
      o.min_lr_ratio = value.get<double>();
    } else if (key == "loss") {
      absl::StatusOr<LossKind> kind = ParseName<LossKind>(
          path, value.get<std::string>(), {{"grpo", LossKind::kGrpo}, {"gspo", LossKind::kGspo}});
      if (!kind.ok()) return kind.status();
      o.loss = *kind;
    } else if (key == "clip_eps_low") {
      o.clip_eps_low = value.get<double>();
    } else if (key == "clip_eps_high") {
      o.clip_eps_high = value.get<double>();
    } else if (key == "log_ratio_clamp") {
      o.log_ratio_clamp = value.get<double>();
    } else if (key == "aggregation") {
      absl::StatusOr<Aggregation> a =
          ParseName<Aggregation>(path, value.get<std::string>(),
                                 {{"token_mean", Aggregation::kTokenMean},
                                  {"seq_mean_token_mean", Aggregation::kSeqMeanTokenMean},
                                  {"constant", Aggregation::kConstant}});
      if (!a.ok()) return a.status();
      o.aggregation = *a;
    } else if (key == "constant_normalizer") {
      o.constant_normalizer = value.get<double>();
    } else if (key == "tis_cap") {
      o.tis_cap = value.get<double>();
    } else if (key == "kl_coef") {
      o.kl_coef = value.get<double>();
    } else if (key == "moe_aux_loss_coef") {
      o.moe_aux_loss_coef = value.get<double>();
    } else if (key == "moe_z_loss_coef") {
      o.moe_z_loss_coef = value.get<double>();
    } else if (key == "micro_batch_tokens") {
      o.micro_batch_tokens = value.get<int64_t>();
    } else if (key == "checkpoint_dir") {
      o.checkpoint_dir = value.get<std::string>();
    } else if (key == "keep_last") {
      o.keep_last = value.get<int64_t>();
    } else if (key == "tokenizer_dir") {
      o.tokenizer_dir = value.get<std::string>();
    } else if (key == "seed") {
      o.seed = value.get<uint64_t>();
    } else {
      return Invalid(absl::StrCat("key '", path, "'"), "is not known");
    }
  } catch (const json::exception& e) {
    return Invalid(path, absl::StrCat("has the wrong type (", e.what(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainerOptions::Validate() const {
  if (max_sequence_length < 0) return Invalid("max_sequence_length", "must be >= 0");
  if (!(temperature > 0) || !std::isfinite(temperature)) {
    return Invalid("temperature", "must be finite and > 0");
  }
  if (!(lr >= 0) || !std::isfinite(lr)) return Invalid("lr", "must be finite and >= 0");
  if (!(sft_lr >= 0) || !std::isfinite(sft_lr)) {
    return Invalid("sft_lr", "must be finite and >= 0 (0 = the schedule)");
  }
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
    return Invalid("betas", "must be in [0, 1)");
  }
  if (!(eps > 0)) return Invalid("eps", "must be > 0");
  if (!(weight_decay >= 0)) return Invalid("weight_decay", "must be >= 0");
  if (!(grad_clip >= 0)) return Invalid("grad_clip", "must be >= 0 (0 = off)");
  if (warmup_steps < 0) return Invalid("warmup_steps", "must be >= 0");
  if (schedule == ScheduleKind::kCosine && total_steps <= warmup_steps) {
    return Invalid("total_steps", "must exceed warmup_steps for the cosine schedule");
  }
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1))
    return Invalid("min_lr_ratio", "must be in [0, 1]");
  if (!(clip_eps_low >= 0 && clip_eps_low < 1)) return Invalid("clip_eps_low", "must be in [0, 1)");
  if (!(clip_eps_high >= 0)) return Invalid("clip_eps_high", "must be >= 0");
  if (!(log_ratio_clamp > 0)) return Invalid("log_ratio_clamp", "must be > 0");
  if (!(constant_normalizer > 0)) return Invalid("constant_normalizer", "must be > 0");
  if (!(tis_cap >= 0)) return Invalid("tis_cap", "must be >= 0 (0 = off)");
  if (!(kl_coef >= 0)) return Invalid("kl_coef", "must be >= 0 (0 = off)");
  if (!(moe_aux_loss_coef >= 0)) return Invalid("moe_aux_loss_coef", "must be >= 0 (0 = off)");
  if (!(moe_z_loss_coef >= 0)) return Invalid("moe_z_loss_coef", "must be >= 0 (0 = off)");
  if (micro_batch_tokens <= 0) return Invalid("micro_batch_tokens", "must be > 0");
  if (keep_last < 0) return Invalid("keep_last", "must be >= 0 (0 = keep all)");
  return absl::OkStatus();
}

absl::StatusOr<TrainerOptions> TrainerOptionsFromJson(absl::string_view json_text) {
  json document = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (document.is_discarded()) return Invalid("JSON", "is not valid JSON");
  if (!document.is_object()) return Invalid("JSON", "must be an object");
  TrainerOptions options;
  for (const auto& [key, value] : document.items()) {
    if (SectionNames().count(key) && value.is_object()) {
      for (const auto& [inner, inner_value] : value.items()) {
        absl::Status s = ApplyKey(options, inner, inner_value, absl::StrCat(key, ".", inner));
        if (!s.ok()) return s;
      }
      continue;
    }
    absl::Status s = ApplyKey(options, key, value, key);
    if (!s.ok()) return s;
  }
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return options;
}

std::string TrainerOptionsToJson(const TrainerOptions& o) {
  json j;
  j["mode"] = NumericModeName(o.mode);
  j["max_sequence_length"] = o.max_sequence_length;
  j["temperature"] = o.temperature;
  j["lr"] = o.lr;
  j["sft_lr"] = o.sft_lr;
  j["betas"] = {o.beta1, o.beta2};
  j["eps"] = o.eps;
  j["weight_decay"] = o.weight_decay;
  j["grad_clip"] = o.grad_clip;
  j["schedule"] = std::string(ScheduleKindName(o.schedule));
  j["warmup_steps"] = o.warmup_steps;
  j["total_steps"] = o.total_steps;
  j["min_lr_ratio"] = o.min_lr_ratio;
  j["loss"] = std::string(LossKindName(o.loss));
  j["clip_eps_low"] = o.clip_eps_low;
  j["clip_eps_high"] = o.clip_eps_high;
  j["log_ratio_clamp"] = o.log_ratio_clamp;
  j["aggregation"] = std::string(AggregationName(o.aggregation));
  j["constant_normalizer"] = o.constant_normalizer;
  j["tis_cap"] = o.tis_cap;
  j["kl_coef"] = o.kl_coef;
  j["moe_aux_loss_coef"] = o.moe_aux_loss_coef;
  j["moe_z_loss_coef"] = o.moe_z_loss_coef;
  j["micro_batch_tokens"] = o.micro_batch_tokens;
  j["checkpoint_dir"] = o.checkpoint_dir;
  j["keep_last"] = o.keep_last;
  j["tokenizer_dir"] = o.tokenizer_dir;
  j["seed"] = o.seed;
  return j.dump(2);
}

absl::string_view LossKindName(LossKind kind) { return kind == LossKind::kGrpo ? "grpo" : "gspo"; }

absl::string_view AggregationName(Aggregation aggregation) {
  switch (aggregation) {
    case Aggregation::kTokenMean:
      return "token_mean";
    case Aggregation::kSeqMeanTokenMean:
      return "seq_mean_token_mean";
    case Aggregation::kConstant:
      return "constant";
  }
  return "unknown";
}

absl::string_view ScheduleKindName(ScheduleKind kind) {
  return kind == ScheduleKind::kCosine ? "cosine" : "constant";
}

}  // namespace lockstep::trainer
