#include "orchestrator/job_summary.h"

namespace lockstep::orchestrator {

void SetTotals(const RlTotals& totals, JobSummary& summary) {
  summary.parity_tokens_compared = totals.parity_tokens_compared;
  summary.parity_tokens_mismatched = totals.parity_tokens_mismatched;
  summary.parity_max_abs_diff = totals.parity_max_abs_diff;
  summary.samples_trained = totals.samples_trained;
  summary.reward_items_sent = totals.reward_items_sent;
  summary.reward_items_scored = totals.reward_items_scored;
  summary.reward_items_failed = totals.reward_items_failed;
  summary.model_tokens_trained = totals.model_tokens_trained;
  summary.environment_tokens_trained = totals.environment_tokens_trained;
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
  } else {
    std::fprintf(out, "  %-28s %.3f\n", "held-out accuracy before RL", summary.accuracy_before);
    std::fprintf(out, "  %-28s %.3f\n", "held-out accuracy after RL", summary.accuracy_after);
  }
  std::fprintf(out, "  %-28s %lld of %lld\n", "reward items failed",
               static_cast<long long>(summary.reward_items_failed),
               static_cast<long long>(summary.reward_items_sent));
  std::fprintf(out, "  %-28s %lld\n", "parity tokens compared",
               static_cast<long long>(summary.parity_tokens_compared));
  std::fprintf(out, "  %-28s %lld\n", "parity tokens mismatched",
               static_cast<long long>(summary.parity_tokens_mismatched));
  std::fprintf(out, "  %-28s %.1f s\n", "wall time", summary.wall_s);
}

}  // namespace lockstep::orchestrator
