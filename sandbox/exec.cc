#include "sandbox/exec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lockstep::sandbox {
namespace {

constexpr struct {
  Verdict verdict;
  absl::string_view name;
} kVerdictNames[] = {
    {Verdict::kOk, "ok"},
    {Verdict::kNonzeroExit, "nonzero_exit"},
    {Verdict::kTimeout, "timeout"},
    {Verdict::kMemoryLimit, "memory_limit"},
    {Verdict::kOutputLimit, "output_limit"},
    {Verdict::kKilled, "killed"},
    {Verdict::kCompileError, "compile_error"},
    {Verdict::kSandboxError, "sandbox_error"},
};

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sandbox request: ", field, " ", why));
}

absl::Status CheckPath(absl::string_view field, absl::string_view path) {
  if (path.empty()) return Invalid(field, "is empty");
  if (path.front() == '/') return Invalid(field, absl::StrCat("must be relative, got \"", path, "\""));
  if (path.find('\0') != absl::string_view::npos) return Invalid(field, "contains a NUL byte");
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Invalid(field, absl::StrCat("must not contain empty, \".\" or \"..\" parts, got \"",
                                         path, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view VerdictName(Verdict verdict) {
  for (const auto& entry : kVerdictNames) {
    if (entry.verdict == verdict) return entry.name;
  }
  return "sandbox_error";
}

std::optional<Verdict> ParseVerdict(absl::string_view name) {
  for (const auto& entry : kVerdictNames) {
    if (entry.name == name) return entry.verdict;
  }
  return std::nullopt;
}

const std::vector<Verdict>& AllVerdicts() {
  static const std::vector<Verdict>* verdicts = [] {
    auto* all = new std::vector<Verdict>;
    for (const auto& entry : kVerdictNames) all->push_back(entry.verdict);
    return all;
  }();
  return *verdicts;
}

const std::vector<std::string>& KnownLanguages() {
  static const std::vector<std::string>* languages =
      new std::vector<std::string>{"bash", "cpp", "python3"};
  return *languages;
}

absl::Status ValidateRequest(const ExecRequest& request, const RequestBounds& bounds) {
  const std::vector<std::string>& languages = KnownLanguages();
  if (request.language.empty()) {
    if (request.argv.empty()) return Invalid("argv", "is empty and no language is given");
    if (request.argv[0].empty()) return Invalid("argv[0]", "is empty");
    if (!request.source.empty()) {
      return Invalid("source", "needs a language (or put it in files and run it with argv)");
    }
  } else if (std::find(languages.begin(), languages.end(), request.language) == languages.end()) {
    return Invalid("language", absl::StrCat("\"", request.language, "\" is unknown (known: ",
                                            absl::StrJoin(languages, ", "), ")"));
  } else if (request.source.empty()) {
    return Invalid("source", absl::StrCat("is empty (language ", request.language, ")"));
  }
  if (static_cast<int64_t>(request.argv.size()) > bounds.max_args) {
    return Invalid("argv", absl::StrCat("has ", request.argv.size(), " entries, more than ",
                                        bounds.max_args));
  }
  for (size_t i = 0; i < request.argv.size(); ++i) {
    if (request.argv[i].find('\0') != std::string::npos) {
      return Invalid(absl::StrCat("argv[", i, "]"), "contains a NUL byte");
    }
  }

  const ExecLimits& l = request.limits;
  const std::pair<absl::string_view, int64_t> limits[] = {
      {"wall_ms", l.wall_ms},
      {"cpu_ms", l.cpu_ms},
      {"memory_mb", l.memory_mb},
      {"max_processes", l.max_processes},
      {"max_output_bytes", l.max_output_bytes},
      {"max_file_bytes", l.max_file_bytes},
      {"work_dir_mb", l.work_dir_mb},
      {"max_open_files", l.max_open_files},
  };
  for (const auto& [name, value] : limits) {
    if (value <= 0) {
      return Invalid(absl::StrCat("limits.", name), absl::StrCat("must be positive, got ", value));
    }
  }
  if (l.max_open_files < 4) return Invalid("limits.max_open_files", "must be at least 4");
  if (l.memory_mb > (int64_t{1} << 30)) return Invalid("limits.memory_mb", "is too large");

  if (static_cast<int64_t>(request.files.size()) > bounds.max_files) {
    return Invalid("files", absl::StrCat("has ", request.files.size(), " entries, more than ",
                                         bounds.max_files));
  }
  int64_t source_bytes = static_cast<int64_t>(request.source.size());
  for (size_t i = 0; i < request.files.size(); ++i) {
    if (absl::Status status =
            CheckPath(absl::StrCat("files[", i, "].path"), request.files[i].path);
        !status.ok()) {
      return status;
    }
    source_bytes += static_cast<int64_t>(request.files[i].content.size());
  }
  if (source_bytes > bounds.max_source_bytes) {
    return Invalid("source", absl::StrCat("and files hold ", source_bytes, " bytes, more than ",
                                          bounds.max_source_bytes));
  }
  if (static_cast<int64_t>(request.stdin_data.size()) > bounds.max_stdin_bytes) {
    return Invalid("stdin", absl::StrCat("holds ", request.stdin_data.size(),
                                         " bytes, more than ", bounds.max_stdin_bytes));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::sandbox
