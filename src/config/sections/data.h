// Configuration section: training data: datasets, how rows become token sequences (templates,
// lengths, packing).
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/sections/dataset.h"

namespace surogate::config {

struct Data {
  std::vector<DatasetConfig> datasets;
  int64_t train_seed = 1234;
  std::optional<int64_t> dataloader_num_workers;
  bool sample_packing = true;
  bool use_chat_template = true;
  std::optional<std::string> template_name;         // the option `template` (a C++ keyword)
  std::optional<std::string> system;
  std::optional<int64_t> max_length;                // resolved to sequence_len when unset
  TruncationStrategy truncation_strategy = TruncationStrategy::Delete;
  PaddingSide padding_side = PaddingSide::Right;
  bool padding_free = false;
  std::string loss_scale = "default";
  std::optional<std::string> response_prefix;
  std::optional<int64_t> max_pixels;
  std::optional<NormBbox> norm_bbox;
  std::optional<std::string> agent_template;
};

}  // namespace surogate::config
