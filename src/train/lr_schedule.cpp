#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace surogate::train {

LrSchedule::LrSchedule(const LrScheduleSettings& settings) : settings_(settings) {
  if (settings.total_steps <= 0) fail_user("the run has {} optimizer steps; it needs at least one", settings.total_steps);
  if (settings.warmup_steps < 0 || settings.warmup_steps > settings.total_steps) {
    fail_user("warmup_steps is {} but the run has {} optimizer steps: use a warmup no longer than the run",
              settings.warmup_steps, settings.total_steps);
  }
  if (settings.cooldown_steps < 0) fail_user("cooldown_steps must not be negative (got {})", settings.cooldown_steps);
  if (settings.cooldown_steps > 0 && settings.type != LrScheduleType::Wsd) {
    fail_user("cooldown_steps only applies to lr_scheduler_type: wsd (linear and cosine already decay "
              "over the whole run); remove cooldown_steps or use wsd");
  }
  if (settings.warmup_steps + settings.cooldown_steps > settings.total_steps) {
    fail_user("warmup ({} steps) plus cooldown_steps ({}) exceed the {} optimizer steps of the run",
              settings.warmup_steps, settings.cooldown_steps, settings.total_steps);
  }
  if (settings.final_lr_fraction < 0.0 || settings.final_lr_fraction > 1.0) {
    fail_user("final_lr_fraction must be between 0 and 1 (got {})", settings.final_lr_fraction);
  }
}

double LrSchedule::learning_rate(int64_t step) const {
  const auto& s = settings_;
  const double peak = s.peak_learning_rate;
  const double final_rate = s.final_lr_fraction * peak;
  step = std::clamp<int64_t>(step, 0, s.total_steps - 1);
  if (step < s.warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);

  // Progress through the decay phase, 0 at its first step and 1 at the run's last step.
  auto progress = [&](int64_t decay_start) {
    int64_t decay_steps = s.total_steps - decay_start;
    if (decay_steps <= 1) return 1.0;
    return static_cast<double>(step - decay_start) / static_cast<double>(decay_steps - 1);
  };

  switch (s.type) {
    case LrScheduleType::Linear:
      return peak + (final_rate - peak) * progress(s.warmup_steps);
    case LrScheduleType::Cosine: {
      double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress(s.warmup_steps)));
      return final_rate + (peak - final_rate) * cosine;
    }
    case LrScheduleType::Wsd: {
      int64_t cooldown_start = s.total_steps - s.cooldown_steps;
      if (s.cooldown_steps == 0 || step < cooldown_start) return peak;
      // The first cooldown step is already below the peak; the last one reaches the final rate.
      double fraction = static_cast<double>(step - cooldown_start + 1) / static_cast<double>(s.cooldown_steps);
      return peak + (final_rate - peak) * fraction;
    }
  }
  return peak;
}

int64_t resolve_warmup_steps(int64_t warmup_steps, double warmup_ratio, int64_t total_steps) {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

LrScheduleSettings lr_schedule_settings(const config::Schedule& schedule, double learning_rate, int64_t total_steps) {
  LrScheduleType type = LrScheduleType::Linear;
  if (schedule.lr_scheduler_type == LrScheduler::Cosine) type = LrScheduleType::Cosine;
  if (schedule.lr_scheduler_type == LrScheduler::Wsd) type = LrScheduleType::Wsd;
  return {type, learning_rate, total_steps,
          resolve_warmup_steps(schedule.warmup_steps, schedule.warmup_ratio, total_steps), schedule.cooldown_steps,
          schedule.final_lr_fraction};
}

}  // namespace surogate::train
