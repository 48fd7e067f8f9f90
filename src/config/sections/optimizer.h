// Configuration section: the optimizer and its hyper-parameters.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include "config/config_enums.h"

namespace surogate::config {

struct Optimizer {
  surogate::Optimizer algorithm = surogate::Optimizer::AdamW8bit;  // the option `optimizer`
  double learning_rate = 2e-4;
  double weight_decay = 0.1;
  double max_grad_norm = 1.0;
  double adamw_beta1 = 0.9;
  double adamw_beta2 = 0.999;
  double adamw_epsilon = 1e-8;
  double normuon_momentum = 0.95;
  double normuon_beta2 = 0.95;
  bool normuon_cautious_wd = true;
};

}  // namespace surogate::config
