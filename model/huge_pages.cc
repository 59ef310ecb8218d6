#include "model/huge_pages.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace lockstep {
namespace {

constexpr int64_t kHugePageBytes = int64_t{2} << 20;
constexpr int64_t kTensorAlignment = 64;  // each parameter starts on a cache line

int64_t RoundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

torch::Tensor AllocateHugePageBuffer(int64_t num_elements, torch::Dtype dtype, bool* advised) {
  const int64_t bytes = RoundUp(std::max<int64_t>(num_elements, 1) * c10::elementSize(dtype),
                                kHugePageBytes);
  void* data = std::aligned_alloc(kHugePageBytes, bytes);
  TORCH_CHECK(data != nullptr, "cannot allocate ", bytes, " bytes");
  bool accepted = false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  accepted = madvise(data, bytes, MADV_HUGEPAGE) == 0;  // advisory: plain pages if THP is off
#endif
  if (advised != nullptr) *advised = accepted;
  return torch::from_blob(
      data, {num_elements}, [](void* pointer) { std::free(pointer); },
      torch::TensorOptions().dtype(dtype));
}

absl::StatusOr<HugePagePlacement> MoveParametersToHugePages(torch::nn::Module& module,
                                                            ParameterValues values) {
  std::vector<torch::Tensor> parameters;
  int64_t total = 0;
  for (torch::Tensor& parameter : module.parameters()) {
    if (!parameter.is_cpu() || parameter.numel() == 0) continue;
    parameters.push_back(parameter);
    total += RoundUp(parameter.nbytes(), kTensorAlignment);
  }
  HugePagePlacement placement;
  if (parameters.empty()) return placement;
  torch::Tensor block;
  try {
    block = AllocateHugePageBuffer(total, torch::kUInt8, &placement.advised);
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("the model's weights (", total,
                                                     " bytes): ", e.what_without_backtrace()));
  }
  torch::NoGradGuard no_grad;
  char* next = static_cast<char*>(block.data_ptr());
  for (torch::Tensor& parameter : parameters) {
    // Each parameter's storage holds the block: it lives as long as any of them.
    torch::Tensor home = torch::from_blob(
        next, parameter.sizes(), [block](void*) {}, parameter.options().requires_grad(false));
    if (values == ParameterValues::kKeep) home.copy_(parameter);
    parameter.set_data(home);  // the old storage is freed here (nothing else holds it)
    next += RoundUp(parameter.nbytes(), kTensorAlignment);
    placement.bytes += parameter.nbytes();
  }
  return placement;
}

}  // namespace lockstep
