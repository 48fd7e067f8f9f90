// The fp8_hybrid recipe's scaling state as a training device keeps it (models/fp8_recipe.h: the
// plan's "fp8.scaling" tensor; quant/fp8_scaling.h: its rows and rules): zero at the start, rolled
// after every optimizer step, and saved with the optimizer state in checkpoints under its own
// name, so a resumed run scales exactly as the uninterrupted one.
#pragma once

#include <optional>

#include "compiler/execution_plan.h"
#include "models/fp8_recipe.h"
#include "train/optim/optimizer.h"

namespace surogate::train {

struct Fp8State {
  models::Fp8ScalingState shape;
  graph::TensorId tensor = graph::kNoTensor;

  // The checkpoint's view of `values` (shape.floats() floats).
  StateTensor state_tensor(float* values) const {
    return StateTensor{shape.name, DType::F32, {shape.sites, shape.history + 2}, values,
                       static_cast<size_t>(shape.floats()) * sizeof(float)};
  }
};

// The plan's scaling state, or nullopt when it has none (any recipe but fp8_hybrid).
inline std::optional<Fp8State> fp8_state(const compiler::ExecutionPlan& plan) {
  const auto shape = models::fp8_scaling_state(plan.graph);
  if (!shape) return std::nullopt;
  return Fp8State{*shape, plan.tensor(shape->name)};
}

}  // namespace surogate::train
