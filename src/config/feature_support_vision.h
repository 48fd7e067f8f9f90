// The vision-language rows of the feature-support table (feature_support_vision.cpp), added by
// feature_support_table() in its order. RunShape::vision_language says the model folder is one
// (vision/vision_model_folder.h decides; the train layer fills it in).
#pragma once

#include <vector>

#include "config/feature_support.h"

namespace surogate {

void add_vision_rows(std::vector<SupportRow>& rows);

}  // namespace surogate
