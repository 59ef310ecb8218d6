// Where a forward's time goes, op by op: a ForwardObserver that charges the time since the
// previous op's output (or since Mark()) to each op as its output arrives. Ops run synchronously
// on the CPU, so that is the op's own time plus whatever ran between the two taps (for the first
// op of a step: the step's set-up since Mark()).
#ifndef LOCKSTEP_BENCH_MODEL_OP_TIMER_H_
#define LOCKSTEP_BENCH_MODEL_OP_TIMER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "model/forward_observer.h"

namespace lockstep::bench {

class OpTimer : public ForwardObserver {
 public:
  // Starts the clock for the next op (call at the start of each timed step).
  void Mark() { last_ = Clock::now(); }

  void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                const std::vector<int64_t>* token_rows) override;

  // Seconds charged to `op` so far, over every layer and call.
  double Seconds(Op op) const { return seconds_[static_cast<int>(op)]; }
  // Outputs of `op` seen so far.
  int64_t Calls(Op op) const { return calls_[static_cast<int>(op)]; }
  double TotalSeconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_ = Clock::now();
  std::array<double, kNumOps> seconds_{};
  std::array<int64_t, kNumOps> calls_{};
};

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_MODEL_OP_TIMER_H_
