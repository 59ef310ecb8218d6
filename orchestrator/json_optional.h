// std::optional<T> in nlohmann::json: nullopt is null, and null (or a missing key, through the
// *_WITH_DEFAULT macros) reads back as nullopt. nlohmann 3.11.2 (Debian 12) has no built-in
// support. DropNullMembers leaves unset members out of a written record. Used by the typed metrics
// record and summary (step_record.h, job_summary.h), whose readers accept files that lack a key.
#ifndef LOCKSTEP_ORCHESTRATOR_JSON_OPTIONAL_H_
#define LOCKSTEP_ORCHESTRATOR_JSON_OPTIONAL_H_

#include <optional>

#include "nlohmann/json.hpp"

namespace nlohmann {

template <typename T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) {
    if (value.has_value()) {
      j = *value;
    } else {
      j = nullptr;
    }
  }
  static void from_json(const json& j, std::optional<T>& value) {
    if (j.is_null()) {
      value = std::nullopt;
    } else {
      value = j.get<T>();
    }
  }
};

}  // namespace nlohmann

namespace lockstep::orchestrator {

// Removes every null member of `object` and of the objects nested in it, so that a record
// written from a struct with unset optionals carries only the keys that have a value.
inline void DropNullMembers(nlohmann::json& object) {
  if (!object.is_object()) return;
  for (auto it = object.begin(); it != object.end();) {
    if (it->is_null()) {
      it = object.erase(it);
    } else {
      DropNullMembers(*it);
      ++it;
    }
  }
}

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_JSON_OPTIONAL_H_
