// One request's Qwen3-8B decode layer (hidden 4096, 32 / 8 heads of 128, MLP 12288) launched kernel
// by kernel as the decode graph launches it — ln1 = residual add + RMSNorm, q/k/v (one decode_gemv),
// the cached attention with the q/k norm + RoPE and the append folded in, o_proj, ln2, gate/up/SwiGLU
// (one launch), down_proj; every kernel programmatically launched (its overlap takes effect inside a
// captured graph) — over `layers` layers with their own weights and caches. Shared by
// bench/decode_layer_bench.cpp (its timing and ablations) and
// tests/runtime_cuda/test_decode_layer_chain_cuda.cpp (the captured chain against the eager one).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/decode_gemv.h"
#include "cuda/kernels/qk_norm_rope.h"
#include "cuda/kernels/rmsnorm.h"

namespace surogate::bench::decode_chain {

using cuda::DeviceBuffer;
using Bf16 = __nv_bfloat16;

constexpr int64_t kHidden = 4096, kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 12288, kVocab = 151936;
constexpr int64_t kQ = kQHeads * kHeadDim, kKv = kKvHeads * kHeadDim;
// One layer's weights end to end: q, k, v, o, gate, up, down.
constexpr int64_t kQkvElements = (kQ + 2 * kKv) * kHidden, kOElements = kQ * kHidden, kGateElements = kFfn * kHidden;
constexpr int64_t kLayerElements = kQkvElements + kOElements + 3 * kGateElements;

// `elements` bf16 values, every byte 0x3c (0x3c3c ≈ 0.0115): the bench's weights and buffers.
inline DeviceBuffer<Bf16> filled(int64_t elements) {
  DeviceBuffer<Bf16> out(static_cast<size_t>(elements));
  CUDA_CHECK(cudaMemset(out.data(), 0x3c, out.bytes()));
  return out;
}

struct Variant {
  std::string name;
  bool skip_norms = false, skip_append = false, skip_rope = false, skip_attention = false;
  // Choices the graph makes, varied: rows a block of q/k/v, o_proj, gate/up/SwiGLU and down_proj
  // (0: the kernel's rule) and the cached attention's splits (0: cached_attention_splits' choice).
  int qkv_rows = 8, o_rows = 8, splits = 0, swiglu_rows = 8, down_rows = 8;
  // The q/k norm + RoPE done by the attention's split blocks (cached_attention_norm_rope_append_forward)
  // rather than its own launch before.
  bool fold_qk_norm = true;
};

struct Layers {
  std::vector<DeviceBuffer<Bf16>> weights, k_caches, v_caches;
  // The residual stream ping-pongs between two buffers.
  DeviceBuffer<Bf16> stream_a = filled(kHidden), stream_b = filled(kHidden), pending = filled(kHidden),
                     normed = filled(kHidden), norm_weight = filled(kHidden), qkv = filled(kQ + 2 * kKv),
                     attention = filled(kQ), act = filled(kFfn), q_norm = filled(kHeadDim), k_norm = filled(kHeadDim);
  DeviceBuffer<float> rstd{static_cast<size_t>(kQHeads + kKvHeads + 1)}, inv_freq{static_cast<size_t>(kHeadDim / 2)},
      workspace;
  DeviceBuffer<int32_t> slot_ids{1}, cache_lengths{1}, new_lengths{1}, positions{1};
  DeviceBuffer<unsigned char> norm_scratch;
  surogate::cuda::CachedAttentionShape shape;
  int splits = 0;

  // `layers` layers over caches of `context` positions, each holding context - 1 tokens; `make`
  // gives each layer's weights and caches (filled's bytes unless told).
  Layers(int64_t context, int layers, const std::function<DeviceBuffer<Bf16>(int64_t elements)>& make = filled) {
    for (int i = 0; i < layers; ++i) {
      weights.push_back(make(kLayerElements));
      k_caches.push_back(make(context * kKv));
      v_caches.push_back(make(context * kKv));
    }
    shape.batch = shape.slots = 1;
    shape.sequence = 1;
    shape.capacity = context;
    shape.q_heads = kQHeads;
    shape.kv_heads = kKvHeads;
    shape.head_dim = kHeadDim;
    splits = surogate::cuda::cached_attention_splits(shape);
    norm_scratch = DeviceBuffer<unsigned char>(static_cast<size_t>(surogate::cuda::cached_attention_norm_rope_scratch_bytes(shape)));
    workspace = DeviceBuffer<float>(static_cast<size_t>(surogate::cuda::cached_attention_workspace_floats(shape, std::max(splits, 32))));
    CUDA_CHECK(cudaMemset(inv_freq.data(), 0, inv_freq.bytes()));
    const int32_t zero = 0, held = static_cast<int32_t>(context - 1), one = 1;
    CUDA_CHECK(cudaMemcpy(slot_ids.data(), &zero, 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cache_lengths.data(), &held, 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(positions.data(), &held, 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(new_lengths.data(), &one, 4, cudaMemcpyHostToDevice));
  }

  // ln: residual + pending into `next`, normalised into `normed`.
  void norm(const Variant& variant, const Bf16* residual, Bf16* next, cudaStream_t stream) {
    if (variant.skip_norms) return;
    surogate::cuda::residual_rmsnorm_forward(normed.data(), next, rstd.data() + kQHeads + kKvHeads, residual,
                                             pending.data(), norm_weight.data(), 1, kHidden, 1e-6f, stream);
  }

  void layer(int index, const Variant& variant, cudaStream_t stream) {
    const Bf16* w = weights[static_cast<size_t>(index)].data();
    const Bf16* o_weight = w + kQkvElements;
    const Bf16* gate = o_weight + kOElements;
    const Bf16* up = gate + kGateElements;
    const Bf16* down = up + kGateElements;
    // ln1: stream_a + pending -> stream_b
    norm(variant, stream_a.data(), stream_b.data(), stream);
    Bf16* q = qkv.data();
    Bf16* k = q + kQ;
    Bf16* v = k + kKv;
    const surogate::cuda::DecodeGemvWeight<Bf16> qkv_weights[3] = {{.weight = w, .out = q, .rows = kQ},
                                                                   {.weight = w + kQ * kHidden, .out = k, .rows = kKv},
                                                                   {.weight = w + (kQ + kKv) * kHidden, .out = v, .rows = kKv}};
    surogate::cuda::decode_gemv(qkv_weights, 3, normed.data(),
                                {.rows = 1, .in = kHidden, .rows_per_block = variant.qkv_rows, .overlap_previous = true},
                                stream);
    if (!variant.skip_rope && !variant.fold_qk_norm) {
      surogate::cuda::qk_norm_rope_forward_pair(
          surogate::cuda::QkNormRopeTensor<Bf16>{q, rstd.data(), q, q_norm.data()},
          surogate::cuda::QkNormRopeTensor<Bf16>{k, rstd.data() + kQHeads, k, k_norm.data()}, inv_freq.data(),
          positions.data(), {.tokens = 1, .heads = static_cast<int>(kQHeads), .head_dim = static_cast<int>(kHeadDim)},
          static_cast<int>(kKvHeads), stream);
    }
    Bf16* k_cache = k_caches[static_cast<size_t>(index)].data();
    Bf16* v_cache = v_caches[static_cast<size_t>(index)].data();
    // The append folded into the attention's launch (cached_attention_append_forward), as the op
    // runs it; "no append" attends without it.
    if (!variant.skip_attention && !variant.skip_append && !variant.skip_rope && variant.fold_qk_norm) {
      const surogate::cuda::CachedNormRope<Bf16> norm{.q_weight = q_norm.data(), .k_weight = k_norm.data(),
                                                      .inv_freq = inv_freq.data(), .position_ids = positions.data()};
      surogate::cuda::cached_attention_norm_rope_append_forward(
          attention.data(), workspace.data(), norm_scratch.data(), q, k, v, k_cache, v_cache, slot_ids.data(),
          cache_lengths.data(), new_lengths.data(), norm, this->shape, variant.splits > 0 ? variant.splits : splits,
          stream);
    } else if (!variant.skip_attention && !variant.skip_append) {
      surogate::cuda::cached_attention_append_forward(attention.data(), workspace.data(), q, k, v, k_cache, v_cache,
                                                      slot_ids.data(), cache_lengths.data(), new_lengths.data(),
                                                      this->shape, variant.splits > 0 ? variant.splits : splits, stream);
    } else if (!variant.skip_attention) {
      surogate::cuda::cached_attention_forward(attention.data(), workspace.data(), q, k_cache, v_cache, slot_ids.data(),
                                               cache_lengths.data(), new_lengths.data(), this->shape,
                                               variant.splits > 0 ? variant.splits : splits, stream);
    }
    const surogate::cuda::DecodeGemvWeight<Bf16> o{.weight = o_weight, .out = pending.data(), .rows = kHidden};
    surogate::cuda::decode_gemv(&o, 1, attention.data(),
                                {.rows = 1, .in = kQ, .rows_per_block = variant.o_rows, .overlap_previous = true}, stream);
    // ln2: stream_b + pending -> stream_a
    norm(variant, stream_b.data(), stream_a.data(), stream);
    surogate::cuda::decode_gemv_swiglu(act.data(), normed.data(), gate, up, kFfn,
                                       {.rows = 1, .in = kHidden, .rows_per_block = variant.swiglu_rows, .overlap_previous = true}, stream);
    const surogate::cuda::DecodeGemvWeight<Bf16> d{.weight = down, .out = pending.data(), .rows = kHidden};
    surogate::cuda::decode_gemv(&d, 1, act.data(), {.rows = 1, .in = kFfn, .rows_per_block = variant.down_rows, .overlap_previous = true},
                                stream);
  }
};

}  // namespace surogate::bench::decode_chain
