#include "weight_sync/large_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace lockstep::weight_sync {

torch::Tensor AllocateLargeBuffer(int64_t num_elements, torch::Dtype dtype) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = static_cast<size_t>(num_elements) * c10::elementSize(dtype);
  if (bytes < (size_t{4} << 20)) return torch::empty({num_elements}, dtype);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, rounded);
  TORCH_CHECK(data != nullptr, "weight sync: cannot allocate ", rounded, " bytes");
  (void)madvise(data, rounded, MADV_HUGEPAGE);  // advisory: plain pages if THP is off
  return torch::from_blob(
      data, {num_elements}, [](void* pointer) { std::free(pointer); },
      torch::TensorOptions().dtype(dtype));
}

}  // namespace lockstep::weight_sync
