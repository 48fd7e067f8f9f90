// One GPU's training state: what the single-GPU device (cuda_training_device.cpp) holds, and what
// each rank of the data-parallel device (parallel/cuda_data_parallel_ranks.cpp) holds on its GPU.
//   - the CudaBackend with the loaded bf16 plan (weights, one micro-batch's bf16 gradients, arena),
//     or an fp16 plan (torch_dtype: float16: fp16 weights and gradients; fp32 masters and
//     accumulators, the optimizer stepping the masters only and step() rewriting the fp16 weights
//     from them; one GPU, no ZeRO, no offloading of masters or accumulators);
//   - the flat buffers of the trainable tensors (CudaTrainableLayout: spec order, each tensor's
//     start rounded up to 4 elements): fp32 masters (absent with master_dtype bf16) and the
//     gradient accumulators (fp32, or bf16 with gradient_dtype bf16; under ZeRO-2/3 those of the
//     optimizer's tensors only, filled with reduced pieces: sharded_gradients.h);
//   - the device optimizer (device_optimizer.h) for a contiguous run of the trainable tensors:
//     all of them on one GPU, a rank's shard under ZeRO-1;
//   - with offload_master / offload_grads / offload_optimizer, the masters, the accumulators or
//     the optimizer state in pinned host memory instead (host_offload_plan.h): the kernels reach
//     them through the mapping, or the optimizer stages them through two GPU slots
//     (staged_optimizer.h);
//   - the loss of each micro-batch (pinned, copied asynchronously) and the gradient norm with
//     its clip factor (on the device, read by the optimizer kernels);
//   - fp8_hybrid full fine-tuning: the FP8 copies of the trained weights (train/fp8_weight_copies.h),
//     rewritten from the bf16 weights by refresh_fp8_weight_copies() once per optimizer step;
//   - ZeRO-3 (a CudaWeightShard given): the plan's weights lie in gather buffers, the rank keeps
//     its pieces in the shard's owned buffer, and the masters cover the optimizer's tensors only
//     (the optimizer writes the bf16 weights it steps into the owned buffer).
// Everything is enqueued on the backend's stream; the object is made, used and destroyed on a
// thread whose current CUDA device is the one it lives on. It holds no host copy of the weights:
// those belong to the device that owns it (rank 0's host views in data parallelism).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "cuda/host_registration.h"
#include "cuda/kernels/gradient_accumulate.h"
#include "runtime/cuda_backend.h"
#include "train/device/cuda_weight_gatherer.h"
#include "train/device/device_optimizer.h"
#include "train/device/host_offload_plan.h"
#include "train/device/shard_publish.h"
#include "train/device/training_device.h"
#include "train/fp8_weight_copies.h"

namespace surogate::train {

struct CudaTrainable {
  size_t weight;               // index into the specs (and the device's host weights)
  graph::TensorId parameter;   // the bf16 (fp16) weight in the plan
  graph::TensorId gradient;    // its bf16 (fp16) gradient
  int64_t offset;              // into the flat master and accumulator buffers
  int64_t count;
};

// Where every parameter lives, from the plan alone (no device needed): UserError if a parameter
// is not bf16 or fp16, or the parameters' dtypes differ.
struct CudaTrainableLayout {
  std::vector<graph::TensorId> ids;     // every spec's tensor in the plan, in spec order
  std::vector<CudaTrainable> entries;   // the trainable ones, in spec order
  int64_t total = 0;                    // elements of the flat buffers
  DType dtype = DType::BF16;            // the parameters' dtype: BF16, or F16 (fp16 training)
  // Each trainable tensor's elements in the flat buffers, padding included (what shards split).
  std::vector<size_t> unit_sizes() const;
  // The trainable tensors [first, end) as the host-offload plan sees them.
  std::vector<TrainableExtent> extents(size_t first, size_t end) const;
};
CudaTrainableLayout cuda_trainable_layout(const compiler::ExecutionPlan& plan, std::span<const models::ParameterSpec> specs);

// The host fp32 copies a CUDA training device shows the trainer (weights(), trainable()), one per
// spec. Uninitialised: every value is written (loaded, initialised or restored) before upload(),
// and zeroing 32 GB of an 8B model's host copies took ~15 s of start-up.
// The trainable ones are page-locked (cuda/host_registration.h): checkpoints download into them.
struct CudaHostWeights {
  std::vector<std::unique_ptr<float[]>> values;
  std::vector<WeightView> weights, trainable;
  std::vector<cuda::HostRegistration> pinned;
};
CudaHostWeights cuda_host_weights(std::span<const models::ParameterSpec> specs, const CudaTrainableLayout& layout);

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
  DeviceOptimizer* optimizer() { return optimizer_.get(); }  // null when the shard is empty

  const HostOffloadPlan& offload() const { return offload_; }

  // The flat buffers (ZeRO collectives run on them): masters (null with bf16 masters) and the
  // accumulators, whose dtype is F32 or BF16 (sharded: the first one's start is the shard's). On the GPU (the data-parallel device refuses
  // offload_master and offload_grads).
  float* masters() { return masters_; }
  // The fp32 master of trainable tensor `index` (device or mapped host address); under ZeRO-3
  // only the optimizer's tensors have one.
  float* master(size_t index);
  void* accumulators();
  DType accumulator_dtype() const { return bf16_gradients_ ? DType::BF16 : DType::F32; }

  // One micro-batch: execute (bf16 gradients), add them into the accumulators, copy its loss to
  // the host asynchronously. At most gradient_accumulation_steps calls between two loss_sum().
  // `add_gradients` false: a step observer adds them during the execute (gradient buckets).
  void accumulate(std::span<const runtime::InputBinding> inputs, bool add_gradients = true);
  // The micro-batch's bf16 gradients of trainable tensors [first, end) added into the accumulators
  // (and zeroed), on the backend's stream. Not with sharded accumulators.
  void add_gradients(size_t first, size_t end);
  // The accumulators' bytes on the device (or in host memory with offload_grads).
  size_t accumulator_bytes() const;
  // The summed losses of the micro-batches since the last call (after synchronize()); MoE plans
  // with the router loss also sum its outputs, read by router_aux_loss_sum() after loss_sum().
  double loss_sum();
  std::optional<double> router_aux_loss_sum() const { return router_aux_loss_sum_; }

  // Enqueues the global L2 norm of the accumulated gradients of tensors [first, end) and the
  // clip factor for max_grad_norm (both on the device, and copied to the host: norm() after
  // synchronize()).
  void gradient_norm(size_t first, size_t end);
  float norm() const { return norm_.data[0]; }
  // Sets the device clip factor from a norm computed elsewhere (ZeRO-2: the ranks' shards
  // together), with global_grad_norm's formula.
  void set_clip_factor(double norm);
  const float* clip_factor() const { return norm_result_.data() + 1; }
  // fp16 loss scaling: the device factor becomes gradient_scale (1 / the loss scale) times the clip
  // coefficient of the unscaled norm (norm() · gradient_scale), as the CPU device's
  // clip_slot_gradients applies them in one pass. After synchronize(), before step().
  void scale_clip_factor(double gradient_scale);

  // The optimizer's step for its tensors (gradients scaled by clip_factor()); nothing if none. An
  // fp16 plan's weights are then rewritten from the masters (refresh_weights_from_masters).
  void step(const OptimizerStep& step);
  void zero_accumulators();
  // From now on zero_accumulators() only marks the accumulators stale: the next add_gradients over
  // every tensor overwrites them (no memset before it and no accumulator read in it: 8 bytes per
  // trained parameter and step), and a reader before that (accumulators(), gradient_norm, step, a
  // partial add_gradients) zeroes them first. Only where add_gradients runs outside the backend's
  // captured graph (the single-GPU device): a capture would bake the one-time choice into every replay.
  void defer_zeroing() { defer_zeroing_ = true; }
  // The bf16 weights of tensors [first, end) rewritten from their fp32 masters (round to nearest
  // even, as the optimizer kernels write them).
  void refresh_weights_from_masters(size_t first, size_t end);
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
  void check_free_memory(size_t optimizer_bytes) const;
  // The memset zero_accumulators() deferred, if it is still owed (defer_zeroing).
  void zero_stale_accumulators();

  const Config& config_;
  const CudaTrainableLayout& layout_;
  const CudaWeightShard* shard_ = nullptr;
  int64_t master_base_ = 0;   // the first master's offset in the flat layout (ZeRO-3: the shard's start)
  int64_t master_count_ = 0;  // the masters' elements (the whole layout's, or ZeRO-3's shard's)
  int64_t accumulator_base_ = 0;   // likewise for the accumulators (ZeRO-2/3: the shard's start)
  int64_t accumulator_count_ = 0;
  int64_t max_micro_batches_;
  bool bf16_master_, bf16_gradients_, fp16_;
  runtime::CudaBackend backend_;
  graph::TensorId loss_ = graph::kNoTensor, router_aux_loss_ = graph::kNoTensor;
  std::optional<double> router_aux_loss_sum_;
  HostOffloadPlan offload_;
  cuda::DeviceBuffer<float> master_, accumulators_, norm_result_, norm_partials_;  // master_ / accumulators_: fp32 only
  cuda::DeviceBuffer<__nv_bfloat16> bf16_accumulators_;  // gradient_dtype bf16 only
  cuda::PinnedHostBuffer<float> host_master_, host_accumulators_;  // offload_master, offload_grads
  cuda::PinnedHostBuffer<__nv_bfloat16> host_bf16_accumulators_;
  // Where the kernels address the masters and accumulators: the GPU buffers above, or the mapped
  // host ones. masters_host_ is the masters' host address when offloaded (else masters_).
  float* masters_ = nullptr;
  float* masters_host_ = nullptr;
  float* accumulators_data_ = nullptr;
  __nv_bfloat16* bf16_accumulators_data_ = nullptr;
  std::unique_ptr<DeviceOptimizer> optimizer_;
  // The multi-tensor kernels' pointer tables, one entry per trainable tensor, built once.
  cuda::DeviceBuffer<__nv_bfloat16*> gradient_table_, weight_table_;
  cuda::DeviceBuffer<float*> accumulator_table_, master_table_;
  cuda::DeviceBuffer<__nv_bfloat16*> bf16_accumulator_table_;
  cuda::DeviceBuffer<__half*> fp16_gradient_table_, fp16_weight_table_;  // fp16 plans: the same addresses
  cuda::GradientCounts counts_;  // the tensors' element counts (and their accumulate chunks)
  std::vector<Fp8WeightCopy> fp8_copies_;
  cuda::DeviceBuffer<float> fp8_amax_;  // fp8_quantize_weight's scratch
  struct Pinned {
    float* data = nullptr;
    explicit Pinned(size_t count);
    ~Pinned();
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;
  };
  Pinned losses_, norm_;
  int64_t micro_batches_ = 0;
  bool defer_zeroing_ = false, accumulators_stale_ = false;
};

// ZeRO-1's publish (shard_publish.h) on a GPU rank: its fp32 masters are the flat buffer, which the
// optimizer updated in place, and the other ranks' units get their bf16 weights rewritten from
// them. Unit u is the state's trainable entry `first_entry` + u.
ShardCopies cuda_shard_copies(CudaRankState& state, size_t first_entry = 0);

// UserError (naming `gpus_source`, the `gpus` setting) unless GPUs first_device … first_device +
// count − 1 are visible: a multi-GPU device's ranks, before any of them loads.
void check_visible_gpus(int first_device, int count, const std::string& gpus_source);

}  // namespace surogate::train
