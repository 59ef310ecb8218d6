// Small helpers shared by the subcommands.
#ifndef LOCKSTEP_CLI_CLI_UTIL_H_
#define LOCKSTEP_CLI_CLI_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::cli {

// Prints "error: <status>" to stderr and exits with status 1 unless `status` is OK.
void ExitOnError(const absl::Status& status);

// Parses "1,2,3" into integers. Errors name the offending piece.
absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_CLI_CLI_UTIL_H_
