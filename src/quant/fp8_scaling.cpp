// Delayed scaling's state rules; see fp8_scaling.h.
#include "quant/fp8_scaling.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace surogate::quant {

float amax_max(float a, float b) {
  return std::bit_cast<uint32_t>(a) >= std::bit_cast<uint32_t>(b) ? a : b;
}

float amax_of(std::span<const float> values) {
  uint32_t best = 0;
  for (float value : values) best = std::max(best, std::bit_cast<uint32_t>(std::fabs(value)));
  return std::bit_cast<float>(best);
}

void roll_fp8_history(float* state, int64_t sites, int64_t history, int64_t step, float headroom) {
  const int64_t width = kFp8StateHeader + history;
  for (int64_t site = 0; site < sites; ++site) {
    float* row = state + site * width;
    float* slots = row + kFp8StateHeader;
    slots[step % history] = row[1] * headroom;
    row[1] = 0.0f;
    float largest = 0.0f;
    for (int64_t i = 0; i < history; ++i) largest = amax_max(largest, slots[i]);
    row[0] = largest;
  }
}

std::vector<bool> delayed_amax_sites(const float* state, int64_t sites, int64_t width) {
  std::vector<bool> flags(static_cast<size_t>(sites));
  for (int64_t site = 0; site < sites; ++site) flags[static_cast<size_t>(site)] = has_delayed_amax(state[site * width]);
  return flags;
}

void drop_current_amaxes(float* state, int64_t sites, int64_t history) {
  for (int64_t site = 0; site < sites; ++site) state[site * (kFp8StateHeader + history) + 1] = 0.0f;
}

}  // namespace surogate::quant
