// The names the `loss_scale` and `agent_template` options accept (data/loss_scale.h and
// data/agent_template.h implement them), checked when the configuration is loaded so that a
// misspelt name fails before any data is read.
#pragma once

#include <string>
#include <vector>

#include "config/config_sources.h"
#include "config/sections/data.h"

namespace surogate {

const std::vector<std::string>& loss_scale_names();
// `react` is accepted too, as another name of react_en.
const std::vector<std::string>& agent_template_names();

// UserError naming the option's source and the known names (with a suggestion) for an unknown one.
void check_data_option_names(const config::Data& data, const ConfigSources& sources);

}  // namespace surogate
