// One GPU's training state: what the single-GPU device (cuda_training_device.cpp) holds, what each
// rank of the data-parallel ranks (parallel/cuda_rank_host.cpp) and each pipeline stage
// (parallel/cuda_rank_plans.h) holds on its GPU. It is composed of pieces of one job each
// (cuda_rank/), which the rank engines use directly:
//   - the CudaBackend with the loaded bf16 plan (weights, one micro-batch's bf16 gradients, arena),
//     or an fp16 plan (torch_dtype: float16: fp16 weights and gradients; fp32 masters and
//     accumulators, the optimizer stepping the masters only and step() rewriting the fp16 weights
//     from them; one GPU, no ZeRO, no offloading of masters or accumulators);
//   - the flat layout of the trainable tensors (cuda_rank/trainable_layout.h);
//   - masters(): the fp32 masters (cuda_rank/masters.h; absent with master_dtype bf16; under ZeRO-3
//     those of the optimizer's tensors only);
//   - accumulators(): the gradient accumulators (cuda_rank/gradient_accumulators.h: fp32, or bf16
//     with gradient_dtype bf16; under ZeRO-2/3 those of the optimizer's tensors only, filled with
//     reduced pieces: sharded_gradients.h);
//   - clip(): the gradient norm and its clip factor on the device (cuda_rank/gradient_clip.h);
//   - optimizer(): the device optimizer for a contiguous run of the trainable tensors — all of
//     them on one GPU, a rank's shard under ZeRO (cuda_rank/rank_optimizer.h);
//   - with offload_master / offload_grads / offload_optimizer, the masters, the accumulators or
//     the optimizer state in pinned host memory instead (host_offload_plan.h);
//   - the loss of each micro-batch (cuda_rank/loss_readback.h);
//   - fp8_hybrid full fine-tuning: the FP8 copies of the trained weights (train/fp8_weight_copies.h),
//     rewritten from the bf16 weights by refresh_fp8_weight_copies() once per optimizer step;
//   - ZeRO-3 (a CudaWeightShard given): the plan's weights lie in gather buffers, the rank keeps
//     its pieces in the shard's owned buffer, and the optimizer writes the bf16 weights it steps
//     there.
// Everything is enqueued on the backend's stream; the object is made, used and destroyed on a
// thread whose current CUDA device is the one it lives on. It holds no host copy of the weights:
// those belong to the device that owns it (rank 0's host views in data parallelism).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_rank/gradient_accumulators.h"
#include "train/device/cuda_rank/gradient_clip.h"
#include "train/device/cuda_rank/loss_readback.h"
#include "train/device/cuda_rank/masters.h"
#include "train/device/cuda_rank/trainable_layout.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/device_optimizer.h"
#include "train/device/host_offload_plan.h"
#include "train/device/shard_publish.h"
#include "train/device/training_device.h"
#include "train/fp8_weight_copies.h"

namespace surogate::train {

class CudaRankState {
public:
  // Loads the plan on the current device and allocates the flat buffers and the optimizer for the
  // trainable tensors [first, end) of `layout` (none when first == end), after checking that they
  // fit in the free memory (UserError naming what takes the room and what would help).
  // `shard` (ZeRO-3; null otherwise) must outlive the state. `shard_accumulators` (ZeRO-2/3): the
  // accumulators cover [first, end) only, a contiguous run of the flat layout.
  CudaRankState(const TrainingDeviceSetup& setup, const CudaTrainableLayout& layout, size_t first, size_t end,
                const CudaWeightShard* shard = nullptr, bool shard_accumulators = false);
  CudaRankState(const CudaRankState&) = delete;
  CudaRankState& operator=(const CudaRankState&) = delete;

  runtime::CudaBackend& backend() { return backend_; }
  cudaStream_t stream() const { return backend_.stream(); }
  bool bf16_master() const { return bf16_master_; }
  bool bf16_gradients() const { return bf16_gradients_; }
  bool fp16() const { return fp16_; }  // an fp16 plan (torch_dtype: float16)
  const HostOffloadPlan& offload() const { return offload_; }

  // The pieces. The data-parallel device refuses offload_master and offload_grads, so its ZeRO
  // collectives run on GPU buffers.
  CudaMasters& masters() { return masters_; }
  CudaGradientAccumulators& accumulators() { return *accumulators_; }
  CudaGradientClip& clip() { return *clip_; }
  DeviceOptimizer* optimizer() { return optimizer_.get(); }  // null when the shard is empty

  // One micro-batch: execute (bf16 gradients), add them into the accumulators, copy its loss to
  // the host asynchronously. At most gradient_accumulation_steps calls between two loss_sum().
  // `add_gradients` false: a step observer adds them during the execute (gradient buckets).
  void accumulate(std::span<const runtime::InputBinding> inputs, bool add_gradients = true);
  // The summed losses of the micro-batches since the last call (after synchronize()); MoE plans
  // with the router loss also sum its outputs, read by router_aux_loss_sum() after loss_sum().
  double loss_sum() { return losses_->sum(); }
  std::optional<double> router_aux_loss_sum() const { return losses_->router_aux_loss_sum(); }

  // Enqueues the norm of the accumulated gradients of tensors [first, end) and its clip factor
  // (clip().norm() after synchronize()).
  void gradient_norm(size_t first, size_t end) { clip_->measure(*accumulators_, first, end); }
  // The optimizer's step for its tensors (gradients scaled by the clip factor); nothing if none. An
  // fp16 plan's weights are then rewritten from the masters.
  void step(const OptimizerStep& step);
  void synchronize();

  // fp8_hybrid full fine-tuning: every trained weight's FP8 copy rewritten from its bf16 weight
  // (cuda::fp8_quantize_weight); nothing without such weights. After the weights change: upload,
  // optimizer step, all-gather.
  void refresh_fp8_weight_copies();

  // Host → device: every weight rounded to bf16 (fp16 in an fp16 plan; `weights` in spec order), the fp32 masters from
  // the trainable ones; the optimizer state is not touched. Waits for the copies.
  void upload_weights(std::span<const WeightView> weights);
  // Device → host: the trainable weights (fp32 masters, or the bf16 weights widened exactly).
  // Waits for the copies.
  void download_trainable(std::span<const WeightView> weights);

private:
  const CudaTrainableLayout& layout_;
  const CudaWeightShard* shard_ = nullptr;
  bool bf16_master_, bf16_gradients_, fp16_;
  runtime::CudaBackend backend_;
  HostOffloadPlan offload_;
  cuda::GradientCounts counts_;  // the trainable tensors' element counts (and their accumulate chunks)
  std::optional<CudaLossReadback> losses_;
  CudaMasters masters_;
  std::optional<CudaGradientAccumulators> accumulators_;
  std::optional<CudaGradientClip> clip_;
  std::unique_ptr<DeviceOptimizer> optimizer_;
  std::vector<Fp8WeightCopy> fp8_copies_;
  cuda::DeviceBuffer<float> fp8_amax_;  // fp8_quantize_weight's scratch
};

// ZeRO-1's publish (shard_publish.h) on a GPU rank: its fp32 masters are the flat buffer, which the
// optimizer updated in place, and the other ranks' units get their bf16 weights rewritten from
// them. Unit u is the state's trainable entry `first_entry` + u.
ShardCopies cuda_shard_copies(CudaRankState& state, size_t first_entry = 0);

// UserError (naming `gpus_source`, the `gpus` setting) unless GPUs first_device … first_device +
// count − 1 are visible: a multi-GPU device's ranks, before any of them loads.
void check_visible_gpus(int first_device, int count, const std::string& gpus_source);

}  // namespace surogate::train
