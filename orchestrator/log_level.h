// [logging] level: which of the orchestrator's console lines are printed. Errors that stop the
// job are always printed (by `lockstep run`); the levels filter the rest:
//   debug   : also the first train/eval prompt as the model sees it
//   info    : what the job is doing (services, SFT, eval, checkpoints, chat template, stops)
//   warning : only what may be wrong (no stop tokens, a stop by signal)
//   error   : nothing but the error, if any
#ifndef LOCKSTEP_ORCHESTRATOR_LOG_LEVEL_H_
#define LOCKSTEP_ORCHESTRATOR_LOG_LEVEL_H_

#include <optional>
#include <string>

namespace lockstep::orchestrator {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// The level of a config name ("debug", "info", "warning", "error"); nullopt for any other.
inline std::optional<LogLevel> ParseLogLevel(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_LOG_LEVEL_H_
