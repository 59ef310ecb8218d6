// Learning-rate schedule: linear warm-up, then cosine decay to min_lr_ratio * lr or constant.
// Thread safety: pure function.
#ifndef LOCKSTEP_TRAINER_LR_SCHEDULE_H_
#define LOCKSTEP_TRAINER_LR_SCHEDULE_H_

#include <cstdint>

#include "trainer/trainer_options.h"

namespace lockstep::trainer {

// The learning rate of the optimizer step that follows `steps_done` completed steps (0-based),
// from options.lr, warmup_steps, schedule, total_steps and min_lr_ratio. See lr_schedule.cc for
// the formulas.
double LearningRateAt(const TrainerOptions& options, int64_t steps_done);

}  // namespace lockstep::trainer

#endif  // LOCKSTEP_TRAINER_LR_SCHEDULE_H_
