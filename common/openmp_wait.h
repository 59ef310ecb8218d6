// How a training process's OpenMP workers should wait. Training runs stock LibTorch ops on
// LibTorch's OpenMP team and matrix products on OpenBLAS's own pool (Debian's LibTorch links
// both). By default an OpenMP worker spins for milliseconds after each parallel region, on the
// cores OpenBLAS's threads need next; with OMP_WAIT_POLICY=PASSIVE it sleeps at once. libgomp
// reads the policy only when it loads, so whoever starts the process sets it: the orchestrator
// for its trainer service, bench_trainer for itself (by re-executing). bench_trainer, base preset,
// 2 threads, AMD EPYC Zen 4: batch_invariant 191.1 -> 223.1 tokens/s, fast 194.5 -> 237.6.
// Decode runs no second pool and is faster spinning (bench/README.md), so generators keep the
// default.
#ifndef LOCKSTEP_COMMON_OPENMP_WAIT_H_
#define LOCKSTEP_COMMON_OPENMP_WAIT_H_

#include <string>
#include <utility>
#include <vector>

namespace lockstep {

// What to add to a training process's environment: OMP_WAIT_POLICY=PASSIVE, or nothing when this
// process's environment already chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set: it passes on).
std::vector<std::pair<std::string, std::string>> TrainingOpenMpEnvironment();

// How this process's OpenMP workers wait: the OMP_WAIT_POLICY and GOMP_SPINCOUNT that are set,
// as NAME=VALUE, or "default (spin, then sleep)".
std::string OpenMpWaitPolicy();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_OPENMP_WAIT_H_
