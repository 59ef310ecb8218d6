#include "orchestrator/generator_recovery.h"

#include "absl/strings/cord.h"

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

}  // namespace lockstep::orchestrator
