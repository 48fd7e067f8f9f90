// The memory a training run will need on its device, predicted from its execution plan before
// any weight is loaded: what `surogate sft|pt --dry-run` prints. The plan is the one the trainer
// would compile (train/training_plan.h: the same graph, the same recompute choice), for the GPU
// this machine has, for a GPU of `gpu_memory_bytes` (--gpu-memory), or for the CPU backend when
// no GPU is visible. By category: weights, master weights, optimizer state, gradients and their
// accumulators, activations, the batch, the LM head's workspace, the evaluator's forward arena,
// `surogate grpo`'s rollout model (its KV cache and decode activations, grpo_rollout_model.h) and
// (CUDA) the context and libraries; their sum is the predicted peak. With `gpus: N` on GPUs the
// prediction is per GPU (GPU 0's, which also runs the evaluation): the optimizer state is the
// largest ZeRO-1 shard's; under ZeRO-3 the weights are the largest rank's shard, beside the
// per-layer gather buffers. With offload_* options the offloaded categories are 0 on the device,
// the staging slots are a category of their own, the activations are the arena offload_residual
// leaves on the device, and the pinned host memory is reported beside the peak. When it does not
// fit, the options that would make it fit are tried on the plan itself (each alone, then
// together in order) and named. A vision-language model's tower is planned from the training
// data's images (the token cache is built or reused, train/vision_memory_plan.h), and when the
// plan does not fit, the max_pixels that would is named first.
//
// With several ranks (gpus: N > 1, or a sequence or pipeline size set), every layout of those N
// ranks (data × sequence × pipeline, distributed/parallel_layout.h; not sequence and pipeline
// together, which is not built yet) is predicted the same way, with why a layout cannot train the
// model when it cannot (heads or layers that do not split, sequence_len not a multiple), and the
// one the engine picks: the first that fits of data parallelism alone (only gradients travel),
// then sequence parallelism with the fewest ranks per group (activations cross at every
// attention), then pipeline parallelism with the fewest stages (the bubble grows with the stages).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace surogate::train {

// One layout of the run's ranks, as the dry run predicts it.
struct LayoutPrediction {
  int data = 1, sequence = 1, pipeline = 1;
  size_t peak_bytes = 0;        // as MemoryPrediction::total_bytes: per GPU, or the host's for every CPU rank
  bool fits = false;
  bool configured = false;      // the layout the configuration sets
  std::string refusal;          // why this layout cannot train the model (empty: it can)
};

struct MemoryPrediction {
  std::string device;                                    // what it was predicted for
  std::vector<std::pair<std::string, size_t>> categories;  // name, bytes; their sum is total_bytes
  size_t total_bytes = 0;                                // the categories' sum: the predicted peak
  size_t device_bytes = 0;                               // what the device offers in all
  size_t margin_bytes = 0;                               // kept free beyond the predicted peak
  int ranks = 1;                                         // CPU data-parallel rank threads
  int gpus = 1;                                          // GPUs of the run: the categories are per GPU
  bool evaluation = false;                               // the run evaluates (config/config_rules.h evaluates)
  bool shard_gradients = false;                          // ZeRO-2 (zero_level 2 / shard_gradients)
  bool shard_weights = false;                            // ZeRO-3 over several ranks (zero_level 3 / shard_weights)
  bool pipeline = false;                                 // the categories are the largest stage's
  bool fits = false;
  size_t host_offloaded_bytes = 0;                       // pinned host memory of the offload_* options (per GPU,
  size_t host_per_process_bytes = 0;                     //   but these: offload_quants' image, one per process)
  std::string host_offloaded_by;                         // which options put it there ("offload_residual, ...")
  std::string recompute;                                 // the recompute choice's line
  std::vector<std::string> suggestions;                  // when it does not fit
  int layout_ranks = 1;                                  // the ranks the layouts divide
  std::vector<LayoutPrediction> layouts;                 // empty with one rank and no layout set
  std::optional<size_t> picked_layout;                   // index into layouts
  std::string breakdown;                                 // debug_memory_breakdown: the plan's report (else empty)
  std::string rollout;                                   // surogate grpo: what the rollout KV cache holds
  std::string rollout_hint;                              // and, unset, the larger generation batch that fits
  std::string vision;                                    // a vision-language model: the tower's patch count
};

MemoryPrediction predict_training_memory(const Config& config, std::optional<size_t> gpu_memory_bytes);

std::string format_memory_prediction(const MemoryPrediction& prediction);

}  // namespace surogate::train
