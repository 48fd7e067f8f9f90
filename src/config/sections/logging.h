// Configuration section: where metrics go (trackers, log file) and the debugging breakdowns.
// Fields are named exactly as their options in docs/configuration.md (config/config_fields.cpp
// maps each option to its field), with the documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config_enums.h"

namespace surogate::config {

struct Logging {
  std::vector<ReportTarget> report_to;
  std::optional<std::string> log_file;
  int64_t log_gpu_util = 100;
  std::string wandb_project = "Surogate";
  std::optional<std::string> wandb_name;
  std::string aim_experiment = "Surogate";
  std::optional<std::string> aim_repo;
  std::optional<std::string> aim_name;
  bool debug_time_breakdown = false;
  bool debug_memory_breakdown = false;
};

}  // namespace surogate::config
