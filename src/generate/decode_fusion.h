// The decode graph's products fused for a step of one or two rows, where each launch reads its
// weights once at HBM speed and the launches themselves cost (cuda/kernels/decode_gemv.h):
//   * swiglu(g, u) whose g and u are products of one x (linear, or linear_add: a LoRA adapter's
//     output as addend), read by nothing else, becomes linear_swiglu(x, gate, up, addends...);
//   * two or three more products of one x (q, k, v), independent of each other, become one
//     linear_group(x, w..., addends...) writing the same tensors;
//   * a cached_attention whose q and k are each a fused_rmsnorm_rope's output read by it alone
//     (Qwen3's q and k norms, their rstd unread) becomes one qk_norm_rope_cached_attention (on CUDA
//     the attention's split blocks normalise and rotate their own queries and new keys: a Qwen3-8B
//     layer 109.9 → 108.8 µs at 640 cached tokens), where the kernels take the head size (16 to
//     256, full rotary);
//   * two such norms after a group that the attention does not take alone become one
//     fused_qk_rmsnorm_rope (one launch for both on CUDA).
// Only exact forms are taken: products with no bias and no scale (an adapter's own rank-r
// products, which feed another member's addend, stay as they are); the fused ops compute what the
// nodes they replace computed (ops/defs/decode_linear_def.cpp), so the CPU backend gives the same
// values and the CUDA backend the same up to its kernels' summation order. Forward graphs only.
// A graph with a LoRA adapter (any linear_add) keeps its products unfused: on the H200
// (2026-11-29) the fused step with an adapter left the CPU model's logits by 5.7e-2 on one fixture
// (bound 5e-2) and no fused-against-unfused CUDA comparison has told yet whether that is bf16
// noise. Its q/k norms still go into the attention (the same bits as the norm kernels').
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace surogate::generate {

// The most rows (B · T) of a decode graph whose products the CUDA decode GEMV takes in one launch
// (cuda::kDecodeGemvMaxRows); kv_cache_plans.cpp fuses the CUDA decode plans up to it.
inline constexpr int64_t kFusedDecodeRows = 2;

graph::Graph fuse_decode_products(const graph::Graph& decode, const graph::OpRegistry& registry);

}  // namespace surogate::generate
