// Calls one registration function per op family (see register_ops.h).
#include "ops/defs/register_ops.h"

#include "ops/defs/def_util.h"

namespace surogate::ops {

void register_model_ops(graph::OpRegistry& registry) {
  defs::register_embedding_ops(registry);
  defs::register_rmsnorm_ops(registry);
  defs::register_linear_ops(registry);
  defs::register_swiglu_ops(registry);
  defs::register_gelu_ops(registry);
  defs::register_layernorm_ops(registry);
  defs::register_rope_ops(registry);
  defs::register_mrope_ops(registry);
  defs::register_rmsnorm_rope_ops(registry);
  defs::register_attention_ops(registry);
  defs::register_cached_attention_ops(registry);
  defs::register_cross_entropy_ops(registry);
  defs::register_dropout_ops(registry);
  defs::register_concat_split_ops(registry);
  defs::register_reshape_ops(registry);
  defs::register_gather_rows_ops(registry);
  defs::register_dequantize_ops(registry);
  defs::register_dequantize_fp8_blocks_ops(registry);
  defs::register_dequantize_fp4_ops(registry);
  defs::register_fp8_ops(registry);
  defs::register_fp8_output_ops(registry);
  defs::register_fp8_transpose_op(registry);
  defs::register_round_fp16_ops(registry);
  defs::register_moe_router_ops(registry);
  defs::register_moe_dispatch_ops(registry);
  defs::register_expert_linear_ops(registry);
  defs::register_preference_logps_ops(registry);
  defs::register_preference_loss_ops(registry);
  defs::register_greedy_tokens_ops(registry);
  defs::register_decode_linear_ops(registry);
  defs::register_low_rank_products_ops(registry);
  defs::register_sample_tokens_ops(registry);
}

graph::OpRegistry make_model_registry() {
  graph::OpRegistry registry;
  graph::register_core_ops(registry);
  register_model_ops(registry);
  return registry;
}

}  // namespace surogate::ops
