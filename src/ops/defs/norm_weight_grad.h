// The norms' shared attributes. Their backward ops (rmsnorm_backward, fused_residual_rmsnorm_backward,
// fused_rmsnorm_rope_backward) give d_weight only where the weight needs a gradient: their
// gradient rules pass {"weight_grad": false} for a frozen weight (LoRA's base model) and the op
// then has the single output d_x, so no backend spends a reduction over every row on a gradient
// nobody reads.
#pragma once

#include <optional>
#include <vector>

#include "ops/defs/def_util.h"

namespace surogate::ops::defs {

inline bool weight_grad_attr(const graph::Attrs& attrs) { return attrs.boolean_or("weight_grad", true); }

// The norms' `eps` attribute (rmsnorm, fused_residual_rmsnorm, layernorm): required, non-negative.
inline double norm_eps_attr(const graph::Attrs& attrs) {
  const double eps = attrs.number("eps");
  if (!(eps >= 0.0)) fail_user("{}: attribute 'eps' must be non-negative, got {}", attrs.where(), eps);
  return eps;
}

// `attrs` (the forward node's, for ops that share them) plus weight_grad false when the forward
// input `weight_index` needs no gradient.
inline nlohmann::json weight_grad_attrs(const graph::GradientContext& ctx, size_t weight_index,
                                        nlohmann::json attrs = nlohmann::json::object()) {
  if (!ctx.needs_input_grad(weight_index)) attrs["weight_grad"] = false;
  return attrs;
}

// The weight's gradient among the backward op's outputs (its second), when it was asked for.
inline std::optional<graph::TensorId> weight_gradient(const graph::GradientContext& ctx, size_t weight_index,
                                                      const graph::OpOutputs& grads) {
  return ctx.needs_input_grad(weight_index) ? std::optional<graph::TensorId>(grads[1]) : std::nullopt;
}

// Output types: d_x, then d_weight unless the node has weight_grad false.
inline std::vector<graph::TensorType> backward_types(const graph::InferContext& ctx, const graph::TensorType& d_x,
                                                     const graph::TensorType& d_weight) {
  if (!weight_grad_attr(ctx.attrs)) return {d_x};
  return {d_x, d_weight};
}

// The CPU kernels' d_weight: the second output zero-filled (the math accumulates into it), or
// null when the node has none.
template <typename T>
T* weight_gradient_out(const graph::CpuKernelArgs& args) {
  if (args.outputs.size() < 2) return nullptr;
  zero_fill(args.outputs[1]);
  return args.outputs[1].as<T>();
}

}  // namespace surogate::ops::defs
