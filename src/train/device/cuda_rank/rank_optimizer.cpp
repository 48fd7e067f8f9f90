// A CUDA rank's optimizer; see rank_optimizer.h.
#include "train/device/cuda_rank/rank_optimizer.h"

#include <utility>

#include "core/error.h"
#include "train/device/staged_optimizer.h"

namespace surogate::train {

std::vector<DeviceParameter> rank_optimizer_parameters(std::span<const models::ParameterSpec> specs,
                                                       const CudaTrainableLayout& layout, FlatRun run,
                                                       std::span<__nv_bfloat16* const> weights, bool fp16) {
  std::vector<DeviceParameter> parameters;
  for (size_t i = run.first; i < run.end; ++i) {
    const CudaTrainable& entry = layout.entries[i];
    const models::ParameterSpec& spec = specs[entry.weight];
    DeviceParameter parameter;
    parameter.name = spec.name;
    parameter.rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
    parameter.cols = spec.shape.size() == 2 ? spec.shape[1] : entry.count;
    parameter.weight = weights[i];  // ZeRO-3: the rank's own copy (the plan's weight is a gather buffer)
    SUROGATE_CHECK(parameter.weight != nullptr, "a rank keeps the weights it steps");
    // fp16: the optimizer updates the fp32 masters only; the step rewrites the fp16 weights from them.
    if (fp16) parameter.weight = nullptr;
    parameter.apply_weight_decay = applies_weight_decay(spec.name);
    parameter.is_hidden_matrix = is_hidden_matrix(spec.name, spec.shape);
    parameters.push_back(std::move(parameter));
  }
  return parameters;
}

size_t rank_optimizer_device_bytes(const config::Optimizer& optimizer, const HostOffloadPlan& offload,
                                   const std::vector<DeviceParameter>& parameters) {
  if (parameters.empty()) return 0;
  // Offloaded state takes no GPU memory but NorMuon's workspaces.
  if (!offload.optimizer) return device_optimizer_bytes(optimizer, parameters);
  return optimizer.algorithm == surogate::Optimizer::NorMuon ? device_normuon_workspace_bytes(parameters) : 0;
}

std::unique_ptr<DeviceOptimizer> make_rank_optimizer(const config::Optimizer& optimizer, uint64_t seed,
                                                     std::vector<DeviceParameter> parameters, FlatRun run,
                                                     const CudaTrainableLayout& layout, const HostOffloadPlan& offload,
                                                     CudaMasters& masters, CudaGradientAccumulators& accumulators) {
  // A staged optimizer takes the masters' host addresses (it copies them into its slots).
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t offset = layout.entries[run.first + i].offset;
    if (masters.present()) parameters[i].master = masters.at(offset, offload.staged);
    if (accumulators.dtype() == DType::BF16) parameters[i].gradient_bf16 = accumulators.bf16_at(offset);
    else parameters[i].gradient = accumulators.fp32_at(offset);
  }
  if (parameters.empty()) return nullptr;
  if (offload.staged) {
    float* host_masters = masters.present() ? masters.host() : nullptr;
    return make_staged_optimizer(optimizer, seed, std::move(parameters), offload, host_masters);
  }
  const StateMemory memory{offload.optimizer ? StateMemory::Place::HostMapped : StateMemory::Place::Device,
                           offload.write_combined, nullptr};
  return make_device_optimizer(optimizer, seed, std::move(parameters), memory);
}

}  // namespace surogate::train
