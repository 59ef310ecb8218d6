// One OpenMP region for a whole decode forward, instead of one per kernel call.
//
// Every kernel call that spreads over threads with at::parallel_for starts and ends an OpenMP
// region, and libgomp wakes its team with a futex system call at both, spinning workers or not:
// ~8 us a linear call in a b1 decode step on an AMD EPYC Zen 5 guest, where system calls are dear
// (bench/README.md): ~0.4 ms of a ~7.5 ms step over its ~50 calls. RunWithKernelTeam starts the
// region once: the calling thread runs the forward, and the region's other threads wait,
// spinning on an atomic word, for the parts that the kernels hand out with ParallelParts. The
// team is the OpenMP runtime's own threads (a pool of our own beside LibTorch's contended with its
// spinning workers for the cores: bench/README.md), and inside the region every other
// at::parallel_for runs inline on the calling thread, as LibTorch does for nested regions: the
// team is for forwards whose remaining ops are small (decode steps), not for prefill.
//
// Which thread computes a part never changes a kernel's bits (the kernels' contract), so the team
// changes speed only.
#ifndef LOCKSTEP_MODEL_KERNELS_KERNEL_TEAM_OPS_H_
#define LOCKSTEP_MODEL_KERNELS_KERNEL_TEAM_OPS_H_

#include <cstdint>
#include <functional>

namespace lockstep::kernels {

// Runs body() on the calling thread inside one OpenMP region of `threads` threads. Until body
// returns, ParallelParts called on this thread runs its parts on the region's threads. With
// threads < 2, inside a parallel region already, or with the team switched off
// (SetKernelTeamEnabled), body() just runs. An exception from body reaches the caller once the
// region has ended.
void RunWithKernelTeam(int threads, const std::function<void()>& body);

// Runs part(p) for every p in [0, parts), each exactly once, and returns when all have run: on the
// team that the calling thread leads (RunWithKernelTeam), part p on team thread p % team size,
// else through at::parallel_for (one p per task). `part` must not throw.
void ParallelParts(int64_t parts, const std::function<void(int64_t)>& part);

// How many threads ParallelParts spreads parts over from this thread: its team's size while it
// leads one, else at::get_num_threads().
int ParallelPartsThreads();

// Whether RunWithKernelTeam starts a team (on unless switched off; for tests and benchmarks that
// compare both).
void SetKernelTeamEnabled(bool enabled);

// How many teams RunWithKernelTeam has started in this process (for tests).
int64_t KernelTeamsStarted();

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_MODEL_KERNELS_KERNEL_TEAM_OPS_H_
