// AdamW whose two moments are stored in 8 bits: block-wise dynamic quantisation (see
// quantization_map.h) with a signed code book for the first moment and an unsigned one for
// the second. Each step dequantises one block, applies the exact AdamW update in fp32, and
// re-quantises, so the state costs 2 bytes per parameter (plus one float per 2048 values).
#include <algorithm>
#include <array>

#include "train/optim/adamw_math.h"
#include "train/optim/optimizer.h"
#include "train/optim/quantization_map.h"

namespace surogate::train {
namespace {

struct QuantizedMoments {
  std::vector<uint8_t> first_codes;
  std::vector<float> first_absmax;
  std::vector<uint8_t> second_codes;
  std::vector<float> second_absmax;
};

class AdamW8bit final : public Optimizer {
public:
  AdamW8bit(std::span<const ParameterSlot> parameters, const AdamWSettings& settings)
      : settings_(settings),
        signed_code_(dynamic_quantization_map(true)),
        unsigned_code_(dynamic_quantization_map(false)) {
    for (const auto& slot : parameters) {
      int64_t blocks = quantization_blocks(slot.size());
      QuantizedMoments moments;
      // Zero is code value 0.0 in both maps: find its index once so fresh state decodes to 0.
      moments.first_codes.assign(slot.size(), nearest_code(signed_code_, 0.0f));
      moments.second_codes.assign(slot.size(), nearest_code(unsigned_code_, 0.0f));
      moments.first_absmax.assign(blocks, 0.0f);
      moments.second_absmax.assign(blocks, 0.0f);
      moments_.push_back(std::move(moments));
      names_.push_back(slot.name);
      sizes_.push_back(slot.size());
    }
  }

  std::string_view name() const override { return "adamw_8bit"; }

  void step(std::span<const ParameterSlot> parameters, const OptimizerStep& step) override {
    AdamWCoefficients c = adamw_coefficients(settings_, step);
    std::array<float, kQuantizationBlockSize> m{};
    std::array<float, kQuantizationBlockSize> v{};
    for (size_t index = 0; index < parameters.size(); ++index) {
      const ParameterSlot& slot = parameters[index];
      QuantizedMoments& state = moments_[index];
      float decay = slot.apply_weight_decay ? static_cast<float>(step.learning_rate * step.weight_decay) : 0.0f;
      for (int64_t block = 0; block < quantization_blocks(slot.size()); ++block) {
        int64_t begin = block * kQuantizationBlockSize;
        int64_t count = std::min(kQuantizationBlockSize, slot.size() - begin);
        float m_absmax = 0.0f;
        float v_absmax = 0.0f;
        for (int64_t i = 0; i < count; ++i) {
          float g = slot.gradient[begin + i];
          float m_old = signed_code_[state.first_codes[begin + i]] * state.first_absmax[block];
          float v_old = unsigned_code_[state.second_codes[begin + i]] * state.second_absmax[block];
          m[i] = c.beta1 * m_old + (1.0f - c.beta1) * g;
          v[i] = c.beta2 * v_old + (1.0f - c.beta2) * g * g;
          float& p = slot.master[begin + i];
          p -= adamw_update(c, m[i], v[i]) + decay * p;
          m_absmax = std::max(m_absmax, std::fabs(m[i]));
          v_absmax = std::max(v_absmax, v[i]);
        }
        requantize(m.data(), count, m_absmax, signed_code_, &state.first_codes[begin], state.first_absmax[block]);
        requantize(v.data(), count, v_absmax, unsigned_code_, &state.second_codes[begin], state.second_absmax[block]);
      }
    }
  }

  std::vector<StateTensor> state_tensors() override {
    std::vector<StateTensor> tensors;
    for (size_t index = 0; index < names_.size(); ++index) {
      QuantizedMoments& s = moments_[index];
      const std::string& n = names_[index];
      int64_t blocks = static_cast<int64_t>(s.first_absmax.size());
      tensors.push_back({n + ".exp_avg.codes", DType::U8, {sizes_[index]}, s.first_codes.data(), s.first_codes.size()});
      tensors.push_back({n + ".exp_avg.absmax", DType::F32, {blocks}, s.first_absmax.data(), blocks * sizeof(float)});
      tensors.push_back({n + ".exp_avg_sq.codes", DType::U8, {sizes_[index]}, s.second_codes.data(), s.second_codes.size()});
      tensors.push_back({n + ".exp_avg_sq.absmax", DType::F32, {blocks}, s.second_absmax.data(), blocks * sizeof(float)});
    }
    return tensors;
  }

private:
  static void requantize(const float* values, int64_t count, float absmax, const std::array<float, 256>& code,
                         uint8_t* codes_out, float& absmax_out) {
    absmax_out = absmax;
    float inverse = absmax > 0.0f ? 1.0f / absmax : 0.0f;
    for (int64_t i = 0; i < count; ++i) codes_out[i] = nearest_code(code, values[i] * inverse);
  }

  AdamWSettings settings_;
  const std::array<float, 256>& signed_code_;
  const std::array<float, 256>& unsigned_code_;
  std::vector<QuantizedMoments> moments_;
  std::vector<std::string> names_;
  std::vector<int64_t> sizes_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adamw_8bit(std::span<const ParameterSlot> parameters, const AdamWSettings& settings) {
  return std::make_unique<AdamW8bit>(parameters, settings);
}

}  // namespace surogate::train
