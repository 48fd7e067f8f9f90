// The rate the counter-based dropout (ops/dropout.h) actually applies, shared by the CPU
// reference and the CUDA kernels (cuda/kernels/dropout.cu) so both use this very definition:
// p is rounded to a 16-bit threshold t = round(p · 65536), element i is kept when its 16-bit
// draw is at least t, and kept elements are scaled by 1 / (1 − t/65536). Here in core/ because
// the kernels sit below ops/ in the layering.
#pragma once

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdint>

namespace surogate {

// t = round(p · 65536), the keep test's threshold on the 16-bit draw, for p in [0, 1) (at most
// 65535: p just below 1 still keeps the draws equal to 0xffff).
inline uint32_t dropout_threshold16(double probability) {
  return static_cast<uint32_t>(std::min(65535.0, std::nearbyint(probability * 65536.0)));
}
// The seed value that switches dropout off (every element kept, unscaled): what evaluation and
// a training objective's reference pass bind, so that a plan built with dropout runs as the model
// is (train/batch_inputs.h's dropout_seed never gives it).
inline constexpr int32_t kDropoutOffSeed = INT32_MIN;

// The factor kept elements are multiplied by: 1 / (1 − t/65536), as a double.
inline double dropout_keep_scale(double probability) {
  return 65536.0 / (65536.0 - static_cast<double>(dropout_threshold16(probability)));
}

}  // namespace surogate
