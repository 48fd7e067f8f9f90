// Configuration section: how long the run is (epochs, steps, batch) and how the learning rate moves
// over it.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>

#include "config/config_enums.h"

namespace surogate::config {

struct Schedule {
  int64_t num_epochs = 3;
  int64_t per_device_train_batch_size = 2;
  int64_t gradient_accumulation_steps = 4;
  int64_t max_steps = -1;
  LrScheduler lr_scheduler_type = LrScheduler::Linear;
  double warmup_ratio = 0.0;
  int64_t warmup_steps = 0;
  int64_t cooldown_steps = 0;
  double final_lr_fraction = 0.0;
};

}  // namespace surogate::config
