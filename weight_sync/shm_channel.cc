#include "weight_sync/shm_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::weight_sync {
namespace {

constexpr int64_t kLine = 64;                        // one counter per cache line
constexpr int64_t kPage = 4096;                      // slots start on page boundaries
constexpr uint64_t kMagic = 0x6c6b7374'77730001ull;  // "lkstws", layout version 1
constexpr auto kWakeInterval = std::chrono::milliseconds(100);

struct Meta {  // the first line of the header
  uint64_t magic;
  uint64_t world_size;
  uint64_t slot_bytes;
};

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Where things are in a segment: the header (meta line + 1 + world_size counters), then two
// page-aligned slots.
struct Layout {
  int64_t header_bytes;
  int64_t slot_stride;
  size_t total_bytes;
};

Layout LayoutOf(int world_size, int64_t slot_bytes) {
  const int64_t header = RoundUp(kLine * (2 + world_size), kPage);
  const int64_t stride = RoundUp(std::max<int64_t>(slot_bytes, 1), kPage);
  return {header, stride, static_cast<size_t>(header + 2 * stride)};
}

// True iff `value` >= `target` modulo 2^32 (sequences wrap).
bool Reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

uint32_t Load(const uint32_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

void Store(uint32_t* word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
  // Shared (not private) futex: the waiters are other processes mapping the same object.
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while *word == expected, at most until `deadline` and at most kWakeInterval.
void SleepWhile(const uint32_t* word, uint32_t expected,
                ShmBucketChannel::Clock::time_point deadline) {
  const auto left = std::min<ShmBucketChannel::Clock::duration>(
      deadline - ShmBucketChannel::Clock::now(), kWakeInterval);
  if (left <= ShmBucketChannel::Clock::duration::zero()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  syscall(SYS_futex, const_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

std::string ErrnoText(const char* what, const std::string& name) {
  return absl::StrCat(what, " ", name, ": ", std::strerror(errno));
}

}  // namespace

std::string HostIdentity() {
  if (const char* fake = std::getenv("LOCKSTEP_WEIGHT_SYNC_HOST"); fake != nullptr && *fake) {
    return fake;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return absl::StrCat(host, "\n", boot_id.empty() ? "?" : boot_id);
}

std::string SharedMemoryName(const std::string& group_name, uint64_t nonce) {
  std::string group;
  for (char c : group_name.substr(0, 64)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
    group.push_back(plain ? c : '_');
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(nonce));
  return absl::StrCat("/lockstep-ws-", group, "-", hex);
}

ShmBucketChannel::ShmBucketChannel(char* base, size_t mapped_bytes, int world_size,
                                   int64_t slot_bytes, int64_t slot_stride, int64_t header_bytes)
    : base_(base),
      mapped_bytes_(mapped_bytes),
      world_size_(world_size),
      slot_bytes_(slot_bytes),
      slot_stride_(slot_stride),
      header_bytes_(header_bytes) {}

ShmBucketChannel::~ShmBucketChannel() { munmap(base_, mapped_bytes_); }

absl::StatusOr<std::unique_ptr<ShmBucketChannel>> ShmBucketChannel::Create(const std::string& name,
                                                                           int world_size,
                                                                           int64_t slot_bytes) {
  const Layout layout = LayoutOf(world_size, slot_bytes);
  const size_t total = layout.total_bytes;
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return absl::UnavailableError(ErrnoText("shm_open(create)", name));
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const std::string error = ErrnoText("ftruncate", name);
    close(fd);
    shm_unlink(name.c_str());
    return absl::UnavailableError(error);
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string error = base == MAP_FAILED ? ErrnoText("mmap", name) : "";
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::UnavailableError(error);
  }
  // ftruncate zero-fills: every counter starts at 0, nobody aborted. The receivers check the
  // meta line before they use anything.
  auto* meta = static_cast<Meta*>(base);
  meta->world_size = static_cast<uint64_t>(world_size);
  meta->slot_bytes = static_cast<uint64_t>(slot_bytes);
  __atomic_store_n(&meta->magic, kMagic, __ATOMIC_RELEASE);
  return std::unique_ptr<ShmBucketChannel>(
      new ShmBucketChannel(static_cast<char*>(base), total, world_size, slot_bytes,
                           layout.slot_stride, layout.header_bytes));
}

absl::StatusOr<std::unique_ptr<ShmBucketChannel>> ShmBucketChannel::Open(const std::string& name,
                                                                         int world_size,
                                                                         int64_t slot_bytes) {
  const Layout layout = LayoutOf(world_size, slot_bytes);
  const size_t total = layout.total_bytes;
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return absl::UnavailableError(ErrnoText("shm_open", name));
  struct stat info {};
  if (fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != total) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shared-memory segment ", name, " has ",
                                                      info.st_size, " bytes, expected ", total));
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string error = base == MAP_FAILED ? ErrnoText("mmap", name) : "";
  close(fd);
  if (base == MAP_FAILED) return absl::UnavailableError(error);
  const auto* meta = static_cast<const Meta*>(base);
  if (__atomic_load_n(&meta->magic, __ATOMIC_ACQUIRE) != kMagic ||
      meta->world_size != static_cast<uint64_t>(world_size) ||
      meta->slot_bytes != static_cast<uint64_t>(slot_bytes)) {
    const std::string message =
        absl::StrCat("shared-memory segment ", name, " has another layout (world size ",
                     meta->world_size, ", slot ", meta->slot_bytes, " bytes)");
    munmap(base, total);
    return absl::FailedPreconditionError(message);
  }
  return std::unique_ptr<ShmBucketChannel>(
      new ShmBucketChannel(static_cast<char*>(base), total, world_size, slot_bytes,
                           layout.slot_stride, layout.header_bytes));
}

void ShmBucketChannel::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

uint32_t* ShmBucketChannel::Counter(int index) const {
  return reinterpret_cast<uint32_t*>(base_ + kLine * (1 + index));
}

char* ShmBucketChannel::slot(int index) const {
  return base_ + header_bytes_ + static_cast<int64_t>(index % 2) * slot_stride_;
}

absl::Status ShmBucketChannel::WaitConsumed(uint32_t count, Clock::time_point deadline) const {
  for (int r = 1; r < world_size_; ++r) {
    const uint32_t* consumed = Counter(1 + r);
    while (true) {
      const uint32_t value = Load(consumed);
      if (Reached(value, count)) break;
      if (Load(Counter(1)) != 0) {
        return absl::UnavailableError("another rank aborted the broadcast (a peer failed)");
      }
      if (Clock::now() >= deadline) {
        std::vector<int> late;
        for (int other = 1; other < world_size_; ++other) {
          if (!Reached(Load(Counter(1 + other)), count)) late.push_back(other);
        }
        return absl::DeadlineExceededError(
            absl::StrCat("rank(s) ", absl::StrJoin(late, ", "),
                         " did not take their data out of shared memory in time"));
      }
      SleepWhile(consumed, value, deadline);
    }
  }
  return absl::OkStatus();
}

void ShmBucketChannel::Publish(uint32_t count) { Store(Counter(0), count); }

absl::Status ShmBucketChannel::WaitWritten(uint32_t count, Clock::time_point deadline) const {
  const uint32_t* written = Counter(0);
  while (true) {
    const uint32_t value = Load(written);
    if (Reached(value, count)) return absl::OkStatus();
    if (Load(Counter(1)) != 0) {
      return absl::UnavailableError("another rank aborted the broadcast (a peer failed)");
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("rank 0 did not put the data into shared memory in time");
    }
    SleepWhile(written, value, deadline);
  }
}

void ShmBucketChannel::Release(int rank, uint32_t count) { Store(Counter(1 + rank), count); }

void ShmBucketChannel::Abort() {
  Store(Counter(1), 1);
  // Wake whoever sleeps on a progress counter too.
  for (int index = 0; index < 1 + world_size_; ++index) {
    if (index != 1) syscall(SYS_futex, Counter(index), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace lockstep::weight_sync
