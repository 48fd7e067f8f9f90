// The LM head's first three inputs, shared by the ops that read it (cross_entropy_def.cpp,
// preference_logps_def.cpp): hidden (0) [..., D] floating, weight (1) [V, D] of hidden's dtype,
// labels (2) I32 with one value per row of hidden. Returns the row count.
#pragma once

#include <cstdint>

#include "graph/op_registry.h"

namespace surogate::ops::defs {

inline int64_t check_lm_head_inputs(const graph::InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_min_rank(0, 1);
  ctx.expect_rank(1, 2);
  if (ctx.input(1).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of {}", ctx.input_label(1), ctx.input_label(0));
  ctx.expect_dim(0, -1, ctx.input(1).shape[1]);
  ctx.expect_dtype(2, DType::I32);
  const int64_t rows = ctx.input(0).numel() / ctx.input(1).shape[1];
  if (ctx.input(2).numel() != rows) {
    ctx.fail("{} must hold one label per row of {} ({} rows)", ctx.input_label(2), ctx.input_label(0), rows);
  }
  return rows;
}

}  // namespace surogate::ops::defs
