// Flash attention backward (see attention.h). A block owns kBlockKeys = 16·kWarps keys (warp w:
// keys 16w..16w+15) of one kv head and walks every 32-query tile that can see them, for each q
// head of the kv head's group in turn (or of ONE q head: AttentionBackwardBlocks::PerQueryHead);
// blocks are launched head-fastest from the first key block of every row on, so the heaviest
// (causal) blocks start first.
// Q / dO tiles are double-buffered with cp.async; steps whose 32 queries all see all keys skip the
// per-element mask. Per step, with the warp's keys as the M dimension of the first four products:
//   Sᵀ = K·Qᵀ → Pᵀ = exp(scale·Sᵀ − lse)         dPᵀ = V·dOᵀ       dSᵀ = Pᵀ ∘ (dPᵀ − delta)
//   dV += Pᵀ·dO      dK += dSᵀ·Q  (registers)     dQ += dS·K (dSᵀ via shared memory, fp32 atomics)
// GQA: dK / dV of the whole group accumulate in registers in a fixed order (head, then query
// step), so they are bitwise deterministic; the per-q-head blocks write fp32 partials that a second
// kernel sums in a fixed order instead.
#include "cuda/cuda_check.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/attention_tiles.cuh"

namespace surogate::cuda {
namespace {

using namespace attention;

constexpr int kBlockQueries = 32;
constexpr int kScoreStride = kBlockQueries + kPad;  // dSᵀ tile, [key][query]

template <int kHeadDim, int kWarps>
constexpr size_t backward_shared_bytes() {
  constexpr int kBlockKeys = 16 * kWarps;
  return size_t{2 * kBlockKeys + 4 * kBlockQueries} * (kHeadDim + kPad) * sizeof(uint16_t) +
         size_t{kBlockKeys} * kScoreStride * sizeof(uint16_t) + size_t{6} * kBlockQueries * sizeof(float);
}

// delta[h, i] = Σ_d dO[i, h, d] · O[i, h, d], and the (token, head) row of the fp32 dQ
// accumulator zeroed on the way (no separate memset pass): head_dim / 8 lanes per row, each with
// one 16-byte vector of dO and of O, summed by shuffles inside the lane group.
template <int kHeadDim, typename T>
__global__ void attention_delta_kernel(float* delta, float* dq_accumulator, const T* dout,
                                       const T* out, int64_t tokens, int heads) {
  constexpr int kLanes = kHeadDim / 8;  // 4, 8 or 16: whole groups inside a warp
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t row = thread / kLanes;  // token · heads + head
  const int lane = static_cast<int>(thread % kLanes);
  const bool active = row < tokens * heads;
  float sum = 0.0f;
  if (active) {
    const int64_t offset = row * kHeadDim + lane * 8;
    const uint4 va = *reinterpret_cast<const uint4*>(dout + offset), vb = *reinterpret_cast<const uint4*>(out + offset);
    using Pair = typename kernels::ElementTraits<T>::Pair;
    const Pair* pa = reinterpret_cast<const Pair*>(&va);
    const Pair* pb = reinterpret_cast<const Pair*>(&vb);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 fa = kernels::ElementTraits<T>::to_float2(pa[i]), fb = kernels::ElementTraits<T>::to_float2(pb[i]);
      sum += fa.x * fb.x + fa.y * fb.y;
    }
    float4* zero = reinterpret_cast<float4*>(dq_accumulator + offset);
    zero[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    zero[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int width = kLanes / 2; width > 0; width /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, width);
  if (active && lane == 0) delta[int64_t{row % heads} * tokens + row / heads] = sum;
}

template <typename T>
__global__ void convert_dq_kernel(T* dq, const float* accumulator, int64_t count) {
  const int64_t index = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4;
  if (index >= count) return;
  const float4 value = *reinterpret_cast<const float4*>(accumulator + index);
  kernels::store_pair(dq + index, value.x, value.y);
  kernels::store_pair(dq + index + 2, value.z, value.w);
}

// grad[t, kvh, d] = Σ_j partial[t, kvh·group + j, d] for j = 0 … group−1 in order; four
// elements per thread (head_dim is a multiple of 8).
template <typename T>
__global__ void sum_group_kernel(T* grad, const float* partial, int64_t tokens, int kv_heads, int group,
                                 int head_dim) {
  const int64_t index = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4;
  const int64_t row = int64_t{kv_heads} * head_dim;
  if (index >= tokens * row) return;
  const int64_t token = index / row, within = index % row;
  const int kv_head = static_cast<int>(within / head_dim), d = static_cast<int>(within % head_dim);
  const float* source = partial + (token * kv_heads * group + int64_t{kv_head} * group) * head_dim + d;
  float4 sum = *reinterpret_cast<const float4*>(source);
  for (int j = 1; j < group; ++j) {
    const float4 value = *reinterpret_cast<const float4*>(source + int64_t{j} * head_dim);
    sum.x += value.x; sum.y += value.y; sum.z += value.z; sum.w += value.w;
  }
  kernels::store_pair(grad + index, sum.x, sum.y);
  kernels::store_pair(grad + index + 2, sum.z, sum.w);
}

__device__ __forceinline__ void atomic_add_pair(float* target, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(target), make_float2(x, y));
#else
  atomicAdd(target, x);
  atomicAdd(target + 1, y);
#endif
}

// The key block of grid row y: with rows of `sequence` tokens (a multiple of kBlockKeys), the rows'
// blocks interleave (row 0 block 0, row 1 block 0, row 0 block 1, ...) so that every row's heaviest
// causal blocks start first; otherwise blocks go in token order.
template <int kBlockKeys>
__device__ __forceinline__ int64_t key_block_of(unsigned y, const AttentionShape& shape) {
  if (shape.sequence <= 0 || shape.sequence % kBlockKeys != 0 || shape.tokens % shape.sequence != 0) return y;
  const int64_t rows = shape.tokens / shape.sequence, per_row = shape.sequence / kBlockKeys;
  return (y % rows) * per_row + y / rows;
}

// kWholeGroup: a block owns its keys for every q head of the kv head's group (grid.x = kv heads)
// and accumulates dK / dV over all of them in registers; otherwise one q head (grid.x = q heads)
// with fp32 partials summed by sum_group_kernel when the group has several heads.
template <int kHeadDim, int kWarps, bool kWholeGroup, typename T, bool kCausal = true>
__global__ void __launch_bounds__(kWarps * 32, 1)
    attention_backward_kernel(T* dk, T* dv, float* dk_partial, float* dv_partial,
                              float* dq_accumulator, const T* dout, const T* q,
                              const T* k, const T* v, const float* logsumexp,
                              const float* delta, const int32_t* cu_seqlens, AttentionShape shape) {
  constexpr int kThreadCount = kWarps * 32;
  constexpr int kBlockKeys = 16 * kWarps;
  constexpr int kStride = kHeadDim + kPad;
  constexpr int kSlices = kHeadDim / 16;
  constexpr int kOutTiles = kHeadDim / 8;
  constexpr int kScoreTiles = kBlockQueries / 8;
  // dQ product: warp w takes query half w % 2 and column part w / 2 of kWarps / 2 parts.
  constexpr int kQueryColumns = kHeadDim / (kWarps / 2);
  constexpr int kQueryTiles = kQueryColumns / 8;
  static_assert(kQueryColumns % 16 == 0, "dQ column part must be a multiple of 16");
  extern __shared__ __align__(16) unsigned char shared_raw[];
  // K, V | dSᵀ [key][query] | two stages of (Q, dO) | two stages of (lse, delta, lowest key).
  T* tile_k = reinterpret_cast<T*>(shared_raw);
  T* tile_v = tile_k + kBlockKeys * kStride;
  T* tile_ds = tile_v + kBlockKeys * kStride;
  T* query_stages = tile_ds + kBlockKeys * kScoreStride;
  float* row_stages = reinterpret_cast<float*>(query_stages + 4 * kBlockQueries * kStride);
  auto stage_q = [&](int stage) { return query_stages + stage * 2 * kBlockQueries * kStride; };
  auto stage_do = [&](int stage) { return query_stages + (stage * 2 + 1) * kBlockQueries * kStride; };
  auto stage_lse = [&](int stage) { return row_stages + stage * 3 * kBlockQueries; };
  auto stage_delta = [&](int stage) { return row_stages + (stage * 3 + 1) * kBlockQueries; };
  auto stage_lowest = [&](int stage) { return reinterpret_cast<int*>(row_stages + (stage * 3 + 2) * kBlockQueries); };

  const int group = shape.q_heads / shape.kv_heads;
  const int kv_head = kWholeGroup ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / group;
  const int first_head = kWholeGroup ? kv_head * group : static_cast<int>(blockIdx.x);
  const int block_heads = kWholeGroup ? group : 1;
  const int64_t tokens = shape.tokens;
  const int64_t lse_stride = shape.logsumexp_stride > 0 ? shape.logsumexp_stride : tokens;
  const int64_t q_stride = int64_t{shape.q_heads} * kHeadDim, kv_stride = int64_t{shape.kv_heads} * kHeadDim;
  const int64_t first_key = key_block_of<kBlockKeys>(blockIdx.y, shape) * kBlockKeys;
  const int64_t last_key = min(first_key + kBlockKeys, tokens) - 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  load_tile<kHeadDim, kThreadCount>(tile_k, k + first_key * kv_stride + int64_t{kv_head} * kHeadDim, kv_stride,
                                    kBlockKeys, tokens - first_key);
  load_tile<kHeadDim, kThreadCount>(tile_v, v + first_key * kv_stride + int64_t{kv_head} * kHeadDim, kv_stride,
                                    kBlockKeys, tokens - first_key);

  // Queries that can see some key of this block: from first_key (causal) or the first key's
  // document start (bidirectional) to the end of the last key's document, cut by the window.
  // Those queries lie in the documents first_document … last_document, so their per-step searches
  // run over that range only (usually one document: no search).
  constexpr bool causal = kCausal;  // a template parameter: the causal kernels keep their registers
  const int first_document = document_index(cu_seqlens, 0, shape.documents - 1, first_key);
  const int last_document = document_index(cu_seqlens, first_document, shape.documents - 1, last_key);
  const int64_t query_begin = causal ? first_key : int64_t{cu_seqlens[first_document]};
  int64_t query_end = cu_seqlens[last_document + 1];
  if (shape.window > 0) query_end = min(query_end, last_key + shape.window);
  query_end = min(query_end, tokens);

  const int64_t keys[2] = {first_key + warp * 16 + g, first_key + warp * 16 + g + 8};
  // Bidirectional: key j is visible from query i iff both start at the same document start (the
  // lowest key the query sees; no window). −1 for a key past the last token (int32: cu_seqlens' type).
  int32_t key_document_start[2] = {-1, -1};
  if (!causal) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (keys[r] < tokens) {
        key_document_start[r] = cu_seqlens[document_index(cu_seqlens, first_document, last_document, keys[r])];
      }
    }
  }
  const float scale_log2 = shape.softmax_scale * kLog2e;
  float grad_k[kOutTiles][4] = {};
  float grad_v[kOutTiles][4] = {};

  // Work items: the query steps of each of the block's heads in turn (index = head · steps + step).
  const int steps = static_cast<int>((query_end - query_begin + kBlockQueries - 1) / kBlockQueries);
  const int items = steps * block_heads;
  auto prefetch = [&](int stage, int item) {
    const int head = first_head + item / steps;
    const int64_t first_query = query_begin + int64_t{item % steps} * kBlockQueries;
    const int64_t offset = first_query * q_stride + int64_t{head} * kHeadDim;
    load_tile_async<kHeadDim, kThreadCount>(stage_q(stage), q + offset, q_stride, kBlockQueries, tokens - first_query);
    load_tile_async<kHeadDim, kThreadCount>(stage_do(stage), dout + offset, q_stride, kBlockQueries,
                                            tokens - first_query);
    copy_async_commit();
    if (threadIdx.x < kBlockQueries) {
      const int64_t query = first_query + threadIdx.x;
      const bool valid = query < tokens;
      stage_lse(stage)[threadIdx.x] = valid ? logsumexp[int64_t{head} * lse_stride + query] * kLog2e : 0.0f;
      stage_delta(stage)[threadIdx.x] = valid ? delta[int64_t{head} * tokens + query] : 0.0f;
      // A query at or past query_end (the last step's tail) sees no key of this block.
      stage_lowest(stage)[threadIdx.x] = static_cast<int>(
          query < query_end ? lowest_visible_key(cu_seqlens, first_document, last_document, shape.window, query)
                            : tokens);
    }
  };
  if (items > 0) prefetch(0, 0);

  for (int item = 0; item < items; ++item) {
    const int stage = item & 1;
    const int head = first_head + item / steps;
    const int64_t first_query = query_begin + int64_t{item % steps} * kBlockQueries;
    if (item + 1 < items) {
      prefetch(stage ^ 1, item + 1);  // that stage's last readers finished before the previous mid barrier
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // this stage's tiles are complete for every thread
    const T* tile_q = stage_q(stage);
    const T* tile_do = stage_do(stage);
    const float* tile_lse = stage_lse(stage);
    const float* tile_delta = stage_delta(stage);
    const int* tile_lowest = stage_lowest(stage);
    // Every key of the block is visible to every query of the step: skip the per-element mask.
    // Bidirectional: keys and queries all in one document.
    const bool fully_visible =
        causal ? first_key + kBlockKeys <= tokens && first_query + kBlockQueries <= tokens &&
                     first_key + kBlockKeys - 1 <= first_query && first_key >= tile_lowest[kBlockQueries - 1]
               : first_key + kBlockKeys <= tokens && first_query + kBlockQueries <= query_end &&
                     first_document == last_document;

    // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys × 32 queries.
    float scores[kScoreTiles][4] = {};
    float dprobs[kScoreTiles][4] = {};
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      uint32_t a_k[4], a_v[4];
      const int a_offset = (warp * 16 + (lane & 15)) * kStride + s * 16 + (lane >> 4) * 8;
      ldmatrix_x4(a_k, tile_k + a_offset);
      ldmatrix_x4(a_v, tile_v + a_offset);
#pragma unroll
      for (int n = 0; n < kScoreTiles; n += 2) {
        uint32_t b_q[4], b_do[4];
        const int b_offset = (n * 8 + (lane >> 4) * 8 + (lane & 7)) * kStride + s * 16 + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(b_q, tile_q + b_offset);
        ldmatrix_x4(b_do, tile_do + b_offset);
        mma_16816<T>(scores[n], a_k, b_q[0], b_q[1]);
        mma_16816<T>(scores[n + 1], a_k, b_q[2], b_q[3]);
        mma_16816<T>(dprobs[n], a_v, b_do[0], b_do[1]);
        mma_16816<T>(dprobs[n + 1], a_v, b_do[2], b_do[3]);
      }
    }

    // Pᵀ and dSᵀ in place; dSᵀ also goes to shared memory (pairs of queries) for dQ.
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = n * 8 + 2 * t + (e % 2);
        const int64_t query = first_query + column, key = keys[e / 2];
        const bool visible =
            fully_visible || (causal ? key <= query && key >= tile_lowest[column] && query < tokens
                                     : key_document_start[e / 2] == tile_lowest[column]);
        const float probability = visible ? exp2f(scores[n][e] * scale_log2 - tile_lse[column]) : 0.0f;
        scores[n][e] = probability;
        dprobs[n][e] = probability * (dprobs[n][e] - tile_delta[column]);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<uint32_t*>(tile_ds + (warp * 16 + g + 8 * r) * kScoreStride + n * 8 + 2 * t) =
            pack_x2<T>(dprobs[n][2 * r], dprobs[n][2 * r + 1]);
      }
    }

    // dV += Pᵀ·dO and dK += dSᵀ·Q; the A operands come straight from the accumulators.
#pragma unroll
    for (int s = 0; s < kBlockQueries / 16; ++s) {
      const uint32_t p[4] = {pack_x2<T>(scores[2 * s][0], scores[2 * s][1]),
                             pack_x2<T>(scores[2 * s][2], scores[2 * s][3]),
                             pack_x2<T>(scores[2 * s + 1][0], scores[2 * s + 1][1]),
                             pack_x2<T>(scores[2 * s + 1][2], scores[2 * s + 1][3])};
      const uint32_t ds[4] = {pack_x2<T>(dprobs[2 * s][0], dprobs[2 * s][1]),
                              pack_x2<T>(dprobs[2 * s][2], dprobs[2 * s][3]),
                              pack_x2<T>(dprobs[2 * s + 1][0], dprobs[2 * s + 1][1]),
                              pack_x2<T>(dprobs[2 * s + 1][2], dprobs[2 * s + 1][3])};
      const int row = s * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int d = 0; d < kHeadDim / 16; ++d) {
        const int column = d * 16 + (lane >> 4) * 8;
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile_do + row * kStride + column);
        mma_16816<T>(grad_v[2 * d], p, b[0], b[1]);
        mma_16816<T>(grad_v[2 * d + 1], p, b[2], b[3]);
        ldmatrix_x4_trans(b, tile_q + row * kStride + column);
        mma_16816<T>(grad_k[2 * d], ds, b[0], b[1]);
        mma_16816<T>(grad_k[2 * d + 1], ds, b[2], b[3]);
      }
    }
    __syncthreads();  // dSᵀ complete in shared memory

    // dQ[32 queries, D] += dS[32, keys] · K[keys, D]. The A operand dS is read from the dSᵀ tile
    // with ldmatrix.trans: matrices (keys 0-7 | 8-15) × (queries 0-7 | 8-15) give a0 … a3.
    {
      const int query_half = warp % 2, column_base = (warp / 2) * kQueryColumns;
      float grad_q[kQueryTiles][4] = {};
      const int matrix = lane >> 3;
#pragma unroll
      for (int s = 0; s < kBlockKeys / 16; ++s) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, tile_ds + (s * 16 + (matrix >> 1) * 8 + (lane & 7)) * kScoreStride + query_half * 16 +
                                 (matrix & 1) * 8);
        const int row = s * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int d = 0; d < kQueryTiles / 2; ++d) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, tile_k + row * kStride + column_base + d * 16 + (lane >> 4) * 8);
          mma_16816<T>(grad_q[2 * d], a, b[0], b[1]);
          mma_16816<T>(grad_q[2 * d + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t query = first_query + query_half * 16 + g + 8 * r;
        if (query >= tokens) continue;
        float* target = dq_accumulator + query * q_stride + int64_t{head} * kHeadDim + column_base + 2 * t;
#pragma unroll
        for (int n = 0; n < kQueryTiles; ++n) {
          atomic_add_pair(target + n * 8, grad_q[n][2 * r] * shape.softmax_scale,
                          grad_q[n][2 * r + 1] * shape.softmax_scale);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= tokens) continue;
    if (kWholeGroup || group == 1) {
      const int64_t offset = keys[r] * kv_stride + int64_t{kv_head} * kHeadDim + 2 * t;
#pragma unroll
      for (int n = 0; n < kOutTiles; ++n) {
        kernels::store_pair(dk + offset + n * 8, grad_k[n][2 * r] * shape.softmax_scale,
                            grad_k[n][2 * r + 1] * shape.softmax_scale);
        kernels::store_pair(dv + offset + n * 8, grad_v[n][2 * r], grad_v[n][2 * r + 1]);
      }
    } else {
      const int64_t offset = keys[r] * q_stride + int64_t{first_head} * kHeadDim + 2 * t;
#pragma unroll
      for (int n = 0; n < kOutTiles; ++n) {
        *reinterpret_cast<float2*>(dk_partial + offset + n * 8) =
            make_float2(grad_k[n][2 * r] * shape.softmax_scale, grad_k[n][2 * r + 1] * shape.softmax_scale);
        *reinterpret_cast<float2*>(dv_partial + offset + n * 8) = make_float2(grad_v[n][2 * r], grad_v[n][2 * r + 1]);
      }
    }
  }
}

template <int kHeadDim, int kWarps, bool kWholeGroup, typename T, bool kCausal = true>
void launch_backward(T* dq, T* dk, T* dv, float* workspace,
                     const T* dout, const T* q, const T* k,
                     const T* v, const T* out, const float* logsumexp,
                     const int32_t* cu_seqlens, const AttentionShape& shape, cudaStream_t stream) {
  constexpr int kBlockKeys = 16 * kWarps;
  const int group = shape.q_heads / shape.kv_heads;
  const int64_t q_elements = shape.tokens * shape.q_heads * kHeadDim;
  // dQ | dK, dV partials (per-q-head split with GQA only) | delta: the vector-accessed parts
  // first, 16-byte aligned.
  const bool partials = !kWholeGroup && group > 1;
  float* dq_accumulator = workspace;
  float* dk_partial = dq_accumulator + q_elements;
  float* dv_partial = dk_partial + q_elements;
  float* delta = partials ? dv_partial + q_elements : dk_partial;
  const int64_t key_blocks = (shape.tokens + kBlockKeys - 1) / kBlockKeys;
  CUDA_REQUIRE(key_blocks <= 65535, "attention backward: too many tokens for one launch");
  const int64_t delta_threads = shape.tokens * shape.q_heads * (kHeadDim / 8);
  attention_delta_kernel<kHeadDim, T><<<static_cast<unsigned>((delta_threads + 255) / 256), 256, 0, stream>>>(
      delta, dq_accumulator, dout, out, shape.tokens, shape.q_heads);
  CUDA_CHECK_LAUNCH();
  constexpr size_t kShared = backward_shared_bytes<kHeadDim, kWarps>();
  CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kernel<kHeadDim, kWarps, kWholeGroup, T, kCausal>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared)));
  const dim3 grid(kWholeGroup ? shape.kv_heads : shape.q_heads, static_cast<unsigned>(key_blocks));
  attention_backward_kernel<kHeadDim, kWarps, kWholeGroup, T, kCausal><<<grid, kWarps * 32, kShared, stream>>>(
      dk, dv, dk_partial, dv_partial, dq_accumulator, dout, q, k, v, logsumexp, delta, cu_seqlens, shape);
  CUDA_CHECK_LAUNCH();
  convert_dq_kernel<T><<<static_cast<unsigned>((q_elements / 4 + 255) / 256), 256, 0, stream>>>(dq, dq_accumulator,
                                                                                           q_elements);
  CUDA_CHECK_LAUNCH();
  if (partials) {
    const int64_t kv_elements = shape.tokens * shape.kv_heads * kHeadDim;
    const unsigned blocks = static_cast<unsigned>((kv_elements / 4 + 255) / 256);
    sum_group_kernel<T><<<blocks, 256, 0, stream>>>(dk, dk_partial, shape.tokens, shape.kv_heads, group, kHeadDim);
    CUDA_CHECK_LAUNCH();
    sum_group_kernel<T><<<blocks, 256, 0, stream>>>(dv, dv_partial, shape.tokens, shape.kv_heads, group, kHeadDim);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

int64_t attention_backward_workspace_floats(const AttentionShape& shape, AttentionBackwardBlocks blocks) {
  const int64_t q_elements = shape.tokens * shape.q_heads * int64_t{shape.head_dim};
  const bool grouped = shape.kv_heads > 0 && shape.q_heads / shape.kv_heads > 1;
  const bool partials = grouped && blocks == AttentionBackwardBlocks::PerQueryHead;
  return q_elements + shape.tokens * shape.q_heads + (partials ? 2 * q_elements : 0);
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, float* workspace,
                        const T* dout, const T* q, const T* k,
                        const T* v, const T* out, const float* logsumexp,
                        const int32_t* cu_seqlens, const AttentionShape& shape, cudaStream_t stream,
                        int key_block_warps, AttentionBackwardBlocks blocks) {
  check_attention_shape(shape);
  CUDA_REQUIRE(key_block_warps == 0 || key_block_warps == 4 || key_block_warps == 8,
               "attention backward: key_block_warps must be 0 (default), 4 or 8");
  if (shape.tokens == 0) return;
  if (!shape.causal) {  // bidirectional: the default split only (4 warps, whole GQA groups)
    switch (shape.head_dim) {
      case 32:
        launch_backward<32, 4, true, T, false>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens,
                                              shape, stream);
        break;
      case 64:
        launch_backward<64, 4, true, T, false>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens,
                                              shape, stream);
        break;
      default:
        launch_backward<128, 4, true, T, false>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens,
                                              shape, stream);
        break;
    }
    return;
  }
  // 4 warps (64 keys, two blocks per SM) measured ~3% faster than 8 on H100 (docs/cuda.md).
  const bool wide = key_block_warps == 8;
  const bool whole_group = blocks == AttentionBackwardBlocks::WholeGroup;
#define SUROGATE_BACKWARD(D, W)                                                                                  \
  if (whole_group) {                                                                                           \
    launch_backward<D, W, true>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens, shape, stream); \
  } else {                                                                                                     \
    launch_backward<D, W, false>(dq, dk, dv, workspace, dout, q, k, v, out, logsumexp, cu_seqlens, shape, stream); \
  }
  switch (shape.head_dim) {
    case 32: SUROGATE_BACKWARD(32, 4); break;
    case 64: if (wide) { SUROGATE_BACKWARD(64, 8); } else { SUROGATE_BACKWARD(64, 4); } break;
    default: if (wide) { SUROGATE_BACKWARD(128, 8); } else { SUROGATE_BACKWARD(128, 4); } break;
  }
#undef SUROGATE_BACKWARD
}

#define INSTANTIATE(T)                                                                                      \
  template void attention_backward(T*, T*, T*, float*, const T*, const T*, const T*, const T*, const T*,        \
                                   const float*, const int32_t*, const AttentionShape&, cudaStream_t, int,        \
                                   AttentionBackwardBlocks);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
