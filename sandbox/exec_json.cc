#include "sandbox/exec_json.h"

namespace lockstep::sandbox {

nlohmann::json ToJson(const ExecResult& result) {
  nlohmann::json json = {
      {"verdict", std::string(VerdictName(result.verdict))},
      {"exit_code", result.exit_code},
      {"signal", result.signal},
      {"stdout", result.stdout_data},
      {"stderr", result.stderr_data},
      {"truncated", result.truncated},
      {"wall_ms", result.wall_ms},
      {"cpu_ms", result.cpu_ms},
      {"peak_memory_mb", result.peak_memory_mb},
  };
  if (!result.error.empty()) json["error"] = result.error;
  return json;
}

std::string DumpJson(const nlohmann::json& json, int indent) {
  return json.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lockstep::sandbox
