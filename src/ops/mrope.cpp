// M-RoPE tables (see mrope.h): rope_tables with each frequency reading its section's axis.
#include "ops/mrope.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace surogate::ops {

template <typename T>
void mrope_tables(const RopeFrequencies<T>& frequencies, const int32_t* position_ids, int64_t tokens,
                  std::span<const int64_t> sections, T* cos, T* sin) {
  const auto half = static_cast<int64_t>(frequencies.inverse_frequency.size());
  std::vector<int64_t> axis_of;
  for (size_t k = 0; k < sections.size(); ++k) {
    SUROGATE_CHECK(sections[k] >= 0, "mrope_section sizes must not be negative");
    axis_of.insert(axis_of.end(), static_cast<size_t>(sections[k]), static_cast<int64_t>(k % 3));
  }
  SUROGATE_CHECK(static_cast<int64_t>(axis_of.size()) == half,
                 "mrope_section sums to {} but the rotary embedding has {} frequencies", axis_of.size(), half);
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
                                  float*, float*);
template void mrope_tables<double>(const RopeFrequencies<double>&, const int32_t*, int64_t, std::span<const int64_t>,
                                   double*, double*);

}  // namespace surogate::ops
