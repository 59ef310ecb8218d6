// ExecResult as JSON, the form `lockstep sandbox exec` prints and the bench and docs show:
//   {"verdict": "ok", "exit_code": 0, "signal": 0, "stdout": "...", "stderr": "...",
//    "truncated": false, "wall_ms": 21.3, "cpu_ms": 15.9, "peak_memory_mb": 8.1}
// plus "error" when the verdict is sandbox_error.
#ifndef LOCKSTEP_SANDBOX_EXEC_JSON_H_
#define LOCKSTEP_SANDBOX_EXEC_JSON_H_

#include "nlohmann/json.hpp"
#include "sandbox/exec.h"

namespace lockstep::sandbox {

// stdout and stderr are included as raw strings: dump with DumpJson (or with
// nlohmann::json::error_handler_t::replace), since a program may print bytes that are not UTF-8.
nlohmann::json ToJson(const ExecResult& result);

// `json` as text, indented by `indent` (-1: one line), invalid UTF-8 replaced by U+FFFD.
std::string DumpJson(const nlohmann::json& json, int indent = 2);

}  // namespace lockstep::sandbox

#endif  // LOCKSTEP_SANDBOX_EXEC_JSON_H_
