// Configuration section: evaluation: when it runs and on which rows.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <vector>

#include "config/sections/dataset.h"

namespace surogate::config {

struct Eval {
  int64_t eval_steps = 100;
  int64_t eval_seed = 1234;
  std::vector<DatasetConfig> validation_datasets;
  double validation_split_ratio = 0.1;
};

}  // namespace surogate::config
