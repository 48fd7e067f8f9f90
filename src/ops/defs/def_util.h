// Shared helpers of the graph op definitions in src/ops/defs/: dtype dispatch for CPU binders
// (F32 and F64; F64 is what the finite-difference gradient checks run in), zero-filling of
// accumulated parameter-gradient outputs (the ops math ADDS into d_W / d_b / d_table while the
// kernel contract says arena outputs are never cleared), and the per-family registration
// functions that register_ops.cpp calls.
#pragma once

#include <cstring>
#include <optional>

#include "core/dtype.h"
#include "graph/op_registry.h"

namespace surogate::ops::defs {

// Calls body(T{}) with T = float or double after `dtype`; any other dtype is a UserError
// naming the node (the CPU backend runs F32, and F64 in gradient checks).
template <typename Body>
graph::CpuKernel bind_floating(const graph::CpuBindContext& ctx, DType dtype, Body body) {
  if (dtype == DType::F32) return body(float{});
  if (dtype == DType::F64) return body(double{});
  fail_user("node '{}' (op {}): the CPU backend runs F32 or F64 tensors, got {}", ctx.node.name, ctx.node.op,
            dtype_safetensors_name(dtype));
}

// Sets every element of an output to zero (before a kernel that accumulates into it).
inline void zero_fill(const graph::CpuTensorView& view) {
  std::memset(view.data, 0, static_cast<size_t>(view.count) * dtype_size_bytes(view.dtype));
}

inline int64_t last_dim(const graph::TensorType& type) { return type.shape.empty() ? 1 : type.shape.back(); }

// `id` when the forward input `index` needs a gradient, else std::nullopt.
inline std::optional<graph::TensorId> if_needed(const graph::GradientContext& ctx, size_t index, graph::TensorId id) {
  return ctx.needs_input_grad(index) ? std::optional<graph::TensorId>(id) : std::nullopt;
}

void register_embedding_ops(graph::OpRegistry& registry);      // embedding_def.cpp
void register_rmsnorm_ops(graph::OpRegistry& registry);        // rmsnorm_def.cpp
void register_linear_ops(graph::OpRegistry& registry);         // linear_def.cpp
void register_swiglu_ops(graph::OpRegistry& registry);         // swiglu_def.cpp
void register_gelu_ops(graph::OpRegistry& registry);           // gelu_def.cpp
void register_layernorm_ops(graph::OpRegistry& registry);      // layernorm_def.cpp
void register_rope_ops(graph::OpRegistry& registry);           // rope_def.cpp
void register_mrope_ops(graph::OpRegistry& registry);          // mrope_def.cpp
void register_rmsnorm_rope_ops(graph::OpRegistry& registry);   // rmsnorm_rope_def.cpp
void register_attention_ops(graph::OpRegistry& registry);      // attention_def.cpp
void register_cached_attention_ops(graph::OpRegistry& registry);  // cached_attention_def.cpp
void register_cross_entropy_ops(graph::OpRegistry& registry);  // cross_entropy_def.cpp
void register_dropout_ops(graph::OpRegistry& registry);        // dropout_def.cpp
void register_concat_split_ops(graph::OpRegistry& registry);   // concat_split_def.cpp
void register_reshape_ops(graph::OpRegistry& registry);        // reshape_def.cpp
void register_gather_rows_ops(graph::OpRegistry& registry);    // gather_rows_def.cpp
void register_dequantize_ops(graph::OpRegistry& registry);     // dequantize_nf4_def.cpp
void register_fp8_ops(graph::OpRegistry& registry);            // fp8_linear_def.cpp
void register_fp8_output_ops(graph::OpRegistry& registry);     // fp8_output_def.cpp (after rmsnorm, swiglu)
void register_fp8_transpose_op(graph::OpRegistry& registry);   // fp8_transpose_def.cpp
void register_dequantize_fp8_blocks_ops(graph::OpRegistry& registry);  // dequantize_fp8_blocks_def.cpp
void register_dequantize_fp4_ops(graph::OpRegistry& registry);  // dequantize_fp4_def.cpp
void register_round_fp16_ops(graph::OpRegistry& registry);     // round_fp16_def.cpp
void register_moe_router_ops(graph::OpRegistry& registry);     // moe_router_def.cpp
void register_moe_dispatch_ops(graph::OpRegistry& registry);   // moe_dispatch_def.cpp
void register_expert_linear_ops(graph::OpRegistry& registry);  // expert_linear_def.cpp
void register_preference_logps_ops(graph::OpRegistry& registry);  // preference_logps_def.cpp
void register_preference_loss_ops(graph::OpRegistry& registry);    // preference_loss_def.cpp
void register_greedy_tokens_ops(graph::OpRegistry& registry);      // greedy_tokens_def.cpp
void register_decode_linear_ops(graph::OpRegistry& registry);      // decode_linear_def.cpp
void register_low_rank_products_ops(graph::OpRegistry& registry);  // low_rank_products_def.cpp
void register_sample_tokens_ops(graph::OpRegistry& registry);      // sample_tokens_def.cpp

}  // namespace surogate::ops::defs
