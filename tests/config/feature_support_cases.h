// What the feature-support tests share: a row's case (the row it must fire, at which stage, with a
// phrase of its message) and the run shapes and configurations the cases start from.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/feature_support.h"

namespace surogate::feature_support_test {

struct RowCase {
  std::string row;
  SupportStage stage;
  std::function<void(Config&, RunShape&)> set;
  std::string phrase;  // a part of the message
};

inline RunShape cpu() { return {.backend = SupportBackend::Cpu}; }

inline RunShape cuda(int ranks = 1) {
  return {.backend = SupportBackend::Cuda, .world_size = ranks, .layout_description = "2 data-parallel ranks, ZeRO-1"};
}

// A `surogate grpo` run every GRPO row accepts: prompt data, a reward, whole groups per step.
inline void make_grpo(Config& c) {
  c.grpo.enabled = true;
  c.grpo.num_generations = 2;
  c.grpo.reward_functions = {"exact_match"};
  c.schedule.per_device_train_batch_size = 2;
  c.data.datasets[0].type = DatasetType::Prompt;
}

// The rows of the training modes (dpo, kto, grpo): test_feature_support_modes.cpp.
std::vector<RowCase> training_mode_row_cases();
// The vision-language rows' (test_feature_support_vision.cpp).
std::vector<RowCase> vision_row_cases();

}  // namespace surogate::feature_support_test
