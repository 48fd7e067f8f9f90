// RoPE inverse frequencies, cos/sin tables and the rotate_half rotation (see rope.h).
// Frequency code follows transformers' modeling_rope_utils step by step in T's precision:
// scalars of the config (python floats there) are cast to T where torch would combine them
// with a float32 tensor, and stay double where torch computes them with python's math.
#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace surogate::ops {
namespace {

// 1 / base^(2i / d) for i < d/2, as `1.0 / (base ** (arange(0, d, 2).float() / d))`.
template <typename T>
std::vector<T> default_inverse_frequency(double base, int64_t rotary_dim) {
  std::vector<T> inverse(static_cast<size_t>(rotary_dim / 2));
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const T exponent = static_cast<T>(2 * i) / static_cast<T>(rotary_dim);
    inverse[i] = T(1) / std::pow(static_cast<T>(base), exponent);
  }
  return inverse;
}

template <typename T>
std::vector<T> yarn_inverse_frequency(const io::RopeConfig& config) {
  const int64_t dim = config.rotary_dim;
  const double base = config.theta;
  const double original = static_cast<double>(config.original_max_position_embeddings);
  // Dimension index at which a frequency completes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(base));
  };
  double low = correction_dim(config.beta_fast);
  double high = correction_dim(config.beta_slow);
  if (config.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp

  std::vector<T> inverse(static_cast<size_t>(dim / 2));
  const T factor = static_cast<T>(config.factor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const T position_frequency =
        std::pow(static_cast<T>(base), static_cast<T>(2 * i) / static_cast<T>(dim));
    const T extrapolation = T(1) / position_frequency;
    const T interpolation = T(1) / (factor * position_frequency);
    const T ramp = std::clamp(
        (static_cast<T>(i) - static_cast<T>(low)) / static_cast<T>(high - low), T(0), T(1));
    const T extrapolation_weight = T(1) - ramp;
    inverse[i] =
        interpolation * (T(1) - extrapolation_weight) + extrapolation * extrapolation_weight;
  }
  return inverse;
}

template <typename T>
std::vector<T> llama3_inverse_frequency(const io::RopeConfig& config) {
  std::vector<T> inverse = default_inverse_frequency<T>(config.theta, config.rotary_dim);
  const double original = static_cast<double>(config.original_max_position_embeddings);
  const double low_frequency_wavelength = original / config.low_freq_factor;
  const double high_frequency_wavelength = original / config.high_freq_factor;
  const T factor = static_cast<T>(config.factor);
  for (T& frequency : inverse) {
    const T wavelength = static_cast<T>(2.0 * std::numbers::pi) / frequency;
    const T scaled =
        wavelength > static_cast<T>(low_frequency_wavelength) ? frequency / factor : frequency;
    const T smooth =
        (static_cast<T>(original) / wavelength - static_cast<T>(config.low_freq_factor)) /
        static_cast<T>(config.high_freq_factor - config.low_freq_factor);
    const T smoothed = (T(1) - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelength < static_cast<T>(high_frequency_wavelength)) &&
                        !(wavelength > static_cast<T>(low_frequency_wavelength));
    frequency = medium ? smoothed : scaled;
  }
  return inverse;
}

}  // namespace

template <typename T>
RopeFrequencies<T> rope_frequencies(const io::RopeConfig& config, int64_t sequence_length) {
  const int64_t dim = config.rotary_dim;
  SUROGATE_CHECK(dim > 0 && dim % 2 == 0, "rotary_dim must be positive and even, got {}", dim);
  RopeFrequencies<T> result;
  switch (config.type) {
    case io::RopeType::Default:
      result.inverse_frequency = default_inverse_frequency<T>(config.theta, dim);
      break;
    case io::RopeType::Linear:
      result.inverse_frequency = default_inverse_frequency<T>(config.theta, dim);
      for (T& frequency : result.inverse_frequency) frequency /= static_cast<T>(config.factor);
      break;
    case io::RopeType::Dynamic: {
      SUROGATE_CHECK(config.original_max_position_embeddings > 0,
                     "dynamic RoPE needs original_max_position_embeddings");
      const double original = static_cast<double>(config.original_max_position_embeddings);
      const double length = std::max(static_cast<double>(sequence_length), original);
      const double base =
          config.theta * std::pow(config.factor * length / original - (config.factor - 1.0),
                                  static_cast<double>(dim) / static_cast<double>(dim - 2));
      result.inverse_frequency = default_inverse_frequency<T>(base, dim);
      break;
    }
    case io::RopeType::Yarn:
      SUROGATE_CHECK(config.original_max_position_embeddings > 0,
                     "yarn RoPE needs original_max_position_embeddings");
      result.inverse_frequency = yarn_inverse_frequency<T>(config);
      result.attention_scaling = static_cast<T>(config.attention_factor);
      break;
    case io::RopeType::Llama3:
      SUROGATE_CHECK(config.original_max_position_embeddings > 0,
                     "llama3 RoPE needs original_max_position_embeddings");
      result.inverse_frequency = llama3_inverse_frequency<T>(config);
      break;
  }
  return result;
}

int64_t rope_dynamic_sequence_length(const int32_t* position_ids, int64_t tokens) {
  int64_t largest = -1;
  for (int64_t token = 0; token < tokens; ++token) {
    largest = std::max<int64_t>(largest, position_ids[token]);
  }
  return largest + 1;
}

template <typename T>
void rope_tables(const RopeFrequencies<T>& frequencies, const int32_t* position_ids, int64_t tokens,
                 T* cos, T* sin) {
  const int64_t half = static_cast<int64_t>(frequencies.inverse_frequency.size());
  for (int64_t token = 0; token < tokens; ++token) {
    const T position = static_cast<T>(position_ids[token]);
    for (int64_t i = 0; i < half; ++i) {
      const T angle = position * frequencies.inverse_frequency[i];
      cos[token * half + i] = std::cos(angle) * frequencies.attention_scaling;
      sin[token * half + i] = std::sin(angle) * frequencies.attention_scaling;
    }
  }
}

namespace {

// Rotates every head of every token by +angle (sign = +1) or −angle (sign = −1).
template <typename T>
void rotate_pairs(const T* x, const T* cos, const T* sin, int64_t tokens, int64_t heads, int64_t head_dim,
            int64_t rotary_dim, T sign, T* out) {
  SUROGATE_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim,
                 "rotary_dim {} must be even and within head_dim {}", rotary_dim, head_dim);
  const int64_t half = rotary_dim / 2;
  for (int64_t token = 0; token < tokens; ++token) {
    const T* token_cos = cos + token * half;
    const T* token_sin = sin + token * half;
    for (int64_t head = 0; head < heads; ++head) {
      const int64_t offset = (token * heads + head) * head_dim;
      const T* input = x + offset;
      T* output = out + offset;
      for (int64_t i = 0; i < half; ++i) {
        const T first = input[i];
        const T second = input[i + half];
        const T s = sign * token_sin[i];
        output[i] = first * token_cos[i] - second * s;
        output[i + half] = second * token_cos[i] + first * s;
      }
      if (output != input) std::copy(input + rotary_dim, input + head_dim, output + rotary_dim);
    }
  }
}

}  // namespace

template <typename T>
void rope_forward(const T* x, const T* cos, const T* sin, int64_t tokens, int64_t heads,
                  int64_t head_dim, int64_t rotary_dim, T* out) {
  rotate_pairs(x, cos, sin, tokens, heads, head_dim, rotary_dim, T(1), out);
}

template <typename T>
void rope_backward(const T* d_out, const T* cos, const T* sin, int64_t tokens, int64_t heads,
                   int64_t head_dim, int64_t rotary_dim, T* d_x) {
  rotate_pairs(d_out, cos, sin, tokens, heads, head_dim, rotary_dim, T(-1), d_x);
}

#define SUROGATE_INSTANTIATE_ROPE(T)                                                               \
  template RopeFrequencies<T> rope_frequencies<T>(const io::RopeConfig&, int64_t);                 \
  template void rope_tables<T>(const RopeFrequencies<T>&, const int32_t*, int64_t, T*, T*);        \
  template void rope_forward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,  \
                                T*);                                                               \
  template void rope_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, \
                                 T*);
SUROGATE_INSTANTIATE_ROPE(float)
SUROGATE_INSTANTIATE_ROPE(double)
#undef SUROGATE_INSTANTIATE_ROPE

}  // namespace surogate::ops
