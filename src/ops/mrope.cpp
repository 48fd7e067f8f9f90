// M-RoPE tables (see mrope.h): rope_tables with each frequency reading its section's axis.
#include "ops/mrope.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace surogate::ops {

std::vector<int64_t> mrope_axes(std::span<const int64_t> sections, int64_t frequencies, bool interleaved) {
  std::vector<int64_t> axis_of;
  for (size_t k = 0; k < sections.size(); ++k) {
    SUROGATE_CHECK(sections[k] >= 0, "mrope_section sizes must not be negative");
    axis_of.insert(axis_of.end(), static_cast<size_t>(sections[k]), static_cast<int64_t>(k % 3));
  }
  SUROGATE_CHECK(static_cast<int64_t>(axis_of.size()) == frequencies,
                 "mrope_section sums to {} but the rotary embedding has {} frequencies", axis_of.size(), frequencies);
  if (!interleaved) return axis_of;
  SUROGATE_CHECK(sections.size() == 3, "an interleaved mrope_section has three sizes, got {}", sections.size());
  for (int64_t i = 0; i < frequencies; ++i) {
    const int64_t axis = i % 3;
    axis_of[static_cast<size_t>(i)] = axis != 0 && i < 3 * sections[static_cast<size_t>(axis)] ? axis : 0;
  }
  return axis_of;
}

template <typename T>
void mrope_tables(const RopeFrequencies<T>& frequencies, const int32_t* position_ids, int64_t tokens,
                  std::span<const int64_t> sections, T* cos, T* sin, bool interleaved) {
  const auto half = static_cast<int64_t>(frequencies.inverse_frequency.size());
  const std::vector<int64_t> axis_of = mrope_axes(sections, half, interleaved);
  for (int64_t token = 0; token < tokens; ++token) {
    for (int64_t i = 0; i < half; ++i) {
      const T position = static_cast<T>(position_ids[axis_of[i] * tokens + token]);
      const T angle = position * frequencies.inverse_frequency[i];
      cos[token * half + i] = std::cos(angle) * frequencies.attention_scaling;
      sin[token * half + i] = std::sin(angle) * frequencies.attention_scaling;
    }
  }
}

template void mrope_tables<float>(const RopeFrequencies<float>&, const int32_t*, int64_t, std::span<const int64_t>,
                                  float*, float*, bool);
template void mrope_tables<double>(const RopeFrequencies<double>&, const int32_t*, int64_t, std::span<const int64_t>,
                                   double*, double*, bool);

}  // namespace surogate::ops
