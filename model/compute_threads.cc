#include "model/compute_threads.h"

#include <torch/torch.h>

// Declared weak: resolved when the process has OpenBLAS loaded (Debian's LibTorch links it),
// null otherwise (MKL or CUDA builds of LibTorch).
extern "C" void openblas_set_num_threads(int num_threads) __attribute__((weak));

namespace lockstep {

void SetComputeThreads(int threads) {
  if (threads > 0) torch::set_num_threads(threads);
  if (openblas_set_num_threads != nullptr) {
    openblas_set_num_threads(static_cast<int>(torch::get_num_threads()));
  }
}

}  // namespace lockstep
