// The CUDA training device (bf16 recipe) on one GPU: the plan runs in bf16 on CudaBackend; every
// trainable parameter also has a master copy and a gradient accumulator on the device, and the
// optimizer (device_optimizer.h: adamw, adamw_8bit or normuon) keeps its state there too. That
// per-GPU state is a CudaRankState (cuda_rank_state.h), shared with the data-parallel device
// (parallel/data_parallel_ranks.cpp over cuda_rank_host.h, which make_cuda_training_device picks for
// gpus: N > 1).
//   master_dtype fp32 (default): an fp32 master per parameter; the bf16 weights are rewritten
//                                from it (round to nearest) each step;
//   master_dtype bf16:           no master copy; the optimizer updates the bf16 weights in place
//                                with stochastic rounding (core/stochastic_rounding.h);
//   gradient_dtype fp32 (default) / bf16: the accumulators' dtype.
//   torch_dtype float16:         the plan runs in fp16 instead (fp16 weights, activations and
//                                gradients; fp32 masters and accumulators): the fp16 gradients are
//                                added into fp32, the update scales them by 1 / the loss scale
//                                (train/fp16_loss_scaler.h) with the clip, the optimizer steps the
//                                masters and the fp16 weights are rewritten from them. A step whose
//                                norm is not finite is skipped by the trainer (train/step_guard.h).
// Per optimizer step, all on the backend's stream:
//   per micro-batch: execute (bf16 gradients) → accumulate_bf16_gradients (accumulator += bf16,
//                    bf16 = 0; the step's first micro-batch writes accumulator = 0 + bf16 instead,
//                    so the zeroing after update() is deferred into it: no memset pass) → the
//                    loss scalar copied into pinned host memory (asynchronously)
//   measure():       global_grad_norm (norm and clip factor on the device) → one wait, read both
//   update():        the optimizer's step (gradients scaled by the device clip factor, masters
//                    updated, bf16 weights rewritten) → fp8_hybrid full fine-tuning: the trained
//                    weights' FP8 copies rewritten → accumulators marked stale (zeroed by the
//                    next first micro-batch's overwrite, CudaGradientAccumulators::defer_zeroing) →
//                    FP8 scaling rolled, its row[0]s copied back for the next micro-batch's
//                    launches (fp8_delayed_sites.h)
// The host waits only in measure(), to read the loss and grad norm the trainer logs and checks.
// Host copies: weights() are fp32 (after download(): the fp32 masters, or the bf16 weights
// widened exactly); frozen weights (the LoRA base) live on the device only in bf16, written once
// from the host copy by upload().
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/kernels/fp8_quantize.h"
#include "distributed/parallel_layout.h"
#include "quant/fp8_scaling.h"
#include "train/device/backend_selection.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/parallel_device.h"
#include "train/device/cuda_evaluator.h"
#include "train/device/cuda_rank_state.h"
#include "train/device/fp8_delayed_sites.h"
#include "train/device/fp8_state.h"
#include "train/device/training_device.h"
#include "train/quantized_weights.h"

namespace surogate::train {
namespace {

class CudaTrainingDevice final : public TrainingDevice {
public:
  explicit CudaTrainingDevice(const TrainingDeviceSetup& setup)
      : plan_(*setup.plan), logging_(setup.config->logging), offload_(setup.config->offload),
        layout_(cuda_trainable_layout(plan_, setup.specs)),
        host_(cuda_host_weights(setup.specs, layout_)), weights_(host_.weights), trainable_(host_.trainable),
        rank_(std::make_unique<CudaRankState>(setup, layout_, 0, layout_.entries.size())) {
    // The accumulators are added to after each execute, outside its captured graph.
    rank_->accumulators().defer_zeroing();
    if ((fp8_ = fp8_state(plan_))) {
      fp8_host_.assign(static_cast<size_t>(fp8_->shape.floats()), 0.0f);
      fp8_delayed_.emplace(fp8_->shape.sites, fp8_->shape.history);
    }
  }

  std::string description() const override {
    return fmt::format("CUDA backend, {} weights and activations, {}, {} gradient accumulation, {} state",
                       rank_->fp16() ? "fp16 (dynamic loss scaling)" : "bf16",
                       rank_->bf16_master() ? "bf16 master weights (updated in place with stochastic rounding, no fp32 copy)"
                                            : "fp32 master weights",
                       rank_->bf16_gradients() ? "bf16" : "fp32", rank_->optimizer()->name());
  }
  std::span<const WeightView> weights() const override { return weights_; }
  std::span<const WeightView> trainable() const override { return trainable_; }

  std::vector<std::pair<std::string, double>> time_breakdown() override {
    if (!logging_.debug_time_breakdown) return {};
    return rank_->backend().time_breakdown();
  }

  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cuda_evaluator(setup, rank_->backend());
  }
  const runtime::Backend* weights_backend() const override { return &rank_->backend(); }

  // The CPU optimizers' names, dtypes and shapes, so checkpoints are interchangeable.
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = rank_->optimizer()->state_tensors();
    if (fp8_) tensors.push_back(fp8_->state_tensor(fp8_host_.data()));
    return tensors;
  }

  void upload() override {
    rank_->upload_weights(weights_);
    rank_->refresh_fp8_weight_copies();
    rank_->optimizer()->upload(rank_->stream());
    if (fp8_) {
      copy_fp8(fp8_device(), fp8_host_.data(), cudaMemcpyHostToDevice);
      fp8_delayed_->restore(fp8_host_.data(), rank_->backend());
    }
    rank_->synchronize();
  }

  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    write_quantized(rank_->backend(), plan_, weight, pieces);
  }

  void download() override {
    rank_->download_trainable(weights_);
    rank_->optimizer()->download(rank_->stream());
    if (fp8_) copy_fp8(fp8_host_.data(), fp8_device(), cudaMemcpyDeviceToHost);
    rank_->synchronize();
  }

  // The host copies are written by download() only, except offload_optimizer's state, which lives
  // in host memory and is updated there: then a checkpoint copies it.
  bool host_views_are_live() const override { return offload_.offload_optimizer; }

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    if (fp8_delayed_) fp8_delayed_->apply(rank_->backend());
    rank_->accumulate(inputs);
    keep_micro_batch_outputs();  // surogate dpo only: waits for the stream (read_output)
  }

  bool forward_only(std::span<const runtime::InputBinding> inputs) override {
    // offload_residual's copies complete in the backward: such a plan runs whole (zero loss scale).
    for (size_t i = 0; i < plan_.forward_steps; ++i) {
      if (plan_.steps[i].asynchronous && plan_.steps[i].complete_by >= plan_.forward_steps) return false;
    }
    if (fp8_delayed_) fp8_delayed_->apply(rank_->backend());
    rank_->backend().execute_forward(inputs);
    if (fp8_ && !keep_fp8_amaxes_) drop_current_amaxes();  // they belong to no step, as skip_update drops them
    keep_micro_batch_outputs();
    return true;
  }

  std::vector<float> read_output(graph::TensorId tensor) override {
    std::vector<float> values(static_cast<size_t>(plan_.graph.tensor(tensor).type.numel()));
    rank_->backend().read(tensor, std::as_writable_bytes(std::span<float>(values)));  // waits for the stream
    return values;
  }

  StepMetrics measure() override {
    rank_->gradient_norm(0, layout_.entries.size());
    rank_->synchronize();
    StepMetrics metrics;
    metrics.loss = rank_->loss_sum();
    metrics.router_aux_loss = rank_->router_aux_loss_sum();
    metrics.grad_norm = rank_->clip().norm();
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    // fp16 loss scaling: the gradients are S times too large; the optimizer kernels multiply them by
    // 1 / S times the clip coefficient of the unscaled norm (one device factor, as the CPU's one pass).
    SUROGATE_CHECK(step.gradient_scale == 1.0 || rank_->fp16(), "a gradient scale only with an fp16 plan");
    if (step.gradient_scale != 1.0) rank_->clip().scale(step.gradient_scale);
    rank_->step(step);
    rank_->refresh_fp8_weight_copies();
    rank_->accumulators().zero();
    if (fp8_) {
      cuda::fp8_roll_history(fp8_device(), fp8_->shape.sites, fp8_->shape.history, step.step, rank_->stream());
      fp8_delayed_->after_roll(fp8_device(), rank_->stream());
    }
  }

  void skip_update() override {
    rank_->accumulators().zero();
    if (fp8_ && !keep_fp8_amaxes_) drop_current_amaxes();
  }

  void keep_fp8_amaxes(bool keep) override { keep_fp8_amaxes_ = keep; }
  void calibrate_fp8_scaling() override {
    if (!fp8_) return;
    cuda::fp8_roll_history(fp8_device(), fp8_->shape.sites, fp8_->shape.history, fp8_->shape.history - 1,
                           rank_->stream(), quant::kFp8CalibrationHeadroom);
    fp8_delayed_->after_roll(fp8_device(), rank_->stream());
  }

private:
  void drop_current_amaxes() {
    cuda::fp8_drop_current_amaxes(fp8_device(), fp8_->shape.sites, fp8_->shape.history, rank_->stream());
  }
  float* fp8_device() { return static_cast<float*>(rank_->backend().device_address(fp8_->tensor)); }
  void copy_fp8(float* destination, const float* source, cudaMemcpyKind kind) {
    CUDA_CHECK(cudaMemcpyAsync(destination, source, fp8_host_.size() * sizeof(float), kind, rank_->stream()));
  }

  const compiler::ExecutionPlan& plan_;
  const config::Logging& logging_;  // the sections the device reads after its construction
  const config::Offload& offload_;
  CudaTrainableLayout layout_;
  CudaHostWeights host_;
  const std::vector<WeightView>& weights_;
  const std::vector<WeightView>& trainable_;
  std::unique_ptr<CudaRankState> rank_;  // the backend, masters, accumulators and optimizer
  std::optional<Fp8State> fp8_;   // fp8_hybrid's scaling state (in the plan's parameters)
  std::vector<float> fp8_host_;   // its host copy: zeros at the start, what checkpoints read and restore
  std::optional<Fp8DelayedSites> fp8_delayed_;  // which of its sites the kernels may skip checking
  bool keep_fp8_amaxes_ = false;  // calibration (keep_fp8_amaxes)
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cuda_training_device(const TrainingDeviceSetup& setup) {
  const distributed::ParallelLayout layout = distributed::gpu_parallel_layout(
      *setup.config, probe_machine().visible_gpus, distributed::process_placement(setup.world));
  if (auto device = make_parallel_device_if_needed(setup, layout,
                                                   make_cuda_rank_host)) {
    return device;
  }
  return std::make_unique<CudaTrainingDevice>(setup);
}

}  // namespace surogate::train
