// The value, file and combination checks of a JobConfig (internal to config.cc).
#ifndef LOCKSTEP_ORCHESTRATOR_CONFIG_VALIDATE_H_
#define LOCKSTEP_ORCHESTRATOR_CONFIG_VALIDATE_H_

#include <functional>
#include <string>
#include <vector>

#include "orchestrator/config.h"

namespace lockstep::orchestrator {

// Maps "section.key" to where it was set ("FILE:LINE", "--set …", or the file alone).
using KeyLocator = std::function<std::string(const std::string& dotted_key)>;

// Every problem found, one message each ("WHERE: [section] key: problem"); empty when valid.
std::vector<std::string> CheckJobConfig(const JobConfig& config, const KeyLocator& where);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_CONFIG_VALIDATE_H_
