#include "model/compute_threads.h"

#include <sched.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

// Declared weak: resolved when the process has OpenBLAS loaded (Debian's LibTorch links it),
// null otherwise (MKL or CUDA builds of LibTorch).
extern "C" void openblas_set_num_threads(int num_threads) __attribute__((weak));

namespace lockstep {

int CountPhysicalCores(const std::filesystem::path& cpu_root, const std::vector<int>& cpus) {
  std::set<std::string> cores;
  for (int cpu : cpus) {
    std::ifstream in(cpu_root / ("cpu" + std::to_string(cpu)) / "topology" /
                     "thread_siblings_list");
    std::string siblings;
    if (!std::getline(in, siblings) || siblings.empty()) return 0;
    cores.insert(siblings);
  }
  return static_cast<int>(cores.size());
}

int AvailablePhysicalCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return CountPhysicalCores("/sys/devices/system/cpu", cpus);
}

int DefaultComputeThreads() {
  const int libtorch = static_cast<int>(torch::get_num_threads());
  if (std::getenv("OMP_NUM_THREADS") != nullptr || std::getenv("MKL_NUM_THREADS") != nullptr) {
    return libtorch;
  }
  const int cores = AvailablePhysicalCores();
  return cores > 0 ? cores : libtorch;
}

void SetComputeThreads(int threads) {
  torch::set_num_threads(threads > 0 ? threads : DefaultComputeThreads());
  if (openblas_set_num_threads != nullptr) {
    openblas_set_num_threads(static_cast<int>(torch::get_num_threads()));
  }
}

}  // namespace lockstep
