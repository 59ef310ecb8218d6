#include "orchestrator/generator_recovery.h"

#include "absl/strings/cord.h"
#include "absl/time/clock.h"

namespace lockstep::orchestrator {
namespace {

constexpr char kBudgetSpentPayload[] = "lockstep.restart_budget_spent";

}  // namespace

absl::Status RestartBudgetSpentError(const std::string& message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kBudgetSpentPayload, absl::Cord("1"));
  return status;
}

bool IsRestartBudgetSpent(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kBudgetSpentPayload).has_value();
}

absl::Status GeneratorRecovery::RestartGenerators(const std::vector<GeneratorDeath>& dead,
                                                 int64_t weight_version) {
  if (absl::Status s = StartRestarts(dead); !s.ok()) return s;
  while (num_restarting() > 0) {
    absl::StatusOr<std::vector<GeneratorDeath>> back = PollRestarts(weight_version);
    if (!back.ok()) return back.status();
    if (num_restarting() > 0) absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::orchestrator
