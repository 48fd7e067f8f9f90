// The GRPO rows of the feature-support table (feature_support_grpo.cpp), added by
// feature_support_table() in its order.
#pragma once

#include <vector>

#include "config/feature_support.h"

namespace surogate {

void add_grpo_rows(std::vector<SupportRow>& rows);

}  // namespace surogate
