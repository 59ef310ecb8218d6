#include "model/huge_pages.h"

#include <cstdlib>
#include <memory>
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

absl::StatusOr<HugePagePlacement> MoveParametersToHugePages(torch::nn::Module& module) {
  std::vector<torch::Tensor> parameters;
  int64_t total = 0;
  for (torch::Tensor& parameter : module.parameters()) {
    if (!parameter.is_cpu() || parameter.numel() == 0) continue;
    parameters.push_back(parameter);
    total += RoundUp(parameter.nbytes(), kTensorAlignment);
  }
  HugePagePlacement placement;
  if (parameters.empty()) return placement;
  const int64_t block_bytes = RoundUp(total, kHugePageBytes);
  void* raw = std::aligned_alloc(kHugePageBytes, block_bytes);
  if (raw == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", block_bytes, " bytes for the model's weights"));
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the first touch, so that the copies below fault in huge pages directly.
  placement.advised = madvise(raw, block_bytes, MADV_HUGEPAGE) == 0;
#endif
  std::shared_ptr<void> block(raw, [](void* p) { std::free(p); });
  torch::NoGradGuard no_grad;
  char* next = static_cast<char*>(raw);
  for (torch::Tensor& parameter : parameters) {
    torch::Tensor home = torch::from_blob(
        next, parameter.sizes(), [block](void*) {}, parameter.options().requires_grad(false));
    home.copy_(parameter);
    parameter.set_data(home);  // the old storage is freed here (nothing else holds it)
    next += RoundUp(parameter.nbytes(), kTensorAlignment);
    placement.bytes += parameter.nbytes();
  }
  return placement;
}

}  // namespace lockstep
