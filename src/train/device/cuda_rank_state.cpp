// One GPU's training state, composed of the cuda_rank/ pieces; see cuda_rank_state.h.
#include "train/device/cuda_rank_state.h"

#include <algorithm>

#include "core/bfloat16.h"
#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels/fp8_quantize.h"
#include "runtime/cuda_attention_path.h"
#include "train/device/cuda_rank/memory_check.h"
#include "train/device/cuda_rank/rank_optimizer.h"
#include "train/device/cuda_rank/weight_upload.h"

namespace surogate::train {

CudaRankState::CudaRankState(const TrainingDeviceSetup& setup, const CudaTrainableLayout& layout, size_t first, size_t end,
                             const CudaWeightShard* shard, bool shard_accumulators)
    : layout_(layout), shard_(shard),
      bf16_master_(setup.config->precision.master_dtype == MasterDtype::Bf16),
      bf16_gradients_(setup.config->precision.gradient_dtype == GradientDtype::Bf16),
      fp16_(layout.dtype == DType::F16),
      backend_(setup.cuda_ops != nullptr ? *setup.cuda_ops : runtime::builtin_cuda_ops()) {
  const Config& config = *setup.config;  // read here only
  SUROGATE_CHECK(!config.precision.gradient_dtype || *config.precision.gradient_dtype == GradientDtype::Fp32 ||
                     bf16_gradients_ || config.precision.recipe == Recipe::Fp8Hybrid,
                 "gradient_dtype fp8 without recipe fp8_hybrid was rejected when the configuration was loaded");
  SUROGATE_CHECK(first <= end && end <= layout.entries.size(), "the optimizer's tensors are trainable tensors");
  // fp16 training runs the single-GPU dense path with fp32 masters and accumulators
  // (train/device/backend_selection.cpp refuses the rest before the weights load).
  SUROGATE_CHECK(!fp16_ || (!bf16_master_ && !bf16_gradients_ && shard == nullptr && !shard_accumulators),
                 "fp16 training keeps fp32 masters and accumulators on one GPU");
  const compiler::ExecutionPlan& plan = *setup.plan;
  // The attention's path is chosen when the plans bind (runtime/cuda_attention_path.h): before the
  // first load, and the evaluator's plans bind under the same settings.
  runtime::AttentionSettings attention = runtime::attention_settings();
  attention.deterministic = config.kernels.deterministic_attention;
  runtime::set_attention_settings(attention);
  backend_.load(plan, *setup.registry);
  backend_.set_time_breakdown(config.logging.debug_time_breakdown);
  backend_.set_cuda_graphs(config.kernels.use_cuda_graphs);
  losses_.emplace(plan, std::max<int64_t>(1, config.schedule.gradient_accumulation_steps));
  // Each trainable tensor's 16-bit weight the rank steps (ZeRO-3: its own copy, the plan's weight
  // being a gather buffer) and its gradient in the plan.
  std::vector<__nv_bfloat16*> weights, gradients;
  std::vector<int64_t> counts;
  for (const CudaTrainable& entry : layout.entries) {
    weights.push_back(shard_ ? shard_->weight(entry.parameter)
                             : static_cast<__nv_bfloat16*>(backend_.device_address(entry.parameter)));
    gradients.push_back(static_cast<__nv_bfloat16*>(backend_.device_address(entry.gradient)));
    counts.push_back(entry.count);
  }
  const FlatRun optimized = layout.run(first, end);
  std::vector<DeviceParameter> parameters = rank_optimizer_parameters(setup.specs, layout, optimized, weights, fp16_);
  // The masters: every trainable tensor's, or under ZeRO-3 only those of the optimizer's tensors.
  SUROGATE_CHECK(!shard_ || !bf16_master_, "ZeRO-3 keeps fp32 masters");
  const FlatRun master_run = layout.run(first, end, shard_ == nullptr);
  std::vector<TrainableExtent> extents = layout.extents(first, end);
  for (TrainableExtent& extent : extents) extent.offset -= master_run.base;
  offload_ = plan_host_offload(config.offload, config.optimizer.algorithm, extents, setup.offload_chunk_bytes);
  // The accumulators: every trainable tensor's, or under ZeRO-2/3 only those of the optimizer's.
  const FlatRun accumulator_run = layout.run(first, end, !shard_accumulators);
  RankMemoryNeeds needs{master_run.count, accumulator_run.count, layout.total, bf16_master_, bf16_gradients_,
                        &offload_};
  needs.optimizer_bytes =
      rank_optimizer_device_bytes(config.optimizer, offload_, parameters) + offload_.staging_bytes();
  needs.optimizer = config.optimizer.algorithm;
  check_rank_memory(needs, backend_);
  counts_ = cuda::GradientCounts(counts);
  if (!bf16_master_) {
    masters_ = CudaMasters(layout, master_run, shard_ != nullptr, offload_.masters, offload_.write_combined, weights,
                           fp16_, counts_);
  }
  accumulators_.emplace(layout, accumulator_run, shard_accumulators, bf16_gradients_, offload_.gradients,
                        offload_.write_combined, gradients, fp16_, counts_, backend_.stream());
  clip_.emplace(layout.entries.size(), config.optimizer.max_grad_norm, backend_.stream());
  fp8_copies_ = fp8_weight_copies(plan);
  if (!fp8_copies_.empty()) fp8_amax_ = cuda::DeviceBuffer<float>(1);
  const auto seed = static_cast<uint64_t>(config.data.train_seed);
  optimizer_ = make_rank_optimizer(config.optimizer, seed, std::move(parameters), optimized, layout, offload_, masters_,
                                   *accumulators_);
}

void CudaRankState::refresh_fp8_weight_copies() {
  for (const Fp8WeightCopy& copy : fp8_copies_) {
    cuda::fp8_quantize_weight(static_cast<const __nv_bfloat16*>(backend_.device_address(copy.weight)), copy.rows,
                              copy.columns, fp8_amax_.data(), static_cast<uint8_t*>(backend_.device_address(copy.codes)),
                              static_cast<uint8_t*>(backend_.device_address(copy.transposed)),
                              static_cast<float*>(backend_.device_address(copy.scale_inv)), backend_.stream());
  }
}

void CudaRankState::accumulate(std::span<const runtime::InputBinding> inputs, bool add_gradients) {
  losses_->check_room();
  backend_.execute(inputs);
  if (add_gradients) accumulators_->add(0, layout_.entries.size());
  losses_->record(backend_);
}

void CudaRankState::step(const OptimizerStep& step) {
  // The clip factor the norm (or set_from_norm / scale) left on the device (1 when max_grad_norm
  // is 0) is read by the kernels: no host round trip.
  accumulators_->zero_stale();
  if (optimizer_) optimizer_->step(step, clip_->factor(), backend_.stream());
  // fp16: the optimizer stepped the fp32 masters only; the fp16 weights follow (round to nearest).
  if (fp16_) masters_.refresh_weights(0, layout_.entries.size(), backend_.stream());
}

void CudaRankState::synchronize() { CUDA_CHECK(cudaStreamSynchronize(backend_.stream())); }

void CudaRankState::upload_weights(std::span<const WeightView> weights) {
  SUROGATE_CHECK(!shard_, "ZeRO-3 uploads through the data-parallel device");
  upload_16bit_weights(backend_, layout_.ids, weights, fp16_);
  // A bf16 master is the bf16 weight just written (exact when the host values came from a
  // download or a checkpoint of this device).
  if (!bf16_master_) masters_.upload(weights, backend_.stream());
  synchronize();
}

void CudaRankState::download_trainable(std::span<const WeightView> weights) {
  SUROGATE_CHECK(!shard_, "ZeRO-3 downloads through the data-parallel device");
  if (!bf16_master_) {
    masters_.download(weights, backend_.stream());
  } else {
    for (const CudaTrainable& entry : layout_.entries) {
      // The bf16 weights widened to fp32, exactly (what checkpoints and outputs save).
      std::span<float> values = weights[entry.weight].values;
      std::vector<uint16_t> bits(values.size());
      backend_.read(entry.parameter, std::as_writable_bytes(std::span<uint16_t>(bits)));
      for (size_t k = 0; k < bits.size(); ++k) values[k] = bf16_to_float(bits[k]);
    }
  }
  synchronize();
}

ShardCopies cuda_shard_copies(CudaRankState& state, size_t first_entry) {
  return {nullptr, [&state, first_entry](size_t first, size_t end) {
            state.masters().refresh_weights(first_entry + first, first_entry + end, state.stream());
          }};
}

void check_visible_gpus(int first_device, int count, const std::string& gpus_source) {
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (visible < first_device + count) {
    fail_user("{}: GPUs {}-{} asked for, {} visible", gpus_source, first_device, first_device + count - 1, visible);
  }
}

}  // namespace surogate::train
