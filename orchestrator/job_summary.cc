#include "orchestrator/job_summary.h"

#include "absl/strings/str_cat.h"

namespace lockstep::orchestrator {

std::string EvalResult::accuracy_text() const {
  char text[64];
  std::snprintf(text, sizeof(text), "%.3f (%lld/%lld)", accuracy,
                static_cast<long long>(num_correct), static_cast<long long>(num_prompts));
  return text;
}

void SetTotals(const RlTotals& totals, JobSummary& summary) {
  static_cast<SummaryTotals&>(summary) = totals;  // what both derive from, and only that
  summary.staleness.counts = totals.ages;
}

std::string SummaryText(const JobSummary& summary) {
  nlohmann::json json = summary;
  DropNullMembers(json);
  return json.dump(2) + "\n";
}

void PrintSummaryTable(const JobSummary& summary, const std::string& run_dir, FILE* out) {
  std::fprintf(out, "\n  %-28s %s\n", "run", run_dir.c_str());
  if (summary.runs > 1) {
    std::fprintf(out, "  %-28s %lld\n", "runs (first + resumes)",
                 static_cast<long long>(summary.runs));
  }
  if (summary.episodes.has_value()) {
    std::fprintf(out, "  %-28s %lld (%lld failed, %lld turns)\n", "episodes",
                 static_cast<long long>(summary.episodes->episodes),
                 static_cast<long long>(summary.episodes->failed),
                 static_cast<long long>(summary.episodes->turns));
  } else if (!summary.held_out_eval) {
    std::fprintf(out, "  %-28s %s\n", "held-out accuracy", "no eval (no eval set, or eval_size 0)");
  } else {
    // After a resume the "before" is the first run's; each figure says which run measured it.
    const std::string before_label =
        summary.eval_before_run == 0
            ? std::string("not measured")
            : absl::StrCat(summary.eval_before.accuracy_text(), " (run ", summary.eval_before_run,
                           ", before step 1)");
    std::fprintf(out, "  %-28s %s\n", "held-out accuracy before RL", before_label.c_str());
    const std::string after_label =
        absl::StrCat(summary.eval_after.accuracy_text(), " (run ", summary.runs, ", after step ",
                     summary.rl_steps, ")");
    std::fprintf(out, "  %-28s %s\n", "held-out accuracy after RL", after_label.c_str());
  }
  std::fprintf(out, "  %-28s %lld of %lld\n", "reward items failed",
               static_cast<long long>(summary.reward_items_failed),
               static_cast<long long>(summary.reward_items_sent));
  // Code rewards (reward_pipeline.h): the programs run and how each run ended, eval included.
  const nlohmann::json components = summary.rewards.value("reward_components", nlohmann::json());
  for (const auto& [name, component] : components.items()) {
    if (!component.is_object() || !component.contains("sandbox_executions")) continue;
    std::string verdicts;
    for (const auto& [verdict, count] : component["sandbox_verdicts"].items()) {
      if (count.get<int64_t>() == 0) continue;
      absl::StrAppend(&verdicts, verdicts.empty() ? "" : ", ", verdict, " ", count.get<int64_t>());
    }
    std::fprintf(out, "  %-28s %lld (%s)\n", "sandbox executions",
                 static_cast<long long>(component["sandbox_executions"].get<int64_t>()),
                 verdicts.c_str());
  }
  std::fprintf(out, "  %-28s %lld\n", "parity tokens compared",
               static_cast<long long>(summary.parity_tokens_compared));
  std::fprintf(out, "  %-28s %lld\n", "parity tokens mismatched",
               static_cast<long long>(summary.parity_tokens_mismatched));
  if (summary.routing_tokens_compared.has_value()) {
    std::fprintf(out, "  %-28s %lld of %lld\n", "routing tokens disagreeing",
                 static_cast<long long>(summary.routing_tokens_disagreeing.value_or(0)),
                 static_cast<long long>(*summary.routing_tokens_compared));
  }
  if (summary.restarts_total > 0) {
    std::string services;
    for (const auto& [name, count] : summary.restarts) {
      services += absl::StrCat(services.empty() ? "" : ", ", name, " ", count);
    }
    std::fprintf(out, "  %-28s %lld (%s)\n", "service restarts",
                 static_cast<long long>(summary.restarts_total), services.c_str());
  }
  if (summary.trainer_rollbacks.has_value()) {
    const RollbackCounts& r = *summary.trainer_rollbacks;
    std::fprintf(out, "  %-28s %lld (%lld steps, %lld rollouts discarded)\n", "trainer rollbacks",
                 static_cast<long long>(r.rollbacks), static_cast<long long>(r.steps_discarded),
                 static_cast<long long>(r.rollouts_discarded));
  }
  std::fprintf(out, "  %-28s %.1f s\n", "wall time", summary.wall_s);
}

}  // namespace lockstep::orchestrator
