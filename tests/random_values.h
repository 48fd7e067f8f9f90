// Reproducible normal random values for the CPU tests: `count` draws of N(0, scale²) from
// std::mt19937 seeded with `seed`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace surogate::testing {

inline std::vector<float> normal_values(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& value : values) value = normal(generator);
  return values;
}

}  // namespace surogate::testing
