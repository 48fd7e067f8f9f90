// Flash attention forward (see attention.h for layouts and masking, attention_tiles.cuh for
// the fragment layouts). Tiles: 64 queries × 64 keys per step, 4 warps × 16 query rows.
// K/V tiles are double-buffered: the cp.async copy of tile i+1 runs while tile i is computed.
// Occupancy variant (kBlocksPerSm, chosen by the caller to measure both): 2 keeps the Q tile in
// its own buffer (five tiles of shared memory, up to 255 registers); 3 reads Q into registers once
// and lets it borrow the second stage's K buffer (four tiles, 68 KiB at head_dim 128) under a
// 168-register bound, so three blocks share an SM.
// K fragments come through ldmatrix. Tiles that every row of the block sees entirely (away from the diagonal and document
// boundaries: most of them) skip the per-element mask.
#include "cuda/cuda_check.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/fp8_epilogue.cuh"

namespace surogate::cuda {
namespace {

using namespace attention;

constexpr int kBlockQueries = 64;
constexpr int kBlockKeys = 64;

// Whether the Q tile borrows the second stage's K buffer (the three-blocks-per-SM variant).
template <int kBlocksPerSm>
constexpr bool q_in_stage() {
  static_assert(kBlockQueries == kBlockKeys, "the Q tile must fit a K buffer");
  return kBlocksPerSm > 2;
}

template <int kHeadDim, int kBlocksPerSm>
constexpr size_t forward_shared_bytes() {
  return size_t{(q_in_stage<kBlocksPerSm>() ? 0 : kBlockQueries) + 4 * kBlockKeys} * (kHeadDim + kPad) *
         sizeof(uint16_t);  // 16-bit elements
}

// The default variant keeps the plain bound (no minimum block count: a minimum of 1 makes ptxas
// take 230 registers instead of 179).
// kFp8: the output's E4M3 codes are also written (T = bf16; fp8_epilogue.cuh: the fp8_hybrid
// recipe's input of o_proj).
template <int kHeadDim, int kBlocksPerSm, typename T, bool kFp8 = false, bool kCausal = true>
__global__ void __launch_bounds__(kThreads, q_in_stage<kBlocksPerSm>() ? kBlocksPerSm : 0)
    attention_forward_kernel(T* out, float* logsumexp, const T* q, const T* k,
                             const T* v, const int32_t* cu_seqlens, AttentionShape shape, Fp8Output fp8_out) {
  constexpr int kStride = kHeadDim + kPad;
  constexpr int kSlices = kHeadDim / 16;       // k-slices of the head dimension
  constexpr int kOutTiles = kHeadDim / 8;      // n-tiles of the output
  constexpr int kScoreTiles = kBlockKeys / 8;  // n-tiles of the scores
  extern __shared__ __align__(16) unsigned char shared_raw[];
  constexpr bool kQInStage = q_in_stage<kBlocksPerSm>();
  // Two stages of (K, V) after Q, or with Q where the second stage's K goes.
  T* tile_q = reinterpret_cast<T*>(shared_raw) + (kQInStage ? 2 * kBlockKeys * kStride : 0);
  T* stages = reinterpret_cast<T*>(shared_raw) + (kQInStage ? 0 : kBlockQueries * kStride);

  // Heads vary fastest and query blocks run from the last one down: the blocks with the most
  // causal work start first and the short ones fill the tail.
  const int head = blockIdx.x;
  const int kv_head = head / (shape.q_heads / shape.kv_heads);
  const int64_t tokens = shape.tokens;
  const int64_t q_stride = int64_t{shape.q_heads} * kHeadDim, kv_stride = int64_t{shape.kv_heads} * kHeadDim;
  const int64_t first_query = int64_t{gridDim.y - 1 - blockIdx.y} * kBlockQueries;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  load_tile<kHeadDim>(tile_q, q + first_query * q_stride + int64_t{head} * kHeadDim, q_stride, kBlockQueries,
                      tokens - first_query);

  // The two rows this thread accumulates, and the keys [lowest, end) each may see: up to the row
  // itself (causal) or to its document's end (bidirectional).
  const int last_document = shape.documents - 1;
  constexpr bool causal = kCausal;  // a template parameter: the causal kernels keep their registers
  auto key_limit = [&](int64_t row) {
    return causal ? row + 1 : int64_t{cu_seqlens[document_index(cu_seqlens, 0, last_document, row) + 1]};
  };
  int64_t rows[2], lowest[2], end[2] = {0, 0};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rows[r] = first_query + warp * 16 + g + 8 * r;
    lowest[r] =
        rows[r] < tokens ? lowest_visible_key(cu_seqlens, 0, last_document, shape.window, rows[r]) : tokens;
    if constexpr (!causal) end[r] = rows[r] < tokens ? key_limit(rows[r]) : 0;
  }
  const int64_t key_begin = lowest_visible_key(cu_seqlens, 0, last_document, shape.window, first_query);
  const int64_t last_row = min(first_query + kBlockQueries, tokens) - 1;
  const int64_t key_end = key_limit(last_row);  // rows ascend: the last row's limit is the highest
  // A key tile [first, first + 64) is fully visible to every row when it ends at or below the
  // first row's limit and starts at or above the lowest key the last row may see.
  const int64_t first_row_end = key_limit(first_query);
  const int64_t last_row_lowest =
      lowest_visible_key(cu_seqlens, 0, last_document, shape.window, last_row);
  const bool rows_complete = first_query + kBlockQueries <= tokens;
  auto load_stage = [&](int stage, int64_t first_key) {
    T* tile_k = stages + stage * 2 * kBlockKeys * kStride;
    const int64_t offset = first_key * kv_stride + int64_t{kv_head} * kHeadDim;
    load_tile_async<kHeadDim>(tile_k, k + offset, kv_stride, kBlockKeys, tokens - first_key);
    load_tile_async<kHeadDim>(tile_k + kBlockKeys * kStride, v + offset, kv_stride, kBlockKeys, tokens - first_key);
    copy_async_commit();
  };
  load_stage(0, key_begin);
  __syncthreads();

  uint32_t q_fragments[kSlices][4];
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    const T* base = tile_q + (warp * 16 + g) * kStride + s * 16 + 2 * t;
    q_fragments[s][0] = load_pair(base);
    q_fragments[s][1] = load_pair(base + 8 * kStride);
    q_fragments[s][2] = load_pair(base + 8);
    q_fragments[s][3] = load_pair(base + 8 * kStride + 8);
  }
  if constexpr (kQInStage) __syncthreads();  // all Q fragments are read before stage 1 overwrites the tile

  float accumulator[kOutTiles][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};
  const float scale_log2 = shape.softmax_scale * kLog2e;

  int stage = 0;
  for (int64_t first_key = key_begin; first_key < key_end; first_key += kBlockKeys, stage ^= 1) {
    if (first_key + kBlockKeys < key_end) {
      load_stage(stage ^ 1, first_key + kBlockKeys);  // that stage was released by the last barrier
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // this stage's tiles are complete for every thread
    const T* tile_k = stages + stage * 2 * kBlockKeys * kStride;
    const T* tile_v = tile_k + kBlockKeys * kStride;
    const bool fully_visible =
        rows_complete && first_key + kBlockKeys <= first_row_end && first_key >= last_row_lowest;

    float scores[kScoreTiles][4] = {};
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
#pragma unroll
      for (int n = 0; n < kScoreTiles; n += 2) {
        uint32_t b[4];  // B fragments of key n-tiles n and n + 1
        ldmatrix_x4(b, tile_k + (n * 8 + (lane >> 4) * 8 + (lane & 7)) * kStride + s * 16 + ((lane >> 3) & 1) * 8);
        mma_16816<T>(scores[n], q_fragments[s], b[0], b[1]);
        mma_16816<T>(scores[n + 1], q_fragments[s], b[2], b[3]);
      }
    }

    // Mask, scale to the exp2 domain, and update the running max.
    float new_max[2] = {row_max[0], row_max[1]};
    if (fully_visible) {
#pragma unroll
      for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          scores[n][e] *= scale_log2;
          new_max[e / 2] = fmaxf(new_max[e / 2], scores[n][e]);
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e / 2;
          const int64_t key = first_key + n * 8 + 2 * t + (e % 2);
          // (end is 0 past the last row)
          const bool visible = causal ? key <= rows[r] && key >= lowest[r] && rows[r] < tokens
                                      : key < end[r] && key >= lowest[r];
          scores[n][e] = visible ? scores[n][e] * scale_log2 : -INFINITY;
          new_max[r] = fmaxf(new_max[r], scores[n][e]);
        }
      }
    }
    float correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffffu, new_max[r], 1));
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffffu, new_max[r], 2));
      const float base = new_max[r] == -INFINITY ? 0.0f : new_max[r];
      correction[r] = exp2f(row_max[r] - base);
      row_max[r] = new_max[r];
      row_sum[r] *= correction[r];
    }
#pragma unroll
    for (int n = 0; n < kScoreTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const float base = row_max[r] == -INFINITY ? 0.0f : row_max[r];
        scores[n][e] = exp2f(scores[n][e] - base);
        row_sum[r] += scores[n][e];
      }
    }
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      accumulator[n][0] *= correction[0];
      accumulator[n][1] *= correction[0];
      accumulator[n][2] *= correction[1];
      accumulator[n][3] *= correction[1];
    }

    // accumulator += P · V, P straight from registers.
#pragma unroll
    for (int s = 0; s < kBlockKeys / 16; ++s) {
      const uint32_t p[4] = {pack_x2<T>(scores[2 * s][0], scores[2 * s][1]),
                             pack_x2<T>(scores[2 * s][2], scores[2 * s][3]),
                             pack_x2<T>(scores[2 * s + 1][0], scores[2 * s + 1][1]),
                             pack_x2<T>(scores[2 * s + 1][2], scores[2 * s + 1][3])};
#pragma unroll
      for (int d = 0; d < kHeadDim / 16; ++d) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, tile_v + (s * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + d * 16 +
                                 (lane >> 4) * 8);
        mma_16816<T>(accumulator[2 * d], p, b[0], b[1]);
        mma_16816<T>(accumulator[2 * d + 1], p, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  [[maybe_unused]] fp8::EpilogueState site;
  [[maybe_unused]] unsigned fp8_bits = 0;
  if constexpr (kFp8) site = fp8::epilogue_begin(fp8_out.row, fp8_out.scale_inv, blockIdx.x == 0 && blockIdx.y == 0);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    if (rows[r] >= tokens) continue;
    const float inverse = 1.0f / row_sum[r];
    const int64_t offset = rows[r] * q_stride + int64_t{head} * kHeadDim + 2 * t;
    T* target = out + offset;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      kernels::store_pair(target + n * 8, accumulator[n][2 * r] * inverse,
                          accumulator[n][2 * r + 1] * inverse);
      if constexpr (kFp8) {
        // The bf16 values `out` holds, then their codes (two bytes).
        const float2 stored = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(target + n * 8));
        fp8_bits = max(fp8_bits, max(fp8::amax_bits(stored.x), fp8::amax_bits(stored.y)));
        if (site.delayed) {
          *reinterpret_cast<__nv_fp8x2_storage_t*>(fp8_out.q + offset + n * 8) = __nv_cvt_float2_to_fp8x2(
              make_float2(__fmul_rn(stored.x, site.scale), __fmul_rn(stored.y, site.scale)), __NV_SATFINITE, __NV_E4M3);
        }
      }
    }
    if (t == 0) logsumexp[int64_t{head} * tokens + rows[r]] = row_max[r] / kLog2e + logf(row_sum[r]);
  }
  if constexpr (kFp8) fp8::epilogue_end(site, fp8_bits, fp8_out.row, fp8_out.amax);  // every thread: a barrier
}

template <int kHeadDim, int kBlocksPerSm, typename T, bool kFp8 = false, bool kCausal = true>
void launch_forward(T* out, float* logsumexp, const T* q, const T* k,
                    const T* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                    cudaStream_t stream, const Fp8Output& fp8_out = {}) {
  constexpr size_t kShared = forward_shared_bytes<kHeadDim, kBlocksPerSm>();
  CUDA_CHECK(cudaFuncSetAttribute(attention_forward_kernel<kHeadDim, kBlocksPerSm, T, kFp8, kCausal>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared)));
  const int64_t query_blocks = (shape.tokens + kBlockQueries - 1) / kBlockQueries;
  CUDA_REQUIRE(query_blocks <= 65535, "attention forward: too many tokens for one launch");
  const dim3 grid(shape.q_heads, static_cast<unsigned>(query_blocks));
  attention_forward_kernel<kHeadDim, kBlocksPerSm, T, kFp8, kCausal>
      <<<grid, kThreads, kShared, stream>>>(out, logsumexp, q, k, v, cu_seqlens, shape, fp8_out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void check_attention_shape(const AttentionShape& shape) {
  CUDA_REQUIRE(shape.head_dim == 32 || shape.head_dim == 64 || shape.head_dim == 128,
               "attention: head_dim must be 32, 64 or 128");
  CUDA_REQUIRE(shape.q_heads > 0 && shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0,
               "attention: q_heads must be a positive multiple of kv_heads");
  CUDA_REQUIRE(shape.documents > 0, "attention: cu_seqlens needs at least one document");
  CUDA_REQUIRE(shape.window >= 0, "attention: window must be 0 (none) or positive");
  CUDA_REQUIRE(shape.causal || shape.window == 0, "attention: a window needs causal attention");
}

template <int kBlocksPerSm, typename T>
void launch_forward_for_head_dim(T* out, float* logsumexp, const T* q, const T* k,
                                 const T* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                                 cudaStream_t stream) {
  switch (shape.head_dim) {
    case 32: launch_forward<32, kBlocksPerSm>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
    case 64: launch_forward<64, kBlocksPerSm>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
    default: launch_forward<128, kBlocksPerSm>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
  }
}

template <typename T>
void attention_forward(T* out, float* logsumexp, const T* q, const T* k,
                       const T* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                       cudaStream_t stream, int blocks_per_sm) {
  check_attention_shape(shape);
  CUDA_REQUIRE(blocks_per_sm == 0 || blocks_per_sm == 2 || blocks_per_sm == 3,
               "attention forward: blocks_per_sm must be 0 (the default), 2 or 3");
  if (shape.tokens == 0) return;
  if (!shape.causal) {  // bidirectional: the default (3 blocks per SM) kernel only
    switch (shape.head_dim) {
      case 32: launch_forward<32, 3, T, false, false>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
      case 64: launch_forward<64, 3, T, false, false>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
      default: launch_forward<128, 3, T, false, false>(out, logsumexp, q, k, v, cu_seqlens, shape, stream); break;
    }
    return;
  }
  if (blocks_per_sm == 2) {
    launch_forward_for_head_dim<2>(out, logsumexp, q, k, v, cu_seqlens, shape, stream);
  } else {
    launch_forward_for_head_dim<3>(out, logsumexp, q, k, v, cu_seqlens, shape, stream);
  }
}

void attention_forward_fp8(__nv_bfloat16* out, float* logsumexp, const __nv_bfloat16* q, const __nv_bfloat16* k,
                           const __nv_bfloat16* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                           const Fp8Output& fp8_out, cudaStream_t stream) {
  check_attention_shape(shape);
  CUDA_REQUIRE(fp8_out.format == Fp8Target::E4M3, "attention forward: the output's codes are E4M3 (an input)");
  CUDA_REQUIRE(shape.causal, "attention forward: the FP8 epilogue is causal only");
  if (shape.tokens == 0) return;
  using bf16 = __nv_bfloat16;
  switch (shape.head_dim) {
    case 32: launch_forward<32, 3, bf16, true>(out, logsumexp, q, k, v, cu_seqlens, shape, stream, fp8_out); break;
    case 64: launch_forward<64, 3, bf16, true>(out, logsumexp, q, k, v, cu_seqlens, shape, stream, fp8_out); break;
    default: launch_forward<128, 3, bf16, true>(out, logsumexp, q, k, v, cu_seqlens, shape, stream, fp8_out); break;
  }
  fp8_quantize_pending(out, shape.tokens * shape.q_heads * shape.head_dim, fp8_out, stream);
}

#define INSTANTIATE(T)                                                                                      \
  template void attention_forward(T*, float*, const T*, const T*, const T*, const int32_t*, const AttentionShape&, \
                                  cudaStream_t, int);
SUROGATE_FOR_16BIT_TYPES(INSTANTIATE)
#undef INSTANTIATE

}  // namespace surogate::cuda
