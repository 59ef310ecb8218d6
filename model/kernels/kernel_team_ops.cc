#include "model/kernels/kernel_team_ops.h"

#include <ATen/Parallel.h>
#include <omp.h>

#include <atomic>
#include <exception>
#include <thread>

namespace lockstep::kernels {
namespace {

// Pause-spins before a waiting worker starts yielding its core between looks (~1-3 ms): a decode
// step's serial stretches are tens of microseconds, but a forward may run on a machine with more
// processes than cores.
constexpr int kSpinsBeforeYield = 1 << 16;

inline void Pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

struct Team {
  int threads = 1;  // the region's, set by the leader before the first job
  // Bumped (release) by the leader for each job and once more to stop; workers run a job when
  // they see it move.
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  std::atomic<int> busy_workers{0};  // workers still running the current job
  const std::function<void(int64_t)>* job = nullptr;
  int64_t parts = 0;
};

thread_local Team* leading = nullptr;
std::atomic<bool> enabled{true};
std::atomic<int64_t> teams_started{0};

void RunParts(const Team& team, int thread) {
  for (int64_t p = thread; p < team.parts; p += team.threads) (*team.job)(p);
}

void Work(Team& team, int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = team.generation.load(std::memory_order_acquire);
    for (int spins = 0; now == seen; now = team.generation.load(std::memory_order_acquire)) {
      if (spins < kSpinsBeforeYield) {
        ++spins;
        Pause();
      } else {
        std::this_thread::yield();
      }
    }
    seen = now;
    if (team.stop.load(std::memory_order_acquire)) return;
    RunParts(team, thread);
    team.busy_workers.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace

void RunWithKernelTeam(int threads, const std::function<void()>& body) {
  if (threads < 2 || leading != nullptr || omp_in_parallel() ||
      !enabled.load(std::memory_order_relaxed)) {
    body();
    return;
  }
  Team team;
  std::exception_ptr error;
  teams_started.fetch_add(1, std::memory_order_relaxed);
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
    if (thread == 0) {
      team.threads = omp_get_num_threads();
      leading = &team;
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      leading = nullptr;
      team.stop.store(true, std::memory_order_relaxed);
      team.generation.fetch_add(1, std::memory_order_release);
    } else {
      Work(team, thread);
    }
  }
  if (error) std::rethrow_exception(error);
}

void ParallelParts(int64_t parts, const std::function<void(int64_t)>& part) {
  Team* team = leading;
  if (team == nullptr) {
    at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) part(p);
    });
    return;
  }
  if (parts <= 1 || team->threads < 2) {
    for (int64_t p = 0; p < parts; ++p) part(p);
    return;
  }
  team->job = &part;
  team->parts = parts;
  team->busy_workers.store(team->threads - 1, std::memory_order_relaxed);
  team->generation.fetch_add(1, std::memory_order_release);
  RunParts(*team, 0);
  while (team->busy_workers.load(std::memory_order_acquire) != 0) Pause();
}

int ParallelPartsThreads() {
  return leading != nullptr ? leading->threads : at::get_num_threads();
}

void SetKernelTeamEnabled(bool on) { enabled.store(on, std::memory_order_relaxed); }

int64_t KernelTeamsStarted() { return teams_started.load(std::memory_order_relaxed); }

}  // namespace lockstep::kernels
