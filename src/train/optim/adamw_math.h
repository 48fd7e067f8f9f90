// The per-element AdamW arithmetic shared by the fp32 and 8-bit optimizers (and NorMuon's
// AdamW half), so the three cannot drift apart.
#pragma once

#include <cmath>

#include "train/optim/optimizer.h"

namespace surogate::train {

struct AdamWCoefficients {
  float beta1;
  float beta2;
  float epsilon;
  float step_size;             // lr / (1 - beta1^t)
  float second_correction;     // 1 / sqrt(1 - beta2^t)
};

inline AdamWCoefficients adamw_coefficients(const AdamWSettings& settings, const OptimizerStep& step) {
  double t = static_cast<double>(step.step + 1);
  return AdamWCoefficients{
      static_cast<float>(settings.beta1), static_cast<float>(settings.beta2), static_cast<float>(settings.epsilon),
      static_cast<float>(step.learning_rate / (1.0 - std::pow(settings.beta1, t))),
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(settings.beta2, t)))};
}

// The update (without weight decay) for updated moments m and v.
inline float adamw_update(const AdamWCoefficients& c, float m, float v) {
  return c.step_size * m / (std::sqrt(v) * c.second_correction + c.epsilon);
}

}  // namespace surogate::train
