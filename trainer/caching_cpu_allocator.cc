#include "trainer/caching_cpu_allocator.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace lockstep::trainer {
namespace {

constexpr size_t kAlignment = 64;               // as LibTorch's own CPU allocator
constexpr size_t kLargeRounding = size_t{1} << 16;  // large sizes round up to 64 KiB

class CachingCpuAllocator;
CachingCpuAllocator* g_allocator = nullptr;  // set once, never freed (tensors may outlive main)

void* AlignedAlloc(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes) != 0) return nullptr;
  return p;
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}

  c10::DataPtr allocate(size_t bytes) const override {
    void* p = Allocate(bytes);
    return {p, p, &Delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  CachingCpuAllocatorStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, cached_bytes_};
  }

 private:
  static void Delete(void* p) { g_allocator->Release(p); }

  void* Allocate(size_t bytes) const {
    if (bytes == 0) return nullptr;
    if (bytes < kMinCachedBytes) {
      void* p = AlignedAlloc(bytes);
      if (p == nullptr) throw std::bad_alloc();
      return p;
    }
    const size_t size = (bytes + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Best fit: the smallest free block that holds the request and wastes at most 25%.
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 4) {
        void* p = it->second->second;
        live_[p] = it->first;
        cached_bytes_ -= it->first;
        by_age_.erase(it->second);
        free_.erase(it);
        ++hits_;
        return p;
      }
      ++misses_;
    }
    void* p = AlignedAlloc(size);
    if (p == nullptr) {
      ReleaseCache();  // the pool may hold what the system now lacks
      p = AlignedAlloc(size);
      if (p == nullptr) throw std::bad_alloc();
    }
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = size;
    return p;
  }

  // A returned large block joins the pool; when the pool would pass its limit, the blocks
  // returned longest ago are freed first (a workload that changed shapes stops holding memory).
  void Release(void* p) const {
    if (p == nullptr) return;
    std::vector<void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) {
        evicted.push_back(p);  // a small block
      } else {
        const size_t size = it->second;
        live_.erase(it);
        if (size > max_cached_bytes_) {
          evicted.push_back(p);
        } else {
          while (cached_bytes_ + size > max_cached_bytes_) {
            const auto& [old_size, old_p] = by_age_.front();
            auto range = free_.equal_range(old_size);
            for (auto f = range.first; f != range.second; ++f) {
              if (f->second == by_age_.begin()) {
                free_.erase(f);
                break;
              }
            }
            evicted.push_back(old_p);
            cached_bytes_ -= old_size;
            by_age_.pop_front();
          }
          by_age_.emplace_back(size, p);
          free_.emplace(size, std::prev(by_age_.end()));
          cached_bytes_ += size;
        }
      }
    }
    for (void* q : evicted) std::free(q);
  }

  void ReleaseCache() const {
    std::list<std::pair<size_t, void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(by_age_);
      free_.clear();
      cached_bytes_ = 0;
    }
    for (auto& [size, p] : blocks) std::free(p);
  }

  const size_t max_cached_bytes_;
  mutable std::mutex mu_;
  using AgeList = std::list<std::pair<size_t, void*>>;
  mutable AgeList by_age_;                                 // free blocks, oldest return first
  mutable std::multimap<size_t, AgeList::iterator> free_;  // size -> free block
  mutable std::unordered_map<void*, size_t> live_;   // handed-out large block -> size
  mutable size_t cached_bytes_ = 0;
  mutable int64_t hits_ = 0, misses_ = 0;
};

}  // namespace

void InstallCachingCpuAllocator(size_t max_cached_bytes) {
  static std::once_flag once;
  std::call_once(once, [max_cached_bytes] {
    g_allocator = new CachingCpuAllocator(max_cached_bytes);
    c10::SetCPUAllocator(g_allocator, /*priority=*/1);
  });
}

CachingCpuAllocatorStats GetCachingCpuAllocatorStats() {
  return g_allocator == nullptr ? CachingCpuAllocatorStats{} : g_allocator->Stats();
}

}  // namespace lockstep::trainer
