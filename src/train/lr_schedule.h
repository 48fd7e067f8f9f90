// Learning-rate schedules: linear, cosine and warmup-stable-decay (wsd).
//
// Every schedule starts with a linear warmup from 0 to the peak rate over `warmup_steps`
// (step 0 already gets a non-zero rate: step s of warmup uses peak * (s + 1) / warmup_steps).
//   linear: decays linearly from the peak to final_lr_fraction * peak at the last step.
//   cosine: decays along half a cosine from the peak to final_lr_fraction * peak.
//   wsd:    holds the peak, then decays linearly to final_lr_fraction * peak over the last
//           `cooldown_steps` steps (the "cooldown").
#pragma once

#include <cstdint>
#include <string_view>

#include "config/sections/schedule.h"

namespace surogate::train {

enum class LrScheduleType { Linear, Cosine, Wsd };

struct LrScheduleSettings {
  LrScheduleType type = LrScheduleType::Linear;
  double peak_learning_rate = 2e-4;
  int64_t total_steps = 1;
  int64_t warmup_steps = 0;
  int64_t cooldown_steps = 0;      // wsd only
  double final_lr_fraction = 0.0;
};

class LrSchedule {
public:
  // Throws UserError when the settings cannot describe a schedule (e.g. warmup longer than
  // the run, cooldown with a schedule other than wsd).
  explicit LrSchedule(const LrScheduleSettings& settings);

  // Learning rate for optimizer step `step` (0-based). Steps past the end keep the final rate.
  double learning_rate(int64_t step) const;

  const LrScheduleSettings& settings() const { return settings_; }

private:
  LrScheduleSettings settings_;
};

// Warmup steps from the config: warmup_steps wins when positive, else warmup_ratio * total.
int64_t resolve_warmup_steps(int64_t warmup_steps, double warmup_ratio, int64_t total_steps);

// The configuration's schedule (lr_scheduler_type, warmup_steps / warmup_ratio, cooldown_steps,
// final_lr_fraction) of the peak `learning_rate` (the optimizer's) over a run of `total_steps`.
LrScheduleSettings lr_schedule_settings(const config::Schedule& schedule, double learning_rate, int64_t total_steps);

}  // namespace surogate::train
