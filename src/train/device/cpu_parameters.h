// What a CPU training device (one rank, or each rank of a data-parallel world) builds on its
// loaded CpuBackend: host views of every parameter (the backend's own fp32 buffers, which are
// the masters), the gradients of the trainable ones, and the optimizer slots over them.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "config/config.h"
#include "models/model_spec.h"
#include "runtime/cpu_backend.h"
#include "train/checkpoint_io.h"
#include "train/optim/optimizer.h"

namespace surogate::train {

struct CpuParameters {
  std::vector<WeightView> weights;                // every spec, in order
  std::vector<WeightView> trainable;              // those with a gradient in the plan
  std::vector<std::span<const float>> gradients;  // one per trainable
  std::vector<ParameterSlot> slots;               // one per trainable: master, gradient, shape, flags
};

// UserError-free: the specs come from the same model as the plan.
CpuParameters bind_cpu_parameters(runtime::CpuBackend& backend, const compiler::ExecutionPlan& plan,
                                  std::span<const models::ParameterSpec> specs);

// The configured optimizer (adamw, adamw_8bit, normuon) over `slots`.
std::unique_ptr<Optimizer> make_cpu_optimizer(const config::Optimizer& optimizer,
                                              std::span<const ParameterSlot> slots);

// Scales the slots' gradients by `gradient_scale` (fp16: 1 / the loss scale; `grad_norm` is the
// norm before it) and by the clip coefficient of the scaled norm, in one pass (no-op when both are
// 1: max_grad_norm 0 or the norm within it).
void clip_slot_gradients(std::span<const ParameterSlot> slots, double grad_norm, double max_grad_norm,
                         double gradient_scale = 1.0);

}  // namespace surogate::train
