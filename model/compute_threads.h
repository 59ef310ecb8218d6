// One call that sets the CPU thread count for everything the model computes with: LibTorch's
// intra-op pool and, where LibTorch runs on OpenBLAS (Debian's libtorch), OpenBLAS's own pool,
// which ignores torch::set_num_threads and otherwise spins a thread per core in every process.
#ifndef LOCKSTEP_MODEL_COMPUTE_THREADS_H_
#define LOCKSTEP_MODEL_COMPUTE_THREADS_H_

namespace lockstep {

// threads > 0: use that many. threads == 0: keep LibTorch's default and make OpenBLAS match it.
void SetComputeThreads(int threads);

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_COMPUTE_THREADS_H_
