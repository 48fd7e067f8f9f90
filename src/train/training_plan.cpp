// The training plan under the device's memory budget; see training_plan.h.
#include "train/training_plan.h"

#include <fmt/format.h>

#include "core/system_info.h"
#include "cuda/device_info.h"
#include "train/device/memory_budget.h"

namespace surogate::train {
namespace {

std::string gib(size_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1u << 30)); }

// Bytes the device offers the plan: free GPU memory (or available host memory) less the reserve.
size_t budget_bytes(TrainingBackend backend, const MachineOffer& machine) {
  size_t free_bytes = 0, total_bytes = 0;
  if (backend == TrainingBackend::Cuda) {
    free_bytes = cuda::gpu_free_bytes(0);
    total_bytes = machine.gpu_total_bytes;
  } else {
    const HostInfo host = query_host_info();
    free_bytes = host.memory_available_bytes;
    total_bytes = host.memory_total_bytes;
  }
  const size_t reserve = device_reserve_bytes(total_bytes);
  return free_bytes > reserve ? free_bytes - reserve : 0;
}

}  // namespace

compiler::RecomputePolicy recompute_policy(const Config& config) {
  compiler::RecomputePolicy policy;
  policy.rmsnorm = config.recompute_rmsnorm;
  policy.qkv = config.recompute_qkv;
  policy.att = config.recompute_att;
  policy.swiglu = config.recompute_swiglu;
  policy.ffn = config.recompute_ffn;
  policy.block = config.recompute_block;
  return policy;
}

TrainingPlan plan_training(const graph::Graph& forward, graph::TensorId loss, const graph::OpRegistry& registry,
                           const Config& config, int64_t layers, TrainingBackend backend, const MachineOffer& machine) {
  TrainingPlan result;
  result.budget_bytes = budget_bytes(backend, machine);
  // Without a measurable budget (a host that reports no memory) every plan is taken to fit.
  const size_t budget = result.budget_bytes;
  auto fits = [&](const compiler::ExecutionPlan& plan) {
    return budget == 0 || plan_device_bytes(plan, config) <= budget;
  };
  result.plan = compiler::compile_training_to_fit(forward, loss, registry, {recompute_policy(config), 256}, layers,
                                                  config.apply_recommended_values, fits, &result.recompute);
  result.device_bytes = plan_device_bytes(result.plan, config);
  const char* device = backend == TrainingBackend::Cuda ? "GPU" : "host";
  result.message = fmt::format("{}{}; needs {} of the {} {} offers", config.apply_recommended_values
                                   ? "apply_recommended_values: " : "",
                               result.recompute.summary, gib(result.device_bytes), gib(budget), device);
  return result;
}

}  // namespace surogate::train
