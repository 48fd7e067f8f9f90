// Configuration section: saving and resuming checkpoints.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace surogate::config {

struct Checkpoint {
  std::optional<std::string> checkpoint_dir;        // resolved to output_dir when unset
  bool resume_from_checkpoint = false;
  int64_t save_steps = 50;
  int64_t save_total_limit = 5;
};

}  // namespace surogate::config
