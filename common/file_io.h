// Whole-file reads and atomic writes, the one way lockstep reads a small file into memory or
// replaces one so that a reader (or a crash) never sees half of it.
//
// Thread-compatible: the functions touch only the paths they are given. Two writers of the same
// path at once are not synchronised (each uses its own temporary file; the last rename wins).
#ifndef LOCKSTEP_COMMON_FILE_IO_H_
#define LOCKSTEP_COMMON_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

// The bytes of the file at `path`. NotFound when it does not exist, Internal (naming the path
// and the system's reason) when it cannot be read.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` through a temporary file in the same directory, flushed to disk
// (fsync) and renamed over the target, so that readers see the old or the new file, never a
// part. `mode` is the new file's permission bits. Internal naming the path on failure; the
// temporary file is removed.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 int mode = 0644);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_FILE_IO_H_
