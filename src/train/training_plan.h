// The training step's execution plan for the device the run trains on: the forward graph
// compiled with the recompute the options allow and the device's memory requires
// (compiler/recompute_choice.h; apply_recommended_values lets it choose no recompute at all).
// The budget is the memory free on GPU 0 (CUDA) or available on the host (CPU) less a reserve
// for workspaces (train/device/memory_budget.h).
#pragma once

#include <string>

#include "compiler/recompute_choice.h"
#include "config/config.h"
#include "train/device/backend_selection.h"

namespace surogate::train {

// The recompute groups the configuration enables (recompute_* after the implications).
compiler::RecomputePolicy recompute_policy(const Config& config);

struct TrainingPlan {
  compiler::ExecutionPlan plan;
  compiler::RecomputeChoice recompute;
  size_t device_bytes = 0;     // what the plan and its trainable state need (memory_budget.h)
  size_t budget_bytes = 0;     // what the device offers for them
  std::string message;         // the line the trainer prints
};

TrainingPlan plan_training(const graph::Graph& forward, graph::TensorId loss, const graph::OpRegistry& registry,
                           const Config& config, int64_t layers, TrainingBackend backend, const MachineOffer& machine);

}  // namespace surogate::train
