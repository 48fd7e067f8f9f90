// Graph op "cached_attention", over ops/cached_attention.h: attention of a batch's new tokens over
// the keys and values a KV cache holds for their slots (generation: prefill chunks and decode).
//   cached_attention(q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths) -> out (q's type)
//     q, k, v as "attention" takes them (ops/defs/attention_heads.h): [B, T, H, D], or flat
//     [B, T, H·D] with attrs {query_heads, kv_heads, head_dim}; attrs window (0 = full causal)
//     and scale (0 = 1/√D) as attention's.
//     k_cache, v_cache [N, S, Hkv, D] in q's dtype (N slots of S positions);
//     slot_ids, cache_lengths, new_lengths I32 [B]: row b is slot slot_ids[b], which holds
//     cache_lengths[b] tokens; its first new_lengths[b] ≤ T tokens are real, the rest padding
//     (their outputs are zero).
//
// IN PLACE: the op WRITES INTO ITS INPUTS k_cache and v_cache (it appends the real new tokens'
// keys and values at [slot, cache_length + t] before attending) — the one op whose inputs are
// not read-only. Those tensors must therefore be persistent, never in the reusable activation
// arena and never inputs the caller rewrites per execute: generate/decode_graph.h declares them
// constants of the decode plan (the Parameters region, zeroed at load, shared by name between
// plans that share parameters: CudaBackend / CpuBackend::share_parameters_with). The every-op
// test feeds them as plain graph inputs, which is safe there (one execute per case). A row's
// position bounds (slot in [0, N), no slot twice, L + n ≤ S) are checked by the CPU kernel
// (ops::check_cache_rows, UserError); the caller (generate/kv_cache_model.cpp) checks them first.
//
// Graph op "qk_norm_rope_cached_attention": Qwen3's q and k norms + RoPE (fused_qk_rmsnorm_rope's
// forward) feeding cached_attention, as one node:
//   qk_norm_rope_cached_attention(q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths,
//                                 q_weight, k_weight, position_ids) -> out
//     q, k the projections before their norms; q_weight, k_weight [head_dim] in q's dtype;
//     position_ids I32 of B · T elements ([B, T] or flat); attrs cached_attention's and the norm's eps, inv_freq (head_dim / 2
//     frequencies: full rotary) and attention_scaling. The same IN-PLACE caches as cached_attention.
// generate/decode_fusion.h makes it for a CUDA decode step, where the attention's split blocks
// normalise and rotate their own queries and new keys (cuda/kernels/cached_attention.h): one launch
// less. The CPU kernel is the two ops' kernels in turn, so it computes what they computed.
//
// Forward only: generation needs no gradient (`.gradient = {}`: autodiff refuses a graph that
// would need one through it).
#include "ops/cached_attention.h"
#include "ops/defs/attention_heads.h"
#include "ops/defs/def_util.h"
#include "ops/defs/inverse_frequency_attr.h"
#include "ops/rmsnorm_rope.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

constexpr size_t kKeyCache = 3, kValueCache = 4, kSlotIds = 5, kCacheLengths = 6, kNewLengths = 7;
constexpr size_t kQWeight = 8, kKWeight = 9, kPositionIds = 10;  // qk_norm_rope_cached_attention's

const std::vector<std::string> kCachedAttentionInputs{"q",       "k",       "v",           "k_cache",
                                                      "v_cache", "slot_ids", "cache_lengths", "new_lengths"};
const std::vector<std::string> kNormedInputs{"q",           "k",           "v",        "k_cache",  "v_cache",     "slot_ids",
                                             "cache_lengths", "new_lengths", "q_weight", "k_weight", "position_ids"};

// Inputs 0..7 as cached_attention takes them (OpRegistry::infer has checked the input count).
CachedAttentionShape cached_attention_layout(const InferContext& ctx) {
  CachedAttentionShape shape = with_heads<CachedAttentionShape>(attention_heads(ctx));
  ctx.expect_rank(kKeyCache, 4);
  ctx.expect_same_type(kKeyCache, kValueCache);
  const TensorType& cache = ctx.input(kKeyCache);
  if (cache.dtype != ctx.input(0).dtype || cache.shape[2] != shape.kv_heads || cache.shape[3] != shape.head_dim) {
    ctx.fail("{} must be {}[slots, capacity, {}, {}] (q's dtype, kv heads, head dim)", ctx.input_label(kKeyCache),
             dtype_safetensors_name(ctx.input(0).dtype), shape.kv_heads, shape.head_dim);
  }
  shape.slots = cache.shape[0];
  shape.capacity = cache.shape[1];
  if (shape.slots < 1 || shape.capacity < 1) ctx.fail("{} holds no positions", ctx.input_label(kKeyCache));
  for (size_t index : {kSlotIds, kCacheLengths, kNewLengths}) {
    if (ctx.input(index) != TensorType{DType::I32, Shape{shape.batch}}) {
      ctx.fail("{} must be I32[{}] (one per batch row)", ctx.input_label(index), shape.batch);
    }
  }
  shape.window = ctx.attrs.integer_or("window", 0);
  if (shape.window < 0) ctx.fail("attribute 'window' must be 0 (full causal) or positive, got {}", shape.window);
  shape.scale = ctx.attrs.number_or("scale", 0.0);
  return shape;
}

// qk_norm_rope_cached_attention's layout: cached_attention's, then the norm's weights, positions and attrs.
CachedAttentionShape normed_layout(const InferContext& ctx) {
  const CachedAttentionShape shape = cached_attention_layout(ctx);
  for (size_t index : {kQWeight, kKWeight}) {
    if (ctx.input(index) != TensorType{ctx.input(0).dtype, Shape{shape.head_dim}}) {
      ctx.fail("{} must be {}[{}] (q's dtype, head dim)", ctx.input_label(index), dtype_safetensors_name(ctx.input(0).dtype),
               shape.head_dim);
    }
  }
  ctx.expect_dtype(kPositionIds, DType::I32);
  if (ctx.input(kPositionIds).numel() != shape.batch * shape.sequence) {
    ctx.fail("{} must hold one position per token ({})", ctx.input_label(kPositionIds), shape.batch * shape.sequence);
  }
  if (!(ctx.attrs.number("eps") >= 0.0)) ctx.fail("attribute 'eps' must be non-negative");
  if (2 * static_cast<int64_t>(inverse_frequency_attr(ctx.attrs).size()) != shape.head_dim) {
    ctx.fail("attribute 'inv_freq' must hold head_dim / 2 = {} frequencies (full rotary)", shape.head_dim / 2);
  }
  return shape;
}

void register_qk_norm_rope_cached_attention(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "qk_norm_rope_cached_attention",
      .inputs = kNormedInputs,
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        normed_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, kNormedInputs, ctx.node.attrs);
        const CachedAttentionShape shape = normed_layout(infer);
        const double eps = ctx.attrs.number("eps");
        return bind_floating(ctx, ctx.inputs[0].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [shape, eps, frequencies = frequencies_from_attrs<T>(ctx.attrs)](const CpuKernelArgs& args) {
            const int64_t tokens = shape.batch * shape.sequence;
            const RmsnormRopeShape q_shape{tokens, shape.query_heads, shape.head_dim};
            const RmsnormRopeShape k_shape{tokens, shape.kv_heads, shape.head_dim};
            std::vector<T> q(static_cast<size_t>(tokens * shape.query_heads * shape.head_dim));
            std::vector<T> k(static_cast<size_t>(tokens * shape.kv_heads * shape.head_dim));
            std::vector<T> rstd(static_cast<size_t>(tokens * (shape.query_heads + shape.kv_heads)));
            const int32_t* positions = args.inputs[kPositionIds].as<int32_t>();
            rmsnorm_rope_forward(args.inputs[0].as<T>(), args.inputs[kQWeight].as<T>(), frequencies, positions, q_shape,
                                 eps, q.data(), rstd.data());
            rmsnorm_rope_forward(args.inputs[1].as<T>(), args.inputs[kKWeight].as<T>(), frequencies, positions, k_shape,
                                 eps, k.data(), rstd.data() + tokens * shape.query_heads);
            // k_cache / v_cache are written in place (see the top of this file).
            cached_attention_forward(shape, q.data(), k.data(), args.inputs[2].as<T>(), args.inputs[kKeyCache].as<T>(),
                                     args.inputs[kValueCache].as<T>(), args.inputs[kSlotIds].as<int32_t>(),
                                     args.inputs[kCacheLengths].as<int32_t>(), args.inputs[kNewLengths].as<int32_t>(),
                                     args.outputs[0].as<T>());
          };
        });
      },
      // cached_attention's bounds: the norm's rounding (1e-2 in bf16) moves the scores less than
      // the attention's own bf16 output rounding does.
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 2e-2},
  });
}

void register_cached_attention(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "cached_attention",
      .inputs = kCachedAttentionInputs,
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        cached_attention_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, kCachedAttentionInputs, ctx.node.attrs);
        const CachedAttentionShape shape = cached_attention_layout(infer);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            // k_cache / v_cache are written in place (see the top of this file).
            cached_attention_forward(shape, args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(),
                                     args.inputs[kKeyCache].as<T>(), args.inputs[kValueCache].as<T>(),
                                     args.inputs[kSlotIds].as<int32_t>(), args.inputs[kCacheLengths].as<int32_t>(),
                                     args.inputs[kNewLengths].as<int32_t>(), args.outputs[0].as<T>());
          };
        });
      },
      // attention's forward bounds (out 1e-2 in bf16, test_model_kernels.cpp): the same softmax
      // over the same keys, read from the cache instead of the batch.
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-4, .bf16 = 2e-2},
  });
}

}  // namespace

void register_cached_attention_ops(OpRegistry& registry) {
  register_cached_attention(registry);
  register_qk_norm_rope_cached_attention(registry);
}

}  // namespace surogate::ops::defs
