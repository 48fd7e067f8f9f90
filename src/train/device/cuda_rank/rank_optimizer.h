// A CUDA rank's optimizer: the device optimizer (device_optimizer.h) over a run of the trainable
// tensors — all of them on one GPU, the rank's shard under ZeRO, a pipeline stage's owned ones —
// reading the gradient accumulators (gradient_accumulators.h) and stepping the fp32 masters
// (masters.h; with master_dtype bf16 the bf16 weights themselves). Its state lies on the GPU, in
// mapped host memory (offload_optimizer with use_zero_copy), or is staged through two GPU slots
// with the masters (staged_optimizer.h), as the rank's HostOffloadPlan says.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "config/sections/optimizer.h"
#include "models/model_spec.h"
#include "train/device/cuda_rank/gradient_accumulators.h"
#include "train/device/cuda_rank/masters.h"
#include "train/device/cuda_rank/trainable_layout.h"
#include "train/device/device_optimizer.h"
#include "train/device/host_offload_plan.h"

namespace surogate::train {

// The optimizer's view of the tensors of `run` (names, shapes, weight decay, the 16-bit weight it
// steps: `weights`, one per trainable tensor of the layout; none in an fp16 plan, whose weights
// follow the masters). Masters and gradients are bound by make_rank_optimizer.
std::vector<DeviceParameter> rank_optimizer_parameters(std::span<const models::ParameterSpec> specs,
                                                       const CudaTrainableLayout& layout, FlatRun run,
                                                       std::span<__nv_bfloat16* const> weights, bool fp16);

// The optimizer's GPU bytes (its state, or only NorMuon's workspaces when the state is offloaded,
// beside the plan's staging slots), for the out-of-memory check before anything is allocated.
size_t rank_optimizer_device_bytes(const config::Optimizer& optimizer, const HostOffloadPlan& offload,
                                   const std::vector<DeviceParameter>& parameters);

// The optimizer over `parameters` (the tensors of `run`), their masters (none with bf16 masters:
// `masters` absent) and accumulators bound; null when the run is empty. `seed` keys the stochastic
// rounding of bf16 masters (train_seed).
std::unique_ptr<DeviceOptimizer> make_rank_optimizer(const config::Optimizer& optimizer, uint64_t seed,
                                                     std::vector<DeviceParameter> parameters, FlatRun run,
                                                     const CudaTrainableLayout& layout, const HostOffloadPlan& offload,
                                                     CudaMasters& masters, CudaGradientAccumulators& accumulators);

}  // namespace surogate::train
