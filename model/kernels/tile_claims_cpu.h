// Balanced claiming of a kernel's independent tiles by a fixed team of threads.
//
// Tiles [0, num_tiles) are split into `num_parts` contiguous ranges, one per thread, as a static
// split would give them: each thread takes its own range's tiles from the front, in order, so
// its share of W is read as one forward stream. A thread whose range is empty then takes tiles
// from the back of the range that has the most left, one at a time, until none is left. So no
// thread idles at the end of a kernel while another still has tiles: on a VM whose threads see
// uneven memory bandwidth, the static split's idle time was ~13% of decode's wall time (AMD EPYC
// Zen 4, 2 threads, batch 1, perf: the OpenMP barrier's spin).
//
// Which thread computes a tile never changes its bits (linear_cpu.h), so the claiming order is
// free. Thread-safe: any number of threads may call Next at once, each with its own part.
#ifndef LOCKSTEP_MODEL_KERNELS_TILE_CLAIMS_CPU_H_
#define LOCKSTEP_MODEL_KERNELS_TILE_CLAIMS_CPU_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace lockstep::kernels {

class TileClaims {
 public:
  // num_tiles < 2^31; num_parts >= 1.
  TileClaims(int64_t num_tiles, int num_parts);

  // The next tile for the thread that owns `part` (0 <= part < num_parts): the front of its own
  // range, else the back of the fullest other range; -1 once every tile has been claimed. Each
  // tile is returned exactly once over all calls.
  int64_t Next(int part);

  int num_parts() const { return num_parts_; }

 private:
  // A range's unclaimed tiles [front, back): front in the low 32 bits, back in the high 32, so
  // that the owner (front) and thieves (back) claim with one compare-and-swap each.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds;
  };
  int64_t Steal();

  const int num_parts_;
  std::unique_ptr<Range[]> ranges_;
};

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_TILE_CLAIMS_CPU_H_
