// A read-only private mapping of a whole file, for the safetensors reader.
//
// Thread safety: a MappedFile is immutable after Open(); concurrent reads are safe.
#ifndef LOCKSTEP_MODEL_MAPPED_FILE_H_
#define LOCKSTEP_MODEL_MAPPED_FILE_H_

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

namespace lockstep {

// Unmapped on destruction. A file truncated by another process while mapped would raise SIGBUS
// on access; files being loaded must not be rewritten in place (lockstep's writers always rename
// a new file into place instead).
class MappedFile {
 public:
  // Errors keep the operating system's code (absl::ErrnoToStatus); kInvalidArgument when `path`
  // is not a regular file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::filesystem::path& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return std::string_view(data_, size_); }

  // Drops the pages under bytes [offset, offset + size) from the process's resident set (they
  // are clean file pages: a later read faults them in again from the page cache). A reader that
  // copies a tensor out calls this after each piece, so that the tensor is resident once, as
  // its copy, rather than twice until the whole file is unmapped.
  void Release(size_t offset, size_t size) const;

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_MAPPED_FILE_H_
