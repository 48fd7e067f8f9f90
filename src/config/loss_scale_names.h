// The names the `loss_scale` option accepts (data/loss_scale.h implements them), checked when the
// configuration is loaded so that a misspelt name fails before any data is read.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace surogate {

const std::vector<std::string>& loss_scale_names();

// UserError naming the option's source and the known names (with a suggestion) for an unknown one.
void check_loss_scale_name(const Config& config);

}  // namespace surogate
