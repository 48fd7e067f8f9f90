// CUDA binders of the generation ops: cached_attention (ops/defs/cached_attention_def.cpp) over
// cuda/kernels/cached_attention.h, on BF16, F16 or F32 graphs, qk_norm_rope_cached_attention (the
// q/k norm + RoPE folded into the attention's launch where it can be) on BF16 and F16, greedy_tokens
// (ops/defs/greedy_tokens_def.cpp) over cuda/kernels/greedy_tokens.h and sample_tokens
// (ops/defs/sample_tokens_def.cpp) over cuda/kernels/sample_tokens.h. The attention op writes its k_cache / v_cache
// INPUTS in place (the new tokens' keys and values are appended before attending); the plan gives
// them a persistent home (generate/decode_graph.h). The split kernel's fp32 partials live in the
// shared scratch; the split count is fixed at load time from the shape and the GPU's SM count, so
// a captured CUDA graph replays the same launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/greedy_tokens.h"
#include "cuda/kernels/sample_tokens.h"
#include "runtime/cuda_bind_checks.h"
#include "runtime/cuda_op_table.h"

namespace surogate::runtime {
namespace {

constexpr size_t kCachedKeys = 3, kCachedValues = 4, kCachedSlots = 5, kCachedLengths = 6, kCachedNew = 7;

// The kernels' shape from the bound types (the op's shape rule has checked them): heads and head
// size from the cache [N, S, Hkv, D], query heads from q's size, so both q forms (4-D, flat) read
// the same.
cuda::CachedAttentionShape cached_shape(const CudaBindContext& ctx) {
  const graph::Shape& q = ctx.inputs[0].shape;
  const graph::Shape& cache = ctx.inputs[kCachedKeys].shape;
  cuda::CachedAttentionShape shape;
  shape.batch = q[0];
  shape.sequence = q[1];
  shape.slots = cache[0];
  shape.capacity = cache[1];
  shape.kv_heads = static_cast<int>(cache[2]);
  shape.head_dim = static_cast<int>(cache[3]);
  shape.q_heads = static_cast<int>(ctx.inputs[0].numel() / (shape.batch * shape.sequence * shape.head_dim));
  shape.window = static_cast<int>(ctx.attrs.integer_or("window", 0));
  shape.scale = static_cast<float>(ctx.attrs.number_or("scale", 0.0));
  require(ctx, shape.head_dim % 8 == 0 && shape.head_dim <= 256,
          "the CUDA cached attention takes head_dim a multiple of 8 up to 256, got {}", shape.head_dim);
  require(ctx, shape.batch <= 65535, "the CUDA cached attention takes at most 65535 rows, got {}", shape.batch);
  return shape;
}

template <typename T>
constexpr DType cached_dtype() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::F32;
  } else {
    return element_dtype<T>();
  }
}

// cached_attention (q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths) -> out.
template <typename T>
CudaKernel bind_cached_attention_typed(const CudaBindContext& ctx) {
  for (size_t index = 0; index <= kCachedValues; ++index) expect_in(ctx, index, cached_dtype<T>());
  for (size_t index : {kCachedSlots, kCachedLengths, kCachedNew}) expect_in(ctx, index, DType::I32);
  expect_out(ctx, 0, cached_dtype<T>());
  const cuda::CachedAttentionShape shape = cached_shape(ctx);
  const int splits = cuda::cached_attention_splits(shape);
  ScratchLayout layout;
  const size_t workspace = layout.take(sizeof(float) * cuda::cached_attention_workspace_floats(shape, splits));
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    // The caches are inputs written in place (see the top of this file).
    T* k_cache = args.inputs[kCachedKeys].as<T>();
    T* v_cache = args.inputs[kCachedValues].as<T>();
    const int32_t* slots = args.inputs[kCachedSlots].as<const int32_t>();
    const int32_t* lengths = args.inputs[kCachedLengths].as<const int32_t>();
    const int32_t* fresh = args.inputs[kCachedNew].as<const int32_t>();
    cuda::cached_attention_append_forward(args.outputs[0].as<T>(), scratch_at<float>(resources, workspace),
                                          args.inputs[0].as<const T>(), args.inputs[1].as<const T>(),
                                          args.inputs[2].as<const T>(), k_cache, v_cache, slots, lengths, fresh, shape,
                                          splits, args.stream);
  };
}
CudaKernel bind_cached_attention(const CudaBindContext& ctx) {
  if (ctx.inputs[0].dtype == DType::F32) return bind_cached_attention_typed<float>(ctx);
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_cached_attention_typed<T>(ctx); });
}

// qk_norm_rope_cached_attention (q, k, v, k_cache, v_cache, slot_ids, cache_lengths, new_lengths,
// q_weight, k_weight, position_ids) -> out. A head size the q/k norm kernels do not take is refused
// (generate/decode_fusion.h makes the node only where they do).
template <typename T>
CudaKernel bind_qk_norm_rope_cached_attention_typed(const CudaBindContext& ctx) {
  constexpr size_t kQWeight = 8, kKWeight = 9, kPositions = 10;
  for (size_t index : {size_t{0}, size_t{1}, size_t{2}, kCachedKeys, kCachedValues, kQWeight, kKWeight}) {
    expect_in(ctx, index, element_dtype<T>());
  }
  for (size_t index : {kCachedSlots, kCachedLengths, kCachedNew, kPositions}) expect_in(ctx, index, DType::I32);
  expect_out(ctx, 0, element_dtype<T>());
  const cuda::CachedAttentionShape shape = cached_shape(ctx);
  require(ctx, cuda::cached_attention_norm_rope_takes(shape),
          "qk_norm_rope_cached_attention takes head_dim 16, 32, 64, 128 or 256 on CUDA, got {}", shape.head_dim);
  const auto inverse_frequency = device_inverse_frequency(ctx);
  const float epsilon = static_cast<float>(ctx.attrs.number_or("eps", 0.0));
  const float scaling = static_cast<float>(ctx.attrs.number_or("attention_scaling", 1.0));
  const int splits = cuda::cached_attention_splits(shape);
  ScratchLayout layout;
  const size_t workspace = layout.take(sizeof(float) * cuda::cached_attention_workspace_floats(shape, splits));
  const size_t normed = layout.take(static_cast<size_t>(cuda::cached_attention_norm_rope_scratch_bytes(shape)));
  ctx.resources.reserve_scratch(layout.bytes);
  CudaResources* resources = &ctx.resources;
  return [=](const CudaKernelArgs& args) {
    const cuda::CachedNormRope<T> norm{.q_weight = args.inputs[kQWeight].as<const T>(),
                                       .k_weight = args.inputs[kKWeight].as<const T>(),
                                       .inv_freq = inverse_frequency->data(),
                                       .position_ids = args.inputs[kPositions].as<const int32_t>(),
                                       .epsilon = epsilon,
                                       .scaling = scaling};
    // The caches are inputs written in place (see the top of this file).
    cuda::cached_attention_norm_rope_append_forward(
        args.outputs[0].as<T>(), scratch_at<float>(resources, workspace), scratch_at<unsigned char>(resources, normed),
        args.inputs[0].as<const T>(), args.inputs[1].as<const T>(), args.inputs[2].as<const T>(),
        args.inputs[kCachedKeys].as<T>(), args.inputs[kCachedValues].as<T>(), args.inputs[kCachedSlots].as<const int32_t>(),
        args.inputs[kCachedLengths].as<const int32_t>(), args.inputs[kCachedNew].as<const int32_t>(), norm, shape, splits,
        args.stream);
  };
}
CudaKernel bind_qk_norm_rope_cached_attention(const CudaBindContext& ctx) {
  return by_element_type(ctx.inputs[0].dtype,
                         [&]<typename T>() { return bind_qk_norm_rope_cached_attention_typed<T>(ctx); });
}

// greedy_tokens (logits [..., V]) -> tokens I32 [...].
template <typename T>
CudaKernel bind_greedy_tokens_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, cached_dtype<T>());
  expect_out(ctx, 0, DType::I32);
  const int64_t vocab = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / vocab;
  return [=](const CudaKernelArgs& args) {
    cuda::greedy_tokens(args.outputs[0].as<int32_t>(), args.inputs[0].as<const T>(), rows, vocab, args.stream);
  };
}
CudaKernel bind_greedy_tokens(const CudaBindContext& ctx) {
  if (ctx.inputs[0].dtype == DType::F32) return bind_greedy_tokens_typed<float>(ctx);
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_greedy_tokens_typed<T>(ctx); });
}

// sample_tokens (logits [..., V], params I32 [..., 8], context I32 [..., C]) -> tokens I32 [...].
template <typename T>
CudaKernel bind_sample_tokens_typed(const CudaBindContext& ctx) {
  expect_in(ctx, 0, cached_dtype<T>());
  expect_out(ctx, 0, DType::I32);
  const int64_t vocab = last(ctx.inputs[0]), rows = ctx.inputs[0].numel() / vocab, width = last(ctx.inputs[2]);
  return [=](const CudaKernelArgs& args) {
    cuda::sample_tokens(args.outputs[0].as<int32_t>(), args.inputs[0].as<const T>(), rows, vocab,
                        reinterpret_cast<const RowSampling*>(args.inputs[1].as<const int32_t>()),
                        args.inputs[2].as<const int32_t>(), width, args.stream);
  };
}
CudaKernel bind_sample_tokens(const CudaBindContext& ctx) {
  if (ctx.inputs[0].dtype == DType::F32) return bind_sample_tokens_typed<float>(ctx);
  return by_element_type(ctx.inputs[0].dtype, [&]<typename T>() { return bind_sample_tokens_typed<T>(ctx); });
}

}  // namespace

void register_generation_cuda_ops(CudaOpTable& table) {
  table.add("cached_attention", bind_cached_attention);
  table.add("qk_norm_rope_cached_attention", bind_qk_norm_rope_cached_attention);
  table.add("greedy_tokens", bind_greedy_tokens);
  table.add("sample_tokens", bind_sample_tokens);
}

}  // namespace surogate::runtime
