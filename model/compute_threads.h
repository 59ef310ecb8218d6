// One call that sets the CPU thread count for everything the model computes with: LibTorch's
// intra-op pool and, where LibTorch runs on OpenBLAS (Debian's libtorch), OpenBLAS's own pool,
// which ignores torch::set_num_threads and otherwise spins a thread per core in every process.
#ifndef LOCKSTEP_MODEL_COMPUTE_THREADS_H_
#define LOCKSTEP_MODEL_COMPUTE_THREADS_H_

#include <filesystem>
#include <vector>

namespace lockstep {

// threads > 0: use that many. threads == 0: DefaultComputeThreads(). OpenBLAS follows.
void SetComputeThreads(int threads);

// What threads == 0 means: LibTorch's current count when OMP_NUM_THREADS or MKL_NUM_THREADS is
// set (the user chose); otherwise the physical cores this process may run on, or LibTorch's
// count where the topology cannot be read. LibTorch itself asks cpuinfo, which counts 1 core on
// some VMs that have 2 (this project's CI machine among them), and ignores the affinity mask.
int DefaultComputeThreads();

// Physical cores among `cpus`, from the topology under `cpu_root` (normally
// /sys/devices/system/cpu): CPUs with the same thread_siblings_list are one core. 0 when a CPU's
// topology cannot be read.
int CountPhysicalCores(const std::filesystem::path& cpu_root, const std::vector<int>& cpus);

// CountPhysicalCores over the CPUs of this process's affinity mask (0 if unknown).
int AvailablePhysicalCores();

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_COMPUTE_THREADS_H_
