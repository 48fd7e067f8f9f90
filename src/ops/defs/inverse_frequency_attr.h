// The 'inv_freq' attribute of the RoPE table ops (fused_rmsnorm_rope, mrope_cos_sin,
// qk_norm_rope_cached_attention): a non-empty list of numbers, else a UserError naming the node;
// and the frequencies in T's precision with the 'attention_scaling' attribute, as the CPU kernels
// take them.
#pragma once

#include <vector>

#include "core/error.h"
#include "graph/op_registry.h"
#include "ops/rope.h"

namespace surogate::ops::defs {

inline std::vector<double> inverse_frequency_attr(const graph::Attrs& attrs) {
  const nlohmann::json& values = attrs.raw().contains("inv_freq") ? attrs.raw().at("inv_freq") : nlohmann::json();
  if (!values.is_array() || values.empty()) {
    fail_user("{}: attribute 'inv_freq' must be a non-empty list of numbers", attrs.where());
  }
  std::vector<double> inverse;
  for (const auto& value : values) {
    if (!value.is_number()) fail_user("{}: attribute 'inv_freq' must be a list of numbers", attrs.where());
    inverse.push_back(value.get<double>());
  }
  return inverse;
}

// The frequencies in T's precision, as rope_cos_sin's binder forms them from the same attrs.
template <typename T>
RopeFrequencies<T> frequencies_from_attrs(const graph::Attrs& attrs) {
  RopeFrequencies<T> frequencies;
  for (double value : inverse_frequency_attr(attrs)) frequencies.inverse_frequency.push_back(static_cast<T>(value));
  frequencies.attention_scaling = static_cast<T>(attrs.number_or("attention_scaling", 1.0));
  return frequencies;
}

}  // namespace surogate::ops::defs
