// The `grpo` mapping's values on their own (config_rules.cpp's validate_config calls it): ranges
// and names as TRL's GRPOConfig checks them. Combinations this version does not run are refused by
// the feature-support table (feature_support_grpo.cpp).
#pragma once

#include "config/config.h"

namespace surogate {

// UserError naming the option (and where it was set) for the first value out of range.
void validate_grpo(const Config& config);

}  // namespace surogate
