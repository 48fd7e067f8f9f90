// Where a run stands, as trainer_state.json holds it in every checkpoint: the optimizer steps
// done, the data loader's position, the seed, the schedule, and the per-step metrics so far
// (the HTML report of a resumed run still covers the whole run). Everything else a resumed run
// needs (weights, optimizer moments) lives in the checkpoint's safetensors files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "data/data_loader.h"

namespace surogate::train {

struct TrainingState {
  int64_t step = 0;                 // optimizer steps completed
  int64_t total_steps = 0;
  data::LoaderPosition loader;      // next micro-batch of the training loader
  uint64_t train_seed = 0;          // the loader's shuffle seed (its only randomness)
  nlohmann::json schedule;          // the LR schedule settings the run used
  nlohmann::json history = nlohmann::json::array();       // one object per optimizer step
  nlohmann::json eval_history = nlohmann::json::array();  // one object per evaluation
  nlohmann::json gpu_history = nlohmann::json::array();   // one "gpu" record per log_gpu_util sample
  int64_t skipped_steps = 0;                 // steps not applied (non-finite loss or gradient), whole run
  int64_t consecutive_nonfinite_steps = 0;   // non-finite steps since the last applied one
  nlohmann::json loss_scale;                 // fp16: the dynamic loss scale's state; null otherwise
  nlohmann::json objective;                  // the training mode's (TrainingObjective::checkpoint_state); null if none
};

nlohmann::json to_json(const TrainingState& state);
// Throws UserError naming `source` when a key is missing or has the wrong type.
TrainingState training_state_from_json(const nlohmann::json& json, const std::string& source);

TrainingState read_training_state(const std::filesystem::path& file);

}  // namespace surogate::train
