#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace lockstep::trainer {

double LearningRateAt(const TrainerOptions& options, int64_t steps_done) {
  const double base = options.lr;
  // Warm-up: lr * (s + 1) / W for s < W (the first step already moves).
  if (steps_done < options.warmup_steps) {
    return base * static_cast<double>(steps_done + 1) / static_cast<double>(options.warmup_steps);
  }
  if (options.schedule == ScheduleKind::kConstant) return base;
  // Cosine: progress p = (s - W) / (T - W) clamped to [0, 1];
  //   lr = base * (m + (1 - m) * (1 + cos(pi * p)) / 2),  m = min_lr_ratio.
  const int64_t decay_steps = std::max<int64_t>(1, options.total_steps - options.warmup_steps);
  const double progress = std::clamp(
      static_cast<double>(steps_done - options.warmup_steps) / static_cast<double>(decay_steps),
      0.0, 1.0);
  const double m = options.min_lr_ratio;
  return base * (m + (1.0 - m) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace lockstep::trainer
