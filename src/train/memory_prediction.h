// The memory a training run will need on its device, predicted from its execution plan before
// any weight is loaded: what `surogate sft|pt --dry-run` prints. The plan is the one the trainer
// would compile (train/training_plan.h: the same graph, the same recompute choice), for the GPU
// this machine has, for a GPU of `gpu_memory_bytes` (--gpu-memory), or for the CPU backend when
// no GPU is visible. By category: weights, master weights, optimizer state, gradients and their
// accumulators, activations, the batch, the LM head's workspace, the evaluator's forward arena and
// (CUDA) the context and libraries; their sum is the predicted peak. With `gpus: N` on GPUs the
// prediction is per GPU (GPU 0's, which also runs the evaluation): the optimizer state is the
// largest ZeRO-1 shard's. With offload_* options the offloaded categories are 0 on the device,
// the staging slots are a category of their own, the activations are the arena offload_residual
// leaves on the device, and the pinned host memory is reported beside the peak. When it does not
// fit, the options that would make it fit are tried on the plan itself (each alone, then
// together in order) and named.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace surogate::train {

struct MemoryPrediction {
  std::string device;                                    // what it was predicted for
  std::vector<std::pair<std::string, size_t>> categories;  // name, bytes; their sum is total_bytes
  size_t total_bytes = 0;                                // the categories' sum: the predicted peak
  size_t device_bytes = 0;                               // what the device offers in all
  size_t margin_bytes = 0;                               // kept free beyond the predicted peak
  int ranks = 1;                                         // CPU data-parallel rank threads
  int gpus = 1;                                          // data-parallel GPUs: the categories are per GPU
  bool shard_gradients = false;                          // ZeRO-2 (zero_level 2 / shard_gradients)
  bool fits = false;
  size_t host_offloaded_bytes = 0;                       // pinned host memory of the offload_* options (per GPU)
  std::string host_offloaded_by;                         // which options put it there ("offload_residual, ...")
  std::string recompute;                                 // the recompute choice's line
  std::vector<std::string> suggestions;                  // when it does not fit
};

MemoryPrediction predict_training_memory(const Config& config, std::optional<size_t> gpu_memory_bytes);

std::string format_memory_prediction(const MemoryPrediction& prediction);

}  // namespace surogate::train
