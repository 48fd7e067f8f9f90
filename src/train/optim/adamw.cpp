// Plain AdamW with fp32 moments and decoupled weight decay (Loshchilov & Hutter):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²
//   p -= lr * ( m̂ / (sqrt(v̂) + eps) + wd * p ),   m̂ = m / (1-b1^t), v̂ = v / (1-b2^t)
#include <cmath>

#include "train/optim/adamw_math.h"
#include "train/optim/optimizer.h"

namespace surogate::train {
namespace {

class AdamW final : public Optimizer {
public:
  AdamW(std::span<const ParameterSlot> parameters, const AdamWSettings& settings) : settings_(settings) {
    for (const auto& slot : parameters) {
      first_moment_.emplace_back(slot.size(), 0.0f);
      second_moment_.emplace_back(slot.size(), 0.0f);
      names_.push_back(slot.name);
      shapes_.push_back({slot.rows, slot.cols});
    }
  }

  std::string_view name() const override { return "adamw"; }

  void step(std::span<const ParameterSlot> parameters, const OptimizerStep& step) override {
    AdamWCoefficients coefficients = adamw_coefficients(settings_, step);
    for (size_t index = 0; index < parameters.size(); ++index) {
      const ParameterSlot& slot = parameters[index];
      float decay = slot.apply_weight_decay ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f;
      float* m = first_moment_[index].data();
      float* v = second_moment_[index].data();
      for (int64_t i = 0; i < slot.size(); ++i) {
        float g = slot.gradient[i];
        m[i] = coefficients.beta1 * m[i] + (1.0f - coefficients.beta1) * g;
        v[i] = coefficients.beta2 * v[i] + (1.0f - coefficients.beta2) * g * g;
        slot.master[i] -= adamw_update(coefficients, m[i], v[i]) + decay * slot.master[i];
      }
    }
  }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (size_t index = 0; index < names_.size(); ++index) {
      tensors.push_back({names_[index] + ".exp_avg", DType::F32, shapes_[index], first_moment_[index].data(),
                         first_moment_[index].size() * sizeof(float)});
      tensors.push_back({names_[index] + ".exp_avg_sq", DType::F32, shapes_[index], second_moment_[index].data(),
                         second_moment_[index].size() * sizeof(float)});
    }
    return tensors;
  }

private:
  AdamWSettings settings_;
  std::vector<std::vector<float>> first_moment_;
  std::vector<std::vector<float>> second_moment_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adamw(std::span<const ParameterSlot> parameters, const AdamWSettings& settings) {
  return std::make_unique<AdamW>(parameters, settings);
}

}  // namespace surogate::train
