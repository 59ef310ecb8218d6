#include "orchestrator/staleness.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep::orchestrator {

AdmissionControl::AdmissionControl(int64_t max_staleness, int64_t prompts_per_step)
    : max_staleness_(max_staleness), prompts_per_step_(prompts_per_step) {}

bool AdmissionControl::CanAdmit() const {
  return num_admitted_ / prompts_per_step_ <= steps_synced_ + max_staleness_;
}

absl::Status CheckSampleAge(int64_t trainer_version, const std::vector<int64_t>& token_versions,
                            int64_t max_staleness, int64_t rollout_index) {
  for (size_t t = 0; t < token_versions.size(); ++t) {
    const int64_t age = trainer_version - token_versions[t];
    if (age < 0 || age > max_staleness) {
      return absl::FailedPreconditionError(absl::StrCat(
          "staleness bound violated: rollout ", rollout_index, " token ", t,
          " was sampled with weight version ", token_versions[t], " but trains at version ",
          trainer_version, " (age ", age, ", max_staleness ", max_staleness, ")"));
    }
  }
  return absl::OkStatus();
}

int64_t SampleAge(int64_t trainer_version, const std::vector<int64_t>& token_versions) {
  if (token_versions.empty()) return 0;
  return trainer_version - *std::min_element(token_versions.begin(), token_versions.end());
}

}  // namespace lockstep::orchestrator
