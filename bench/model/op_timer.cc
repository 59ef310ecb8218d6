#include "bench/model/op_timer.h"

namespace lockstep::bench {

void OpTimer::OnOutput(int64_t /*layer*/, Op op, const torch::Tensor& /*output*/,
                       const std::vector<int64_t>* /*token_rows*/) {
  const Clock::time_point now = Clock::now();
  seconds_[static_cast<int>(op)] += std::chrono::duration<double>(now - last_).count();
  ++calls_[static_cast<int>(op)];
  last_ = now;
}

double OpTimer::TotalSeconds() const {
  double total = 0;
  for (double s : seconds_) total += s;
  return total;
}

}  // namespace lockstep::bench
