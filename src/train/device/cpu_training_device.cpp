// The CPU training device: CpuBackend in fp32, the parameters' host views are the backend's own
// parameter buffers (the masters), gradients are views into its gradient region, and the CPU
// optimizers (adamw, adamw_8bit, normuon) update them in place.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "ops/gradient_norm.h"
#include "runtime/cpu_backend.h"
#include "train/device/backend_selection.h"
#include "train/device/training_device.h"

namespace surogate::train {

bool applies_weight_decay(const std::string& name) {
  return !(name.ends_with(".bias") || name.ends_with("norm.weight") || name.ends_with("ln1.weight") ||
           name.ends_with("ln2.weight"));
}

bool is_hidden_matrix(const std::string& name, const std::vector<int64_t>& shape) {
  return shape.size() == 2 && name.starts_with("layers.");
}

namespace {

std::unique_ptr<Optimizer> make_cpu_optimizer(const Config& config, std::span<const ParameterSlot> slots) {
  AdamWSettings adamw{config.adamw_beta1, config.adamw_beta2, config.adamw_epsilon};
  switch (config.optimizer) {
    case surogate::Optimizer::AdamW: return make_adamw(slots, adamw);
    case surogate::Optimizer::AdamW8bit: return make_adamw_8bit(slots, adamw);
    case surogate::Optimizer::NorMuon:
      return make_normuon(slots, {config.normuon_momentum, config.normuon_beta2, config.normuon_cautious_wd, adamw});
  }
  return make_adamw(slots, adamw);
}

class CpuTrainingDevice final : public TrainingDevice {
public:
  explicit CpuTrainingDevice(const TrainingDeviceSetup& setup) : plan_(*setup.plan), config_(*setup.config) {
    check_cpu_backend_precision(config_);  // also when a caller forces the CPU backend
    backend_.load(plan_, *setup.registry);
    loss_ = plan_.loss;
    for (const models::ParameterSpec& spec : setup.specs) {
      graph::TensorId id = plan_.tensor(spec.name);
      weights_.push_back({spec.name, spec.shape, backend_.view<float>(id)});
      auto gradient = plan_.parameter_gradients.find(id);
      if (gradient == plan_.parameter_gradients.end()) continue;  // frozen (LoRA base)
      trainable_.push_back(weights_.back());
      gradients_.push_back(backend_.view<float>(gradient->second));
      ParameterSlot slot;
      slot.name = spec.name;
      slot.master = weights_.back().values.data();
      slot.gradient = gradients_.back().data();
      slot.rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
      slot.cols = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
      slot.apply_weight_decay = applies_weight_decay(spec.name);
      slot.is_hidden_matrix = is_hidden_matrix(spec.name, spec.shape);
      slots_.push_back(slot);
    }
    SUROGATE_CHECK(!slots_.empty(), "the model has trainable parameters");
    optimizer_ = make_cpu_optimizer(config_, slots_);
  }

  std::string description() const override {
    return fmt::format("CPU backend, fp32 weights, gradients and {} state", optimizer_->name());
  }
  std::span<const WeightView> weights() const override { return weights_; }
  std::span<const WeightView> trainable() const override { return trainable_; }
  std::vector<StateTensor> optimizer_state() override { return optimizer_->state_tensors(); }
  std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSetup& setup) override {
    return make_cpu_evaluator(setup, weights_);
  }
  void upload() override {}
  void download() override {}

  void accumulate(std::span<const runtime::InputBinding> inputs) override {
    backend_.execute(inputs);
    loss_sum_ += backend_.view<float>(loss_)[0];
  }

  StepMetrics measure() override {
    StepMetrics metrics{loss_sum_, ops::global_norm<float>(gradients_)};
    grad_norm_ = metrics.grad_norm;
    loss_sum_ = 0.0;
    return metrics;
  }

  void update(const OptimizerStep& step) override {
    if (config_.max_grad_norm > 0) {
      const double coefficient = ops::clip_coefficient(grad_norm_, config_.max_grad_norm);
      if (coefficient < 1.0) {
        for (ParameterSlot& slot : slots_) {
          ops::scale(const_cast<float*>(slot.gradient), slot.size(), static_cast<float>(coefficient));
        }
      }
    }
    optimizer_->step(slots_, step);
    backend_.zero_gradients();
  }

private:
  const compiler::ExecutionPlan& plan_;
  const Config& config_;
  runtime::CpuBackend backend_;
  graph::TensorId loss_ = graph::kNoTensor;
  std::vector<WeightView> weights_, trainable_;
  std::vector<std::span<const float>> gradients_;
  std::vector<ParameterSlot> slots_;
  std::unique_ptr<Optimizer> optimizer_;
  double loss_sum_ = 0.0, grad_norm_ = 0.0;
};

}  // namespace

std::unique_ptr<TrainingDevice> make_cpu_training_device(const TrainingDeviceSetup& setup) {
  return std::make_unique<CpuTrainingDevice>(setup);
}

}  // namespace surogate::train
