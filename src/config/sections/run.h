// Configuration section: what the run is called, where it writes, and how it survives failures.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace surogate::config {

struct Run {
  std::optional<std::string> run_name;
  bool apply_recommended_values = false;
  std::string output_dir = "output";
  int64_t max_restarts = 0;         // addition: restarts from the latest good checkpoint after a failure
  int64_t max_nonfinite_steps = 1;  // addition: consecutive non-finite steps skipped before the run fails
};

}  // namespace surogate::config
