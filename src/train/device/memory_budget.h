// Whether a training plan fits the device it will run on, judged before anything is allocated:
// the test the recompute choice asks (compiler/recompute_choice.h). A plan's own regions
// (activation arena, parameters, gradients, batch inputs) come from its memory plan; the
// per-trainable-parameter state (fp32 or bf16 master weights, gradient accumulators, optimizer
// state) from the configuration; and a reserve covers what is sized only when kernels are bound
// (attention and matmul workspaces, the LM head's chunks, the evaluator's forward arena) and the
// allocator's rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compiler/execution_plan.h"
#include "config/config.h"

namespace surogate::train {

// Bytes of device state per trainable element besides the plan's own gradient: master weights,
// gradient accumulators and optimizer state, as the CUDA training device lays them out (rounded up).
size_t training_state_bytes_per_element(const Config& config);

// What a plan needs on the GPU (plan regions + state of its trainable parameters).
size_t plan_device_bytes(const compiler::ExecutionPlan& plan, const Config& config);

// The reserve kept free for workspaces and the evaluator: 8% of the GPU's memory, at least 3 GiB.
size_t device_reserve_bytes(size_t total_bytes);

}  // namespace surogate::train
