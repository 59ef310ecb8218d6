// A caching CPU allocator for LibTorch: large blocks freed by tensors are kept and handed out
// again instead of going back to the operating system.
//
// Why: glibc serves every block over its mmap threshold (at most 32 MiB, often 128 KiB) with a
// fresh mmap, so each training step's large temporaries (activations, logits chunks, gradients)
// are new memory that the kernel must fault in page by page. On this VM a fresh page costs about
// 22 us (1 GiB takes ~6 s of CPU), which was a large share of a training step. Training steps
// allocate the same shapes every step, so a pool keyed by size serves nearly all of them.
//
// Blocks of at least kMinCachedBytes are pooled (best fit within 25% of the request); smaller
// ones go straight to posix_memalign/free. The pool holds at most `max_cached_bytes` of free
// blocks; to make room for a returned block it frees the blocks returned longest ago.
//
// Thread-safety: the allocator is safe to use from any thread (one mutex).
#ifndef LOCKSTEP_TRAINER_CACHING_CPU_ALLOCATOR_H_
#define LOCKSTEP_TRAINER_CACHING_CPU_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>

namespace lockstep::trainer {

inline constexpr size_t kMinCachedBytes = size_t{1} << 20;
inline constexpr size_t kDefaultMaxCachedBytes = size_t{8} << 30;

// Makes the caching allocator LibTorch's CPU allocator for the rest of the process (tensors
// allocated before keep their own deleters). Idempotent: the first call's limit applies.
void InstallCachingCpuAllocator(size_t max_cached_bytes = kDefaultMaxCachedBytes);

struct CachingCpuAllocatorStats {
  int64_t hits = 0;             // large requests served from the pool
  int64_t misses = 0;           // large requests that allocated new memory
  size_t cached_bytes = 0;      // free bytes held in the pool now
};

// Counters of the installed allocator (all zero when it is not installed).
CachingCpuAllocatorStats GetCachingCpuAllocatorStats();

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_CACHING_CPU_ALLOCATOR_H_
