// Device memory estimate of a training plan; see memory_budget.h.
#include "train/device/memory_budget.h"

#include <algorithm>

#include "compiler/memory_plan.h"

namespace surogate::train {

size_t training_state_bytes_per_element(const Config& config) {
  const size_t master = config.master_dtype == MasterDtype::Bf16 ? 0 : sizeof(float);
  const size_t accumulator = config.gradient_dtype == GradientDtype::Bf16 ? 2 : sizeof(float);
  size_t optimizer = 0;
  switch (config.optimizer) {
    case surogate::Optimizer::AdamW: optimizer = 2 * sizeof(float); break;
    case surogate::Optimizer::AdamW8bit: optimizer = 3; break;  // two bytes of state plus block scales, rounded up
    case surogate::Optimizer::NorMuon: optimizer = 2 * sizeof(float); break;  // momentum plus at most one second moment each
  }
  return master + accumulator + optimizer;
}

size_t plan_device_bytes(const compiler::ExecutionPlan& plan, const Config& config) {
  const compiler::MemoryPlan& memory = plan.memory;
  const size_t alignment = memory.alignment;
  size_t trainable = 0;
  for (const auto& [parameter, gradient] : plan.parameter_gradients) {
    trainable += static_cast<size_t>(plan.graph.tensor(parameter).type.numel());
  }
  return compiler::align_up(memory.arena_bytes, alignment) + compiler::align_up(memory.parameter_bytes, alignment) +
         compiler::align_up(memory.gradient_bytes, alignment) + compiler::align_up(memory.input_bytes, alignment) +
         trainable * training_state_bytes_per_element(config);
}

size_t device_reserve_bytes(size_t total_bytes) {
  return std::max<size_t>(size_t{3} << 30, total_bytes / 100 * 8);
}

}  // namespace surogate::train
