#include "model/kernels/tile_claims_cpu.h"

#include <algorithm>

namespace lockstep::kernels {
namespace {

uint64_t Pack(uint64_t front, uint64_t back) { return front | (back << 32); }
uint64_t Front(uint64_t bounds) { return bounds & 0xffffffffu; }
uint64_t Back(uint64_t bounds) { return bounds >> 32; }

}  // namespace

TileClaims::TileClaims(int64_t num_tiles, int num_parts)
    : num_parts_(std::max(num_parts, 1)), ranges_(new Range[std::max(num_parts, 1)]) {
  const int64_t tiles = std::max<int64_t>(num_tiles, 0);
  for (int p = 0; p < num_parts_; ++p) {
    ranges_[p].bounds.store(Pack(static_cast<uint64_t>(tiles * p / num_parts_),
                                 static_cast<uint64_t>(tiles * (p + 1) / num_parts_)),
                            std::memory_order_relaxed);
  }
}

int64_t TileClaims::Next(int part) {
  std::atomic<uint64_t>& own = ranges_[part].bounds;
  uint64_t bounds = own.load(std::memory_order_relaxed);
  while (Front(bounds) < Back(bounds)) {
    if (own.compare_exchange_weak(bounds, Pack(Front(bounds) + 1, Back(bounds)),
                                  std::memory_order_relaxed)) {
      return static_cast<int64_t>(Front(bounds));
    }
  }
  return Steal();
}

int64_t TileClaims::Steal() {
  for (;;) {
    int victim = -1;
    uint64_t most = 0;
    for (int p = 0; p < num_parts_; ++p) {
      const uint64_t bounds = ranges_[p].bounds.load(std::memory_order_relaxed);
      const uint64_t left = Back(bounds) > Front(bounds) ? Back(bounds) - Front(bounds) : 0;
      if (left > most) most = left, victim = p;
    }
    if (victim < 0) return -1;
    std::atomic<uint64_t>& range = ranges_[victim].bounds;
    uint64_t bounds = range.load(std::memory_order_relaxed);
    while (Front(bounds) < Back(bounds)) {
      if (range.compare_exchange_weak(bounds, Pack(Front(bounds), Back(bounds) - 1),
                                      std::memory_order_relaxed)) {
        return static_cast<int64_t>(Back(bounds) - 1);
      }
    }
    // The victim's range emptied meanwhile: look again.
  }
}

}  // namespace lockstep::kernels
