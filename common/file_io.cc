#include "common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

absl::Status Errno(const std::string& what, const std::string& path, int error) {
  return absl::InternalError(absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
    return Errno("read", path, error);
  }
  std::string contents;
  struct stat info {};
  if (fstat(fd, &info) == 0 && info.st_size > 0) contents.reserve(info.st_size);
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return Errno("read", path, error);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents, int mode) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("write", temporary, errno);
  // open() applies the umask; the caller asked for exactly `mode` (e.g. 0600 for a secret).
  fchmod(fd, static_cast<mode_t>(mode));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      unlink(temporary.c_str());
      return Errno("write", temporary, error);
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const int error = errno;
    close(fd);
    unlink(temporary.c_str());
    return Errno("flush", temporary, error);
  }
  if (close(fd) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return Errno("close", temporary, error);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
