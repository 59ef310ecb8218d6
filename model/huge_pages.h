// Weights on transparent huge pages.
//
// A decode step reads every weight once. With 4 KiB pages that is ~100K pages for a 100M model,
// far beyond the TLB, and on some machines the page walks cost as much as the reads: on this
// project's Sapphire-Rapids-class VM, bench_linear_cold's sweep of a base decode step's matrices
// took 15.5 ms at 2 threads on 4 KiB pages and 13.3 on 2 MiB pages, and an engine b8 decode step
// 17.6-18.2 ms against 16.1-16.6 (bench/README.md).
//
// MoveParametersToHugePages copies every CPU parameter of a module, bit for bit, into one block
// of memory aligned to 2 MiB that the kernel is asked (madvise MADV_HUGEPAGE, Linux) to back with
// huge pages, and points the parameters at it (set_data: every holder of the parameter sees the
// new storage; values, shapes and dtypes are unchanged). The block lives as long as any parameter
// storage in it. Where huge pages are unavailable the block is ordinary memory and nothing else
// changes. Old storages are freed as each parameter moves. The Transformer moves its parameters
// before writing them (layers.h) and asks for no copy (ParameterValues::kUnwritten): reading the
// unwritten old storages made their pages resident on some kernels (an AMD EPYC Zen 5 guest,
// Linux 6.18, 2026-12-06: LoadModelMemoryTest's load peaked at twice the weights, 220.0 MiB for
// 104.0, and at 116.2 without the read), so no page of the weights is resident twice.
#ifndef LOCKSTEP_MODEL_HUGE_PAGES_H_
#define LOCKSTEP_MODEL_HUGE_PAGES_H_

#include <torch/torch.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace lockstep {

struct HugePagePlacement {
  int64_t bytes = 0;     // parameter bytes moved into the block
  bool advised = false;  // the kernel accepted MADV_HUGEPAGE for the block
};

// What the parameters hold when they move: values to keep (copied bit for bit into the block), or
// nothing yet (their new homes are left unwritten, for the caller to write; the old storages are
// never read).
enum class ParameterValues { kKeep, kUnwritten };

// Errors: ResourceExhausted when the block cannot be allocated (nothing has moved then).
absl::StatusOr<HugePagePlacement> MoveParametersToHugePages(
    torch::nn::Module& module, ParameterValues values = ParameterValues::kKeep);

// An uninitialised contiguous 1-D CPU tensor of `num_elements` of `dtype` in memory aligned to
// 2 MiB, rounded up to whole 2 MiB pages and advised MADV_HUGEPAGE before anything touches it
// (`*advised`: whether the kernel accepted). Freed with its storage, on any thread. Throws
// c10::Error when memory runs out. Thread safety: a pure function.
torch::Tensor AllocateHugePageBuffer(int64_t num_elements, torch::Dtype dtype,
                                     bool* advised = nullptr);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_HUGE_PAGES_H_
