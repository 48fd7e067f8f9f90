// The CPU training device: CpuBackend in fp32, the parameters' host views are the backend's own
// parameter buffers (the masters), gradients are views into its gradient region, and the CPU
// optimizers (adamw, adamw_8bit, normuon) update them in place.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/parallel_layout.h"
#include "ops/gradient_norm.h"
#include "quant/fp8_scaling.h"
#include "runtime/cpu_backend.h"
#include "models/decoder_graph.h"
#include "train/device/backend_selection.h"
#include "train/device/parallel/rank_engine.h"
#include "train/device/parallel/parallel_device.h"
#include "train/device/cpu_parameters.h"
#include "train/device/fp8_state.h"
#include "train/device/training_device.h"
#include "train/fp8_weight_copies.h"
#include "train/quantized_weights.h"

namespace surogate::train {

bool applies_weight_decay(const std::string& name) {
  return !(name.ends_with(".bias") || name.ends_with("norm.weight") || name.ends_with("ln1.weight") ||
           name.ends_with("ln2.weight"));
}

bool is_hidden_matrix(const std::string& name, const std::vector<int64_t>& shape) {
  return shape.size() == 2 && name.starts_with("layers.");
}

CpuParameters bind_cpu_parameters(runtime::CpuBackend& backend, const compiler::ExecutionPlan& plan,
                                  std::span<const models::ParameterSpec> specs) {
  CpuParameters parameters;
  parameters.weights.reserve(specs.size());
  for (const models::ParameterSpec& spec : specs) {
    graph::TensorId id = plan.tensor(spec.name);
    parameters.weights.push_back({spec.name, spec.shape, backend.view<float>(id)});
    auto gradient = plan.parameter_gradients.find(id);
    if (gradient == plan.parameter_gradients.end()) continue;  // frozen (LoRA base)
    parameters.trainable.push_back(parameters.weights.back());
    parameters.gradients.push_back(backend.view<float>(gradient->second));
    ParameterSlot slot;
    slot.name = spec.name;
    slot.master = parameters.weights.back().values.data();
    slot.gradient = parameters.gradients.back().data();
    slot.rows = spec.shape.size() == 2 ? spec.shape[0] : 1;  // a stacked expert tensor [E, out, in] is one row
    slot.cols = spec.shape.size() == 2 ? spec.shape[1] : graph::shape_numel(spec.shape);
    slot.apply_weight_decay = applies_weight_decay(spec.name);
    slot.is_hidden_matrix = is_hidden_matrix(spec.name, spec.shape);
    parameters.slots.push_back(slot);
  }
  SUROGATE_CHECK(!parameters.slots.empty(), "the model has trainable parameters");
  return parameters;
}

std::unique_ptr<Optimizer> make_cpu_optimizer(const config::Optimizer& optimizer,
                                              std::span<const ParameterSlot> slots) {
  AdamWSettings adamw{optimizer.adamw_beta1, optimizer.adamw_beta2, optimizer.adamw_epsilon};
  switch (optimizer.algorithm) {
    case surogate::Optimizer::AdamW: return make_adamw(slots, adamw);
    case surogate::Optimizer::AdamW8bit: return make_adamw_8bit(slots, adamw);
    case surogate::Optimizer::NorMuon:
      return make_normuon(
          slots, {optimizer.normuon_momentum, optimizer.normuon_beta2, optimizer.normuon_cautious_wd, adamw});
  }
  return make_adamw(slots, adamw);
}

void clip_slot_gradients(std::span<const ParameterSlot> slots, double grad_norm, double max_grad_norm,
                         double gradient_scale) {
  double coefficient = gradient_scale;
  if (max_grad_norm > 0) coefficient *= std::min(1.0, ops::clip_coefficient(grad_norm * gradient_scale, max_grad_norm));
  if (coefficient == 1.0) return;
  for (const ParameterSlot& slot : slots) {
    ops::scale(const_cast<float*>(slot.gradient), slot.size(), static_cast<float>(coefficient));
  }
}

namespace {

class CpuTrainingDevice final : public TrainingDevice {
public:
  explicit CpuTrainingDevice(const TrainingDeviceSetup& setup)
      : plan_(*setup.plan), optimizer_settings_(setup.config->optimizer) {
    check_cpu_backend_options(*setup.config);  // also when a caller forces the CPU backend
    backend_.load(plan_, *setup.registry);
    loss_ = plan_.loss;
    router_aux_loss_ = plan_.graph.find_tensor(models::kRouterAuxLoss).value_or(graph::kNoTensor);
    parameters_ = bind_cpu_parameters(backend_, plan_, setup.specs);
    optimizer_ = make_cpu_optimizer(optimizer_settings_, parameters_.slots);
    if ((fp8_ = fp8_state(plan_))) {
      std::span<float> values = backend_.view<float>(fp8_->tensor);
      std::fill(values.begin(), values.end(), 0.0f);
    }
    fp8_copies_ = fp8_weight_copies(plan_);
  }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state", optimizer_->name());
  }
  std::span<const WeightView> weights() const override { return parameters_.weights; }
  std::span<const WeightView> trainable() const override { return parameters_.trainable; }
  std::vector<StateTensor> optimizer_state() override {
    std::vector<StateTensor> tensors = optimizer_->state_tensors();
    if (fp8_) tensors.push_back(fp8_->state_tensor(backend_.view<float>(fp8_->tensor).data()));
    return tensors;
  }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, parameters_.weights, quantized_);
  }
  void store_quantized(const models::QuantizedWeight& weight, const QuantizedPieces& pieces) override {
    quantized_.push_back({weight, pieces});  // kept: a copy (the caller reuses its buffers)
    write_quantized(backend_, plan_, weight, quantized_.back().pieces);
  }
  // The host views are the backend's own buffers: only the FP8 copies of trained weights follow.
  void upload() override { refresh_fp8_weight_copies(backend_, fp8_copies_); }
  const runtime::Backend* weights_backend() const override { return &backend_; }
  void download() override {}

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    backend_.execute(inputs);
    loss_sum_ += backend_.view<float>(loss_)[0];
    if (router_aux_loss_ != graph::kNoTensor) aux_sum_ += backend_.view<float>(router_aux_loss_)[0];
    keep_micro_batch_outputs();
  }

  bool forward_only(std::span<const runtime::InputBinding> inputs) override {
    backend_.execute_forward(inputs);
    keep_micro_batch_outputs();
    // The amaxes the forward recorded belong to no step (as skip_update drops them).
    if (fp8_ && !keep_fp8_amaxes_) {
      quant::drop_current_amaxes(backend_.view<float>(fp8_->tensor).data(), fp8_->shape.sites, fp8_->shape.history);
    }
    return true;
  }

  std::vector<float> read_output(graph::TensorId tensor) override {
    const std::span<float> values = backend_.view<float>(tensor);
    return {values.begin(), values.end()};
  }

  StepMetrics measure() override {
    StepMetrics metrics{loss_sum_, ops::global_norm<float>(parameters_.gradients), std::nullopt};
    if (router_aux_loss_ != graph::kNoTensor) metrics.router_aux_loss = aux_sum_;
    grad_norm_ = metrics.grad_norm;
    loss_sum_ = aux_sum_ = 0.0;
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    clip_slot_gradients(parameters_.slots, grad_norm_, optimizer_settings_.max_grad_norm, step.gradient_scale);
    optimizer_->step(parameters_.slots, step);
    refresh_fp8_weight_copies(backend_, fp8_copies_);
    backend_.zero_gradients();
    if (fp8_) {
      quant::roll_fp8_history(backend_.view<float>(fp8_->tensor).data(), fp8_->shape.sites, fp8_->shape.history,
                              step.step);
    }
  }

  void skip_update() override {
    backend_.zero_gradients();
    if (fp8_ && !keep_fp8_amaxes_) {
      quant::drop_current_amaxes(backend_.view<float>(fp8_->tensor).data(), fp8_->shape.sites, fp8_->shape.history);
    }
  }

  void keep_fp8_amaxes(bool keep) override { keep_fp8_amaxes_ = keep; }
  void calibrate_fp8_scaling() override {
    if (!fp8_) return;
    quant::roll_fp8_history(backend_.view<float>(fp8_->tensor).data(), fp8_->shape.sites, fp8_->shape.history,
                            fp8_->shape.history - 1, quant::kFp8CalibrationHeadroom);
  }

private:
  const compiler::ExecutionPlan& plan_;
  const config::Optimizer& optimizer_settings_;
  runtime::CpuBackend backend_;
  graph::TensorId loss_ = graph::kNoTensor, router_aux_loss_ = graph::kNoTensor;
  CpuParameters parameters_;
  std::vector<StoredQuantizedWeight> quantized_;  // QLoRA's base, kept for the evaluator's backend
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<Fp8State> fp8_;  // fp8_hybrid's scaling state, in the backend's memory
  bool keep_fp8_amaxes_ = false;  // calibration (keep_fp8_amaxes)
  std::vector<Fp8WeightCopy> fp8_copies_;  // fp8_hybrid full fine-tuning: the trained weights' FP8 copies
  double loss_sum_ = 0.0, grad_norm_ = 0.0, aux_sum_ = 0.0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cpu_training_device(const TrainingDeviceSetup& setup) {
  const distributed::ParallelLayout layout = distributed::cpu_parallel_layout(*setup.config, distributed::process_placement(setup.world));
  if (auto device = make_parallel_device_if_needed(setup, layout,
                                                   make_cpu_rank_host)) {
    return device;
  }
  return std::make_unique<CpuTrainingDevice>(setup);
}

}  // namespace surogate::train
