// What goes into a checkpoint folder and how it comes back:
//   model.safetensors      every parameter's fp32 master, engine names
//   optimizer.safetensors  the optimizer's state tensors (Optimizer::state_tensors)
//   trainer_state.json     TrainingState (step, loader position, seed, schedule, metrics)
// The folder itself is made atomic by CheckpointStore; restoring checks every tensor's name,
// dtype and size, so a checkpoint of another model or optimizer is a clear UserError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "train/optim/optimizer.h"
#include "train/training_state.h"

namespace surogate::train {

struct WeightView {
  std::string name;
  std::vector<int64_t> shape;
  std::span<float> values;
};

void write_checkpoint_files(const std::filesystem::path& folder, std::span<const WeightView> weights,
                            std::span<const StateTensor> optimizer_state, const TrainingState& state);

// Fills `weights` and `optimizer_state` from `folder` and returns its trainer state.
TrainingState restore_checkpoint(const std::filesystem::path& folder, std::span<const WeightView> weights,
                                 std::span<const StateTensor> optimizer_state);

}  // namespace surogate::train
