// The rows of a finished run's summary: the table printed at the end, the `summary` record of the
// JSONL log and the HTML report's table.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "train/trainer.h"
#include "train/training_state.h"

namespace surogate::train {

using SummaryRows = std::vector<std::pair<std::string, std::string>>;

struct RunSummary {
  const Config* config = nullptr;
  const TrainingState* state = nullptr;
  const TrainingResult* result = nullptr;
  SummaryRows guard_rows;                 // the step guard's (skipped steps, loss scale)
  std::span<const RestartRecord> restarts;  // max_restarts' earlier attempts
  int64_t vocab_size = 0;                 // for the eval accuracy's chance level
  bool lora = false;
  std::string run_name;
};

SummaryRows run_summary_rows(const RunSummary& run);

// The start-up's phases (name, seconds) as the log's "startup" record and the line printed:
// "start-up 16.5 s (model config 0.1 s, data 2.0 s, ...)", phases under 0.05 s left out of the line.
struct StartupSummary {
  nlohmann::json record;
  std::string line;
};
StartupSummary startup_summary(std::span<const std::pair<std::string, double>> phases, double total_seconds);

}  // namespace surogate::train
