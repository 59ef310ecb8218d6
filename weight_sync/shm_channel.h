// The same-host transport for weight-sync buckets: a POSIX shared-memory segment with a small
// control header and two bucket slots, the way NCCL moves data inside a node instead of over
// sockets. Rank 0 writes bucket k of a broadcast into slot k % 2 while the receivers copy slot
// (k - 1) % 2 out, chunk by chunk. The hand-off is counters of chunks in the header, waited on
// with futexes (the caller decides what a chunk is; ShmBucketTransport uses 8 MiB pieces of a
// bucket):
//   written            rank 0 sets it to c + 1 once chunk c is in its slot
//   consumed[r]        receiver r sets it to c + 1 once it has copied chunk c out
//   aborted            any rank that fails sets it, so that every waiter fails at once
// Rank 0 reuses a slot only when every consumed[r] has passed the last chunk of the bucket that
// was in it. Counts keep growing across broadcasts (they wrap at 2^32; comparisons are modular).
//
// Every wait is bounded by a deadline (DeadlineExceeded naming the ranks that made no progress)
// and wakes at least every 100 ms to notice `aborted` (Unavailable). Nothing here detects a dead
// peer by itself: a dead peer simply makes no progress, so the survivors' waits run out.
//
// Lifetime: rank 0 Create()s the object under a fresh name, the receivers Open() it, and rank 0
// Unlink()s the name as soon as every receiver has mapped it, so nothing stays in /dev/shm when
// a process dies later; the memory goes away with the last mapping.
//
// Thread safety: a channel is used by one thread per process at a time; the header is shared
// with the other processes through atomics only.
#ifndef LOCKSTEP_WEIGHT_SYNC_SHM_CHANNEL_H_
#define LOCKSTEP_WEIGHT_SYNC_SHM_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::weight_sync {

// This machine as "<hostname>\n<boot id>" (/proc/sys/kernel/random/boot_id): two processes see
// the same string iff they run on the same host in the same boot (containers on one host share
// the boot id but may not share /dev/shm; the group then falls back to Gloo, see shm_transport.h).
// The environment variable LOCKSTEP_WEIGHT_SYNC_HOST, when set, replaces it (tests use it to
// play a rank on another host).
std::string HostIdentity();

// A valid shared-memory object name for a group: "/lockstep-ws-<group, sanitised>-<nonce>".
std::string SharedMemoryName(const std::string& group_name, uint64_t nonce);

class ShmBucketChannel {
 public:
  using Clock = std::chrono::steady_clock;

  // Rank 0: creates and maps a new object `name` (O_EXCL) with room for two slots of
  // `slot_bytes` and the counters of `world_size` ranks. Unavailable (with errno text) on failure.
  static absl::StatusOr<std::unique_ptr<ShmBucketChannel>> Create(const std::string& name,
                                                                  int world_size,
                                                                  int64_t slot_bytes);
  // Receivers: maps the object rank 0 created; FailedPrecondition when its layout differs,
  // Unavailable when it cannot be opened (e.g. another /dev/shm).
  static absl::StatusOr<std::unique_ptr<ShmBucketChannel>> Open(const std::string& name,
                                                                int world_size, int64_t slot_bytes);
  // Removes the name (not the memory of existing mappings). A missing name is fine.
  static void Unlink(const std::string& name);

  ~ShmBucketChannel();  // unmaps
  ShmBucketChannel(const ShmBucketChannel&) = delete;
  ShmBucketChannel& operator=(const ShmBucketChannel&) = delete;

  // Slot 0 or 1 (slot_bytes() bytes, 4096-aligned).
  char* slot(int index) const;
  int64_t slot_bytes() const { return slot_bytes_; }

  // Rank 0: waits until every receiver's consumed >= `count` (chunks 0..count-1 are out).
  absl::Status WaitConsumed(uint32_t count, Clock::time_point deadline) const;
  // Rank 0: chunk `count - 1` is in its slot; wakes the receivers.
  void Publish(uint32_t count);
  // Receivers: waits until written >= `count` (chunk count - 1 is readable).
  absl::Status WaitWritten(uint32_t count, Clock::time_point deadline) const;
  // Receiver `rank`: it has copied chunk `count - 1` out; wakes rank 0.
  void Release(int rank, uint32_t count);
  // Makes every current and later wait of every rank fail with Unavailable.
  void Abort();

 private:
  ShmBucketChannel(char* base, size_t mapped_bytes, int world_size, int64_t slot_bytes,
                   int64_t slot_stride, int64_t header_bytes);
  uint32_t* Counter(int index) const;  // 0 = written, 1 = aborted, 1 + r = consumed[r]

  char* const base_;
  const size_t mapped_bytes_;
  const int world_size_;
  const int64_t slot_bytes_;
  const int64_t slot_stride_;
  const int64_t header_bytes_;
};

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_SHM_CHANNEL_H_
