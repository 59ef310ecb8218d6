#include "weight_sync/large_buffer.h"

#include "model/huge_pages.h"

namespace lockstep::weight_sync {

torch::Tensor AllocateLargeBuffer(int64_t num_elements, torch::Dtype dtype) {
  const int64_t bytes = num_elements * static_cast<int64_t>(c10::elementSize(dtype));
  if (bytes < (int64_t{4} << 20)) return torch::empty({num_elements}, dtype);
  return AllocateHugePageBuffer(num_elements, dtype);
}

}  // namespace lockstep::weight_sync
