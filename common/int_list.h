// "1,2, 3" -> {1, 2, 3}: the comma-separated integer lists of command-line flags.
#ifndef LOCKSTEP_COMMON_INT_LIST_H_
#define LOCKSTEP_COMMON_INT_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

// InvalidArgument naming the piece that is not an integer, or the list when it is empty.
absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_INT_LIST_H_
