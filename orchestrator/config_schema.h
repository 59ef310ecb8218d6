// Every key of a job config, listed once: its section, its name and the JobConfig field it
// fills. The reader (config.cc), the resolved-config writer (config_write.cc) and the
// unknown-key suggestions all walk this list, so a key added here is read, written back and
// suggested, and a key not here does not exist.
//
//   JobConfig config;
//   for (const SectionFields& section : JobSections(config))
//     for (const KeyField& key : section.keys) std::visit(..., key.field);
#ifndef LOCKSTEP_ORCHESTRATOR_CONFIG_SCHEMA_H_
#define LOCKSTEP_ORCHESTRATOR_CONFIG_SCHEMA_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestrator/config.h"

namespace lockstep::orchestrator {

// Where one key's value lives. nlohmann::json is a free-form table ([rewards] options).
using FieldRef = std::variant<std::string*, int64_t*, double*, bool*, std::vector<std::string>*,
                              std::vector<double>*, nlohmann::json*>;

struct KeyField {
  const char* name;
  FieldRef field;
};

struct SectionFields {
  const char* name;
  std::vector<KeyField> keys;
};

// The plain sections of `config`, their keys pointing into it. [rewards] servers, an array of
// tables, is not among rewards' keys: it is RewardServerFields, one entry per server.
std::vector<SectionFields> JobSections(JobConfig& config);

// The keys of one [[rewards.servers]] entry, pointing into `server`.
std::vector<KeyField> RewardServerFields(RewardServerConfig& server);

// Section name ("rewards.servers" included) -> its key names, in schema order; the names unknown
// keys are checked against.
const std::map<std::string, std::vector<std::string>>& KnownKeys();

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_CONFIG_SCHEMA_H_
