// Random decoder weights for the GPU tests that compare a 16-bit CUDA run with the CPU: N(0, 0.05)
// per element (1 + N(0, 0.05) for 1-D weights, the norms), rounded to bf16 or fp16 once. `bits`
// are what the CUDA backend is given, `values` their exact values for the CPU backend, one vector
// per spec in order.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/bfloat16.h"
#include "graph/graph.h"
#include "models/model_spec.h"

namespace surogate {

struct Random16BitWeights {
  std::vector<std::vector<uint16_t>> bits;
  std::vector<std::vector<float>> values;
};

inline Random16BitWeights random_16bit_weights(const std::vector<models::ParameterSpec>& specs, bool fp16,
                                               std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Random16BitWeights weights;
  for (const models::ParameterSpec& spec : specs) {
    const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
    std::vector<uint16_t>& bits = weights.bits.emplace_back(count);
    std::vector<float>& values = weights.values.emplace_back(count);
    for (size_t i = 0; i < count; ++i) {
      const float value = spec.shape.size() == 1 ? 1.0f + normal(rng) : normal(rng);
      bits[i] = fp16 ? float_to_f16(value) : float_to_bf16(value);
      values[i] = fp16 ? f16_to_float(bits[i]) : bf16_to_float(bits[i]);
    }
  }
  return weights;
}

}  // namespace surogate
