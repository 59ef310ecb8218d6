// Large host buffers for weight transfers: on transparent huge pages (model/huge_pages.h's
// AllocateHugePageBuffer; the kernel default here is "madvise"), so that filling a fresh
// multi-hundred-MB staging buffer takes hundreds of page faults instead of ~100k, and weights a
// generator adopts from a sync stay on huge pages for its decode steps. Freed with the tensor
// (any thread).
//
// Thread safety: a pure function.
#ifndef LOCKSTEP_WEIGHT_SYNC_LARGE_BUFFER_H_
#define LOCKSTEP_WEIGHT_SYNC_LARGE_BUFFER_H_

#include <torch/torch.h>

#include <cstdint>

namespace lockstep::weight_sync {

// An uninitialised contiguous 1-D CPU tensor of `num_elements` of `dtype`. Small requests
// (< 4 MiB) are plain torch::empty. Throws c10::Error when memory runs out.
torch::Tensor AllocateLargeBuffer(int64_t num_elements, torch::Dtype dtype);

}  // namespace lockstep::weight_sync

#endif  // LOCKSTEP_WEIGHT_SYNC_LARGE_BUFFER_H_
