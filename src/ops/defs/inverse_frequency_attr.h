// The 'inv_freq' attribute of the RoPE table ops (fused_rmsnorm_rope, mrope_cos_sin): a
// non-empty list of numbers, else a UserError naming the node.
#pragma once

#include <vector>

#include "core/error.h"
#include "graph/op_registry.h"

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

}  // namespace surogate::ops::defs
