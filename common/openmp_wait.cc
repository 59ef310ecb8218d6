#include "common/openmp_wait.h"

#include <cstdlib>

namespace lockstep {

std::vector<std::pair<std::string, std::string>> TrainingOpenMpEnvironment() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) {
    return {};
  }
  return {{"OMP_WAIT_POLICY", "PASSIVE"}};
}

std::string OpenMpWaitPolicy() {
  std::string policy;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    if (!policy.empty()) policy += " ";
    policy += std::string(name) + "=" + value;
  }
  return policy.empty() ? "default (spin, then sleep)" : policy;
}

}  // namespace lockstep
