// NorMuon: Muon's orthogonalised momentum for hidden 2-D weight matrices, with a per-row
// (per output neuron) second-moment normalisation so every neuron takes steps of similar size;
// AdamW for everything else (embeddings, lm_head, norms, biases). Per hidden matrix W [r, c]:
//   M = μ M + (1-μ) G                      momentum
//   U = μ M + (1-μ) G                      Nesterov look-ahead
//   O = NewtonSchulz(U)                    orthogonalised direction
//   s_i = β2 s_i + (1-β2) mean_j O_ij²     per-row second moment
//   Ô_ij = O_ij / (sqrt(s_i) + eps)
//   Ô *= 0.2 sqrt(r c) / ‖Ô‖_F             RMS matched to AdamW's, so one learning rate fits both
//   W -= lr (Ô + wd · mask ⊙ W)
// With normuon_cautious_wd the decay mask keeps only coordinates where the update and the
// weight have the same sign, i.e. where the step already moves the weight towards zero
// ("cautious weight decay"); otherwise the mask is all ones.
#include <cmath>

#include "train/optim/adamw_math.h"
#include "train/optim/newton_schulz.h"
#include "train/optim/optimizer.h"

namespace surogate::train {
namespace {

constexpr float kNorMuonEpsilon = 1e-8f;

class NorMuon final : public Optimizer {
public:
  NorMuon(std::span<const ParameterSlot> parameters, const NorMuonSettings& settings) : settings_(settings) {
    for (const auto& slot : parameters) {
      State state;
      state.name = slot.name;
      state.shape = {slot.rows, slot.cols};
      state.is_hidden_matrix = slot.is_hidden_matrix && slot.rows > 1;
      state.first.assign(slot.size(), 0.0f);
      // Hidden matrices keep one second moment per row; AdamW parameters one per element.
      state.second.assign(state.is_hidden_matrix ? slot.rows : slot.size(), 0.0f);
      states_.push_back(std::move(state));
    }
  }

  std::string_view name() const override { return "normuon"; }

  void step(std::span<const ParameterSlot> parameters, const OptimizerStep& step) override {
    for (size_t index = 0; index < parameters.size(); ++index) {
      if (states_[index].is_hidden_matrix) {
        step_matrix(parameters[index], states_[index], step);
      } else {
        step_adamw(parameters[index], states_[index], step);
      }
    }
  }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (State& s : states_) {
      tensors.push_back({s.name + ".momentum", DType::F32, s.shape, s.first.data(), s.first.size() * sizeof(float)});
      std::vector<int64_t> second_shape = s.is_hidden_matrix ? std::vector<int64_t>{s.shape[0]} : s.shape;
      tensors.push_back({s.name + ".second_moment", DType::F32, second_shape, s.second.data(), s.second.size() * sizeof(float)});
    }
    return tensors;
  }

private:
  struct State {
    std::string name;
    std::vector<int64_t> shape;
    bool is_hidden_matrix = false;
    std::vector<float> first;
    std::vector<float> second;
  };

  void step_matrix(const ParameterSlot& slot, State& state, const OptimizerStep& step) {
    const float mu = static_cast<float>(settings_.momentum);
    const float beta2 = static_cast<float>(settings_.beta2);
    const int64_t rows = slot.rows, cols = slot.cols;
    update_.resize(slot.size());
    for (int64_t i = 0; i < slot.size(); ++i) {
      float g = slot.gradient[i];
      state.first[i] = mu * state.first[i] + (1.0f - mu) * g;
      update_[i] = mu * state.first[i] + (1.0f - mu) * g;
    }
    newton_schulz_orthogonalize(update_, rows, cols);

    double norm_squared = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = &update_[r * cols];
      double mean_square = 0.0;
      for (int64_t j = 0; j < cols; ++j) mean_square += static_cast<double>(row[j]) * row[j];
      mean_square /= static_cast<double>(cols);
      state.second[r] = beta2 * state.second[r] + (1.0f - beta2) * static_cast<float>(mean_square);
      float inverse = 1.0f / (std::sqrt(state.second[r]) + kNorMuonEpsilon);
      for (int64_t j = 0; j < cols; ++j) {
        row[j] *= inverse;
        norm_squared += static_cast<double>(row[j]) * row[j];
      }
    }
    float rms_scale = static_cast<float>(0.2 * std::sqrt(static_cast<double>(rows * cols)) /
                                         (std::sqrt(norm_squared) + kNorMuonEpsilon));
    const float lr = static_cast<float>(step.learning_rate);
    const float decay = slot.apply_weight_decay ? static_cast<float>(step.weight_decay) : 0.0f;
    for (int64_t i = 0; i < slot.size(); ++i) {
      float u = update_[i] * rms_scale;
      float& w = slot.master[i];
      bool decays = !settings_.cautious_weight_decay || u * w > 0.0f;
      w -= lr * (u + (decays ? decay * w : 0.0f));
    }
  }

  void step_adamw(const ParameterSlot& slot, State& state, const OptimizerStep& step) {
    AdamWCoefficients c = adamw_coefficients(settings_.adamw, step);
    float decay = slot.apply_weight_decay ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f;
    for (int64_t i = 0; i < slot.size(); ++i) {
      float g = slot.gradient[i];
      state.first[i] = c.beta1 * state.first[i] + (1.0f - c.beta1) * g;
      state.second[i] = c.beta2 * state.second[i] + (1.0f - c.beta2) * g * g;
      slot.master[i] -= adamw_update(c, state.first[i], state.second[i]) + decay * slot.master[i];
    }
  }

  NorMuonSettings settings_;
  std::vector<State> states_;
  std::vector<float> update_;
};

}  // namespace

std::unique_ptr<Optimizer> make_normuon(std::span<const ParameterSlot> parameters, const NorMuonSettings& settings) {
  return std::make_unique<NorMuon>(parameters, settings);
}

}  // namespace surogate::train
