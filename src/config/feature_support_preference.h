// The preference-tuning rows of the feature-support table (feature_support_preference.cpp), added by
// feature_support_table() in its order.
#pragma once

#include <vector>

#include "config/feature_support.h"

namespace surogate {

void add_preference_rows(std::vector<SupportRow>& rows);

}  // namespace surogate
