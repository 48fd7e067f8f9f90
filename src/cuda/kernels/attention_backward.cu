// Flash attention backward (see attention.h). Per block: 64 keys of one kv head (4 warps × 16
// keys), walking every q head of the GQA group and every 32-query tile that can see the keys.
// Q / dO tiles are double-buffered with cp.async; steps whose 32 queries all see all 64 keys
// skip the per-element mask. Per step, with the warp's keys as the M dimension of every product:
//   Sᵀ = K·Qᵀ → Pᵀ = exp(scale·Sᵀ − lse)         dPᵀ = V·dOᵀ       dSᵀ = Pᵀ ∘ (dPᵀ − delta)
//   dV += Pᵀ·dO      dK += dSᵀ·Q  (registers)     dQ += dS·K (via shared dS, fp32 atomics)
#include "cuda/cuda_check.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/attention_tiles.cuh"

namespace surogate::cuda {
namespace {

using namespace attention;

constexpr int kBlockKeys = 64;
constexpr int kBlockQueries = 32;
constexpr int kScoreStride = kBlockKeys + kPad;

template <int kHeadDim>
constexpr size_t backward_shared_bytes() {
  return size_t{2 * kBlockKeys + 4 * kBlockQueries} * (kHeadDim + kPad) * sizeof(__nv_bfloat16) +
         size_t{kBlockQueries} * kScoreStride * sizeof(__nv_bfloat16) + size_t{6} * kBlockQueries * sizeof(float);
}

// delta[h, i] = Σ_d dO[i, h, d] · O[i, h, d]; one thread per (token, head).
template <int kHeadDim>
__global__ void attention_delta_kernel(float* delta, const __nv_bfloat16* dout, const __nv_bfloat16* out,
                                       int64_t tokens, int heads) {
  const int64_t index = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (index >= tokens * heads) return;
  const int64_t token = index / heads;
  const int head = static_cast<int>(index % heads);
  const __nv_bfloat16* a = dout + index * kHeadDim;
  const __nv_bfloat16* b = out + index * kHeadDim;
  float sum = 0.0f;
#pragma unroll
  for (int d = 0; d < kHeadDim; d += 8) {
    uint4 va = *reinterpret_cast<const uint4*>(a + d), vb = *reinterpret_cast<const uint4*>(b + d);
    const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&va);
    const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&vb);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
      sum += fa.x * fb.x + fa.y * fb.y;
    }
  }
  delta[int64_t{head} * tokens + token] = sum;
}

__global__ void convert_dq_kernel(__nv_bfloat16* dq, const float* accumulator, int64_t count) {
  const int64_t index = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4;
  if (index >= count) return;
  const float4 value = *reinterpret_cast<const float4*>(accumulator + index);
  *reinterpret_cast<__nv_bfloat162*>(dq + index) = __floats2bfloat162_rn(value.x, value.y);
  *reinterpret_cast<__nv_bfloat162*>(dq + index + 2) = __floats2bfloat162_rn(value.z, value.w);
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kernel(__nv_bfloat16* dk, __nv_bfloat16* dv, float* dq_accumulator,
                              const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                              const __nv_bfloat16* v, const float* logsumexp, const float* delta,
                              const int32_t* cu_seqlens, AttentionShape shape) {
  constexpr int kStride = kHeadDim + kPad;
  constexpr int kSlices = kHeadDim / 16;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kScoreTiles = kBlockQueries / 8;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  // K, V | dS [query][key] | two stages of (Q, dO) | two stages of (lse, delta, lowest key).
  __nv_bfloat16* tile_k = reinterpret_cast<__nv_bfloat16*>(shared_raw);
  __nv_bfloat16* tile_v = tile_k + kBlockKeys * kStride;
  __nv_bfloat16* tile_ds = tile_v + kBlockKeys * kStride;
  __nv_bfloat16* query_stages = tile_ds + kBlockQueries * kScoreStride;
  float* row_stages = reinterpret_cast<float*>(query_stages + 4 * kBlockQueries * kStride);
  auto stage_q = [&](int stage) { return query_stages + stage * 2 * kBlockQueries * kStride; };
  auto stage_do = [&](int stage) { return query_stages + (stage * 2 + 1) * kBlockQueries * kStride; };
  auto stage_lse = [&](int stage) { return row_stages + stage * 3 * kBlockQueries; };
  auto stage_delta = [&](int stage) { return row_stages + (stage * 3 + 1) * kBlockQueries; };
  auto stage_lowest = [&](int stage) { return reinterpret_cast<int*>(row_stages + (stage * 3 + 2) * kBlockQueries); };

  const int kv_head = blockIdx.y;
  const int group = shape.q_heads / shape.kv_heads;
  const int64_t tokens = shape.tokens;
  const int64_t q_stride = int64_t{shape.q_heads} * kHeadDim, kv_stride = int64_t{shape.kv_heads} * kHeadDim;
  const int64_t first_key = int64_t{blockIdx.x} * kBlockKeys;
  const int64_t last_key = min(first_key + kBlockKeys, tokens) - 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  load_tile<kHeadDim>(tile_k, k + first_key * kv_stride + int64_t{kv_head} * kHeadDim, kv_stride, kBlockKeys,
                      tokens - first_key);
  load_tile<kHeadDim>(tile_v, v + first_key * kv_stride + int64_t{kv_head} * kHeadDim, kv_stride, kBlockKeys,
                      tokens - first_key);

  // Queries that can see some key of this block: from first_key to the end of the last key's
  // document, cut by the window.
  int64_t query_end = document_end(cu_seqlens, shape.documents, last_key);
  if (shape.window > 0) query_end = min(query_end, last_key + shape.window);
  query_end = min(query_end, tokens);

  const int64_t keys[2] = {first_key + warp * 16 + g, first_key + warp * 16 + g + 8};
  const float scale_log2 = shape.softmax_scale * kLog2e;
  float grad_k[kOutTiles][4] = {};
  float grad_v[kOutTiles][4] = {};

  // Steps: every (q head of the group, 32-query tile) pair, flattened so that the next step's
  // Q / dO tiles can be prefetched (cp.async, two stages) while this one computes.
  const int query_tiles = static_cast<int>((query_end - first_key + kBlockQueries - 1) / kBlockQueries);
  const int steps = group * query_tiles;
  auto prefetch = [&](int stage, int step) {
    const int head = kv_head * group + step / query_tiles;
    const int64_t first_query = first_key + int64_t{step % query_tiles} * kBlockQueries;
    const int64_t offset = first_query * q_stride + int64_t{head} * kHeadDim;
    load_tile_async<kHeadDim>(stage_q(stage), q + offset, q_stride, kBlockQueries, tokens - first_query);
    load_tile_async<kHeadDim>(stage_do(stage), dout + offset, q_stride, kBlockQueries, tokens - first_query);
    copy_async_commit();
    if (threadIdx.x < kBlockQueries) {
      const int64_t query = first_query + threadIdx.x;
      const bool valid = query < tokens;
      stage_lse(stage)[threadIdx.x] = valid ? logsumexp[int64_t{head} * tokens + query] * kLog2e : 0.0f;
      stage_delta(stage)[threadIdx.x] = valid ? delta[int64_t{head} * tokens + query] : 0.0f;
      stage_lowest(stage)[threadIdx.x] = static_cast<int>(
          valid ? lowest_visible_key(cu_seqlens, shape.documents, shape.window, query) : tokens);
    }
  };
  if (steps > 0) prefetch(0, 0);

  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1;
    const int head = kv_head * group + step / query_tiles;
    const int64_t first_query = first_key + int64_t{step % query_tiles} * kBlockQueries;
    if (step + 1 < steps) {
      prefetch(stage ^ 1, step + 1);  // that stage's last readers finished before the previous mid barrier
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // this stage's tiles are complete for every thread
    const __nv_bfloat16* tile_q = stage_q(stage);
    const __nv_bfloat16* tile_do = stage_do(stage);
    const float* tile_lse = stage_lse(stage);
    const float* tile_delta = stage_delta(stage);
    const int* tile_lowest = stage_lowest(stage);
    // Every key of the block is visible to every query of the step: skip the per-element mask.
    const bool fully_visible = first_key + kBlockKeys <= tokens && first_query + kBlockQueries <= tokens &&
                               first_key + kBlockKeys - 1 <= first_query &&
                               first_key >= tile_lowest[kBlockQueries - 1];

    // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys × 32 queries.
    float scores[kScoreTiles][4] = {};
    float dprobs[kScoreTiles][4] = {};
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      uint32_t a_k[4], a_v[4];
      const __nv_bfloat16* base_k = tile_k + (warp * 16 + g) * kStride + s * 16 + 2 * t;
      const __nv_bfloat16* base_v = tile_v + (warp * 16 + g) * kStride + s * 16 + 2 * t;
      a_k[0] = load_pair(base_k); a_k[1] = load_pair(base_k + 8 * kStride);
      a_k[2] = load_pair(base_k + 8); a_k[3] = load_pair(base_k + 8 * kStride + 8);
      a_v[0] = load_pair(base_v); a_v[1] = load_pair(base_v + 8 * kStride);
      a_v[2] = load_pair(base_v + 8); a_v[3] = load_pair(base_v + 8 * kStride + 8);
#pragma unroll
      for (int n = 0; n < kScoreTiles; ++n) {
        const __nv_bfloat16* base_q = tile_q + (n * 8 + g) * kStride + s * 16 + 2 * t;
        const __nv_bfloat16* base_do = tile_do + (n * 8 + g) * kStride + s * 16 + 2 * t;
        mma_16816(scores[n], a_k, load_pair(base_q), load_pair(base_q + 8));
        mma_16816(dprobs[n], a_v, load_pair(base_do), load_pair(base_do + 8));
      }
    }

    // Pᵀ and dSᵀ in place; dS also goes to shared memory as [query][key] for dQ.
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = n * 8 + 2 * t + (e % 2);
        const int64_t query = first_query + column, key = keys[e / 2];
        const bool visible =
            fully_visible || (key <= query && key >= tile_lowest[column] && query < tokens);
        const float probability = visible ? exp2f(scores[n][e] * scale_log2 - tile_lse[column]) : 0.0f;
        scores[n][e] = probability;
        dprobs[n][e] = probability * (dprobs[n][e] - tile_delta[column]);
        tile_ds[column * kScoreStride + warp * 16 + g + 8 * (e / 2)] = __float2bfloat16(dprobs[n][e]);
      }
    }

    // dV += Pᵀ·dO and dK += dSᵀ·Q; the A operands come straight from the accumulators.
#pragma unroll
    for (int s = 0; s < kBlockQueries / 16; ++s) {
      const uint32_t p[4] = {pack_bf16x2(scores[2 * s][0], scores[2 * s][1]),
                             pack_bf16x2(scores[2 * s][2], scores[2 * s][3]),
                             pack_bf16x2(scores[2 * s + 1][0], scores[2 * s + 1][1]),
                             pack_bf16x2(scores[2 * s + 1][2], scores[2 * s + 1][3])};
      const uint32_t ds[4] = {pack_bf16x2(dprobs[2 * s][0], dprobs[2 * s][1]),
                              pack_bf16x2(dprobs[2 * s][2], dprobs[2 * s][3]),
                              pack_bf16x2(dprobs[2 * s + 1][0], dprobs[2 * s + 1][1]),
                              pack_bf16x2(dprobs[2 * s + 1][2], dprobs[2 * s + 1][3])};
      const int row = s * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int d = 0; d < kHeadDim / 16; ++d) {
        const int column = d * 16 + (lane >> 4) * 8;
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile_do + row * kStride + column);
        mma_16816(grad_v[2 * d], p, b[0], b[1]);
        mma_16816(grad_v[2 * d + 1], p, b[2], b[3]);
        ldmatrix_x4_trans(b, tile_q + row * kStride + column);
        mma_16816(grad_k[2 * d], ds, b[0], b[1]);
        mma_16816(grad_k[2 * d + 1], ds, b[2], b[3]);
      }
    }
    __syncthreads();  // dS complete in shared memory

    // dQ[32 queries, D] += dS[32, 64] · K[64, D]: warp w takes query half w % 2, column half w / 2.
    {
      constexpr int kHalfTiles = kHeadDim / 16;  // n-tiles of 8 in half the head dimension
      const int query_half = warp % 2, column_base = (warp / 2) * (kHeadDim / 2);
      float grad_q[kHalfTiles][4] = {};
#pragma unroll
      for (int s = 0; s < kBlockKeys / 16; ++s) {
        uint32_t a[4];
        const __nv_bfloat16* base = tile_ds + (query_half * 16 + g) * kScoreStride + s * 16 + 2 * t;
        a[0] = load_pair(base); a[1] = load_pair(base + 8 * kScoreStride);
        a[2] = load_pair(base + 8); a[3] = load_pair(base + 8 * kScoreStride + 8);
        const int row = s * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int d = 0; d < kHalfTiles / 2; ++d) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, tile_k + row * kStride + column_base + d * 16 + (lane >> 4) * 8);
          mma_16816(grad_q[2 * d], a, b[0], b[1]);
          mma_16816(grad_q[2 * d + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t query = first_query + query_half * 16 + g + 8 * r;
        if (query >= tokens) continue;
        float* target = dq_accumulator + query * q_stride + int64_t{head} * kHeadDim + column_base + 2 * t;
#pragma unroll
        for (int n = 0; n < kHalfTiles; ++n) {
          atomicAdd(target + n * 8, grad_q[n][2 * r] * shape.softmax_scale);
          atomicAdd(target + n * 8 + 1, grad_q[n][2 * r + 1] * shape.softmax_scale);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= tokens) continue;
    const int64_t offset = keys[r] * kv_stride + int64_t{kv_head} * kHeadDim + 2 * t;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(dk + offset + n * 8) = __floats2bfloat162_rn(
          grad_k[n][2 * r] * shape.softmax_scale, grad_k[n][2 * r + 1] * shape.softmax_scale);
      *reinterpret_cast<__nv_bfloat162*>(dv + offset + n * 8) =
          __floats2bfloat162_rn(grad_v[n][2 * r], grad_v[n][2 * r + 1]);
    }
  }
}

template <int kHeadDim>
void launch_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, float* workspace,
                     const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                     const __nv_bfloat16* v, const __nv_bfloat16* out, const float* logsumexp,
                     const int32_t* cu_seqlens, const AttentionShape& shape, cudaStream_t stream) {
  const int64_t q_elements = shape.tokens * shape.q_heads * kHeadDim;
  float* dq_accumulator = workspace;
  float* delta = workspace + q_elements;
  CUDA_CHECK(cudaMemsetAsync(dq_accumulator, 0, q_elements * sizeof(float), stream));
  const int64_t rows = shape.tokens * shape.q_heads;
  attention_delta_kernel<kHeadDim><<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      delta, dout, out, shape.tokens, shape.q_heads);
  CUDA_CHECK_LAUNCH();
  constexpr size_t kShared = backward_shared_bytes<kHeadDim>();
  CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kShared)));
  const dim3 grid(static_cast<unsigned>((shape.tokens + kBlockKeys - 1) / kBlockKeys), shape.kv_heads);
  attention_backward_kernel<kHeadDim><<<grid, kThreads, kShared, stream>>>(dk, dv, dq_accumulator, dout, q, k, v,
                                                                           logsumexp, delta, cu_seqlens, shape);
  CUDA_CHECK_LAUNCH();
  convert_dq_kernel<<<static_cast<unsigned>((q_elements / 4 + 255) / 256), 256, 0, stream>>>(dq, dq_accumulator,
                                                                                           q_elements);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t attention_backward_workspace_floats(const AttentionShape& shape) {
  return shape.tokens * shape.q_heads * (int64_t{shape.head_dim} + 1);
}

void attention_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, float* workspace,
                        const __nv_bfloat16* dout, const __nv_bfloat16* q, const __nv_bfloat16* k,
                        const __nv_bfloat16* v, const __nv_bfloat16* out, const float* logsumexp,
                        const int32_t* cu_seqlens, const AttentionShape& shape, cudaStream_t stream) {
  check_attention_shape(shape);
  if (shape.tokens == 0) return;
  switch (shape.head_dim) {
    case 32: launch_backward<32>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens, shape, stream); break;
    case 64: launch_backward<64>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens, shape, stream); break;
    default: launch_backward<128>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens, shape, stream); break;
  }
}

}  // namespace surogate::cuda
