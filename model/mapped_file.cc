#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

absl::Status ErrnoError(int error_number, const std::filesystem::path& path, const char* action) {
  return absl::ErrnoToStatus(error_number, absl::StrCat(path.string(), ": cannot ", action));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path, "open");
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int error_number = errno;
    ::close(fd);
    return ErrnoError(error_number, path, "stat");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a regular file"));
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->size_ = static_cast<size_t>(info.st_size);
  if (file->size_ > 0) {
    void* data = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int error_number = errno;
      ::close(fd);
      file->size_ = 0;
      return ErrnoError(error_number, path, "mmap");
    }
    file->data_ = static_cast<const char*>(data);
  }
  ::close(fd);  // The mapping stays valid without the descriptor.
  return file;
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<char*>(data_), size_);
}

void MappedFile::Release(size_t offset, size_t size) const {
  if (offset >= size_ || size == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_ + offset) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + std::min(size_, offset + size));
  // Advice only: a failure leaves the pages resident, which is harmless.
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace lockstep
