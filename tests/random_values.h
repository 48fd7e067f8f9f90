// Reproducible random values for the tests: a fixed seed unless SUROGATE_TEST_SEED names another
// (to sweep draws by hand), and `count` draws of N(0, scale²) from std::mt19937 seeded with `seed`.
// A tolerance test drawn from std::random_device fails now and then and cannot be replayed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace surogate::testing {

inline uint32_t test_seed(uint32_t fixed) {
  const char* text = std::getenv("SUROGATE_TEST_SEED");
  return text == nullptr || *text == '\0' ? fixed : static_cast<uint32_t>(std::stoul(text));
}

inline std::vector<float> normal_values(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& value : values) value = normal(generator);
  return values;
}

}  // namespace surogate::testing
