// The q / k / v forms every attention op takes (attention, attention_backward, cached_attention):
// 4-D q [B, T, Hq, D], k, v [B, T, Hkv, D] (heads from the shapes), or flat q [B, T, Hq·D],
// k, v [B, T, Hkv·D] with attrs {query_heads, kv_heads, head_dim}. One rule, so a graph pass that
// swaps one attention op for another (generate/decode_graph.h) keeps its q / k / v as they are.
#pragma once

#include <cstdint>
#include <tuple>
#include <utility>

#include "graph/op_registry.h"

namespace surogate::ops::defs {

struct AttentionHeads {
  int64_t batch = 0, sequence = 0, query_heads = 0, kv_heads = 0, head_dim = 0;
};

// Checks inputs 0..2 (q, k, v): floating, one dtype, one of the two forms, Hq a multiple of Hkv.
inline AttentionHeads attention_heads(const graph::InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_same_type(1, 2);
  if (ctx.input(1).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of {}", ctx.input_label(1), ctx.input_label(0));
  AttentionHeads heads;
  const graph::Shape& q = ctx.input(0).shape;
  const graph::Shape& k = ctx.input(1).shape;
  if (q.size() == 4) {
    ctx.expect_rank(1, 4);
    heads.query_heads = q[2];
    heads.kv_heads = k[2];
    heads.head_dim = q[3];
    ctx.expect_dim(1, 3, heads.head_dim);
  } else {
    ctx.expect_rank(0, 3);
    ctx.expect_rank(1, 3);
    heads.query_heads = ctx.attrs.integer("query_heads");
    heads.kv_heads = ctx.attrs.integer("kv_heads");
    heads.head_dim = ctx.attrs.integer("head_dim");
    if (heads.query_heads <= 0 || heads.kv_heads <= 0 || heads.head_dim <= 0) {
      ctx.fail("attributes 'query_heads', 'kv_heads' and 'head_dim' must be positive");
    }
    ctx.expect_dim(0, 2, heads.query_heads * heads.head_dim);
    ctx.expect_dim(1, 2, heads.kv_heads * heads.head_dim);
  }
  heads.batch = q[0];
  heads.sequence = q[1];
  ctx.expect_dim(1, 0, heads.batch);
  ctx.expect_dim(1, 1, heads.sequence);
  if (heads.query_heads % heads.kv_heads != 0) {
    ctx.fail("query heads ({}) must be a multiple of kv heads ({})", heads.query_heads, heads.kv_heads);
  }
  return heads;
}

// The heads' fields of an op's shape struct (ops::AttentionShape, ops::CachedAttentionShape).
template <typename OpShape>
OpShape with_heads(const AttentionHeads& heads) {
  OpShape shape;
  std::tie(shape.batch, shape.sequence) = std::pair(heads.batch, heads.sequence);
  std::tie(shape.query_heads, shape.kv_heads, shape.head_dim) =
      std::tuple(heads.query_heads, heads.kv_heads, heads.head_dim);
  return shape;
}

}  // namespace surogate::ops::defs
