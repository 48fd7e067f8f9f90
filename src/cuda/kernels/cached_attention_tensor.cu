// The tensor-core split kernel of cached attention (cached_attention.h: the op's layouts and the
// flash-decoding design; cached_attention_launch.cuh: what it shares with the CUDA-core kernel).
//
// Why: the CUDA-core kernel spends its time on lane-group shuffles and per-key softmax work, not
// on the cache read: on an H200 (2026-11-29, cached_attention_bench) 512 decode rows of Qwen3-8B's
// heads (GQA 4) over 320 cached tokens read K and V at 0.8 TB/s, Qwen3-1.7B's (GQA 2) at 2.2 TB/s,
// and the attention was half of a GRPO rollout's decode step. Here the tile's queries are the
// rows of one m16n8k16 product (a tile holds 16 (position, head) pairs of one kv head; decode
// with GQA 4 fills 4 of them: the tensor cores have the room), so a block does the cache read and
// little else.
//
// A block (4 warps) takes the keys of one split of one (row, kv head, tile). Each warp steps over
// 16 keys at a time (the warps interleaved), with its own online softmax (exp2 domain):
//   scores  S[16 × 16] = Q[16 × D] · K[16 × D]ᵀ, the keys as two n-tiles of 8. The dot product
//           does not care in which order the head dims are summed, so a lane's B fragment is read
//           straight from the cache as 16-byte pieces (dims 32p + 8t .. +7 of key g) and the Q
//           fragments, loaded once, use the same order;
//   values  O[16 × D] += P[16 × 16] · V[16 × D]: the scores' C fragments are P's A fragment (no
//           shared memory); V goes through the warp's padded shared tile and ldmatrix.trans.
// P enters the product rounded to the element type, as in the training kernels (its row sums stay
// fp32). The warps' states are then merged in warp order into the split's partials — the same
// (max, sum, accumulator) the combine reads — or, with one split, into the output.
// Deterministic: fixed key order per warp, fixed merge order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cached_attention_launch.cuh"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda::cached {
namespace {

constexpr int kStepKeys = 16;  // keys a warp scores per step: two n-tiles of 8
constexpr int kRows = kTensorTileQueries;

// The block's shared memory: the warps' V tiles while they step, then their states for the merge.
template <typename T, int D>
struct TensorShared {
  static constexpr int kRowStride = D + 8;  // V tile row (elements): 16-byte aligned, ldmatrix conflict-free
  union {
    T values[kCacheWarps][kStepKeys * kRowStride];
    struct {
      float accumulator[kCacheWarps][kRows][D];
      float maximum[kCacheWarps][kRows];
      float sum[kCacheWarps][kRows];
    } merge;
  };
};

__device__ __forceinline__ uint4 load_piece(const void* address, bool valid) {
  return valid ? *reinterpret_cast<const uint4*>(address) : make_uint4(0, 0, 0, 0);
}

template <typename T, int D>
__global__ void __launch_bounds__(kCacheThreads)
    tensor_split_kernel(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q,
                        const T* k_cache, const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                        const int32_t* new_lengths, CacheLaunch launch) {
  constexpr int kPieces = D / 32;  // 16-byte pieces of a row a lane holds: dims 32p + 8t .. +7
  constexpr int kSteps = D / 16;   // k-steps of the scores' product
  constexpr int kDimTiles = D / 8; // n-tiles of the output
  using Shared = TensorShared<T, D>;
  __shared__ __align__(16) Shared shared;

  const CachedAttentionShape& s = launch.shape;
  const int kv_head = static_cast<int>(blockIdx.x) / launch.tiles, tile = static_cast<int>(blockIdx.x) % launch.tiles;
  const int split = static_cast<int>(blockIdx.y);
  const int64_t row = blockIdx.z;
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  const int group = launch.group;
  const int first_query = tile * kRows;
  const int queries = min(kRows, static_cast<int>(cache.fresh) * group - first_query);
  const bool direct = launch.splits == 1;  // the output written here, no partials
  if (direct) zero_padding_queries(out, launch, row, kv_head, first_query, queries, kRows);
  if (queries <= 0) return;  // padding only: the combine (or the line above) writes its zeros
  int64_t first_t = 0, last_t = 0;
  tile_positions(launch, first_query, queries, first_t, last_t);
  const SplitKeys range = split_keys(launch, cache, first_t, last_t);
  if (split >= range.active) return;  // no keys: the combine does not read this split
  const int64_t split_begin = range.begin + int64_t{split} * range.per_split;
  const int64_t split_end = min(range.end, split_begin + range.per_split);

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  // The lane's two query rows (g, g + 8): their positions, whether they are real, and the A
  // fragments of Q in the dims' order described above.
  int64_t position[2];
  bool real[2];
  uint32_t query[kSteps][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h, flat = first_query + r, at = flat / group;
    real[h] = r < queries;
    position[h] = cache.held + at;
    const T* source = q + query_index(s, row, at, kv_head * group + flat % group) * D + 8 * t;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const uint4 piece = load_piece(source + 32 * p, real[h]);
      query[2 * p][h] = piece.x;
      query[2 * p][2 + h] = piece.y;
      query[2 * p + 1][h] = piece.z;
      query[2 * p + 1][2 + h] = piece.w;
    }
  }

  float acc[kDimTiles][4];
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float maximum[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  T* values_tile = shared.values[warp];
  const int64_t key_stride = int64_t{s.kv_heads} * D;
  const T* keys = k_cache + cache.base + int64_t{kv_head} * D;
  const T* values = v_cache + cache.base + int64_t{kv_head} * D;
  for (int64_t base = split_begin + int64_t{warp} * kStepKeys; base < split_end;
       base += int64_t{kCacheWarps} * kStepKeys) {
    uint4 key_pieces[2][kPieces];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int64_t key = base + 8 * n + g;
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        key_pieces[n][p] = load_piece(keys + key * key_stride + 32 * p + 8 * t, key < split_end);
      }
    }
#pragma unroll
    for (int i = lane; i < kStepKeys * (D / 8); i += 32) {
      const int key = i / (D / 8), piece = i % (D / 8);
      const uint4 value = load_piece(values + (base + key) * key_stride + 8 * piece, base + key < split_end);
      *reinterpret_cast<uint4*>(values_tile + key * Shared::kRowStride + 8 * piece) = value;
    }
    float score[2][4] = {};
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const uint4& piece = key_pieces[n][k / 2];
        attention::mma_16816<T>(score[n], query[k], k % 2 == 0 ? piece.x : piece.z, k % 2 == 0 ? piece.y : piece.w);
      }
    }
    // Masked, scaled into the exp2 domain; then each row's running max, sum and accumulator.
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const int64_t key = base + 8 * n + 2 * t + e % 2;
        const bool visible = real[h] && key < split_end && key <= position[h] &&
                             (s.window <= 0 || key > position[h] - s.window);
        score[n][e] = visible ? score[n][e] * launch.scale_log2 : -INFINITY;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float step_max = fmaxf(fmaxf(score[0][2 * h], score[0][2 * h + 1]), fmaxf(score[1][2 * h], score[1][2 * h + 1]));
      step_max = fmaxf(step_max, __shfl_xor_sync(0xffffffffu, step_max, 1));
      step_max = fmaxf(step_max, __shfl_xor_sync(0xffffffffu, step_max, 2));
      const float new_max = fmaxf(maximum[h], step_max);
      const float correction = new_max == -INFINITY ? 1.0f : exp2f(maximum[h] - new_max);
      float step_sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          score[n][e] = new_max == -INFINITY ? 0.0f : exp2f(score[n][e] - new_max);
          step_sum += score[n][e];
        }
      }
      sum[h] = sum[h] * correction + step_sum;
#pragma unroll
      for (int j = 0; j < kDimTiles; ++j) {
        acc[j][2 * h] *= correction;
        acc[j][2 * h + 1] *= correction;
      }
      maximum[h] = new_max;
    }
    const uint32_t probabilities[4] = {attention::pack_x2<T>(score[0][0], score[0][1]),
                                       attention::pack_x2<T>(score[0][2], score[0][3]),
                                       attention::pack_x2<T>(score[1][0], score[1][1]),
                                       attention::pack_x2<T>(score[1][2], score[1][3])};
    __syncwarp();  // the warp's V tile is written
    const int matrix = lane / 8;
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      uint32_t fragments[4];
      attention::ldmatrix_x4_trans(
          fragments, values_tile + ((matrix % 2) * 8 + lane % 8) * Shared::kRowStride + 16 * j + (matrix / 2) * 8);
      attention::mma_16816<T>(acc[2 * j], probabilities, fragments[0], fragments[1]);
      attention::mma_16816<T>(acc[2 * j + 1], probabilities, fragments[2], fragments[3]);
    }
    __syncwarp();  // read before the next step overwrites it
  }

  // A row's sum is spread over the four lanes of its quad.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
  }
  __syncthreads();  // every warp is done with its V tile: the merge reuses the memory
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (t == 0) {
      shared.merge.maximum[warp][r] = maximum[h];
      shared.merge.sum[warp][r] = sum[h];
    }
#pragma unroll
    for (int j = 0; j < kDimTiles; ++j) {
      shared.merge.accumulator[warp][r][8 * j + 2 * t] = acc[j][2 * h];
      shared.merge.accumulator[warp][r][8 * j + 2 * t + 1] = acc[j][2 * h + 1];
    }
  }
  __syncthreads();
  const int64_t stride = s.batch * s.sequence * s.q_heads;  // queries per split
  for (int item = static_cast<int>(threadIdx.x); item < queries * (D + 1); item += kCacheThreads) {
    const int r = item / (D + 1), d = item % (D + 1);  // d == D: the max and the sum
    float tile_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kCacheWarps; ++w) tile_max = fmaxf(tile_max, shared.merge.maximum[w][r]);
    float weight[kCacheWarps], total = 0.0f;
#pragma unroll
    for (int w = 0; w < kCacheWarps; ++w) {
      weight[w] = tile_max == -INFINITY ? 0.0f : exp2f(shared.merge.maximum[w][r] - tile_max);
      total += weight[w] * shared.merge.sum[w][r];
    }
    const int flat = first_query + r;
    const int64_t query_at = query_index(s, row, flat / group, kv_head * group + flat % group);
    const int64_t index = int64_t{split} * stride + query_at;
    if (d == D) {
      if (!direct) {
        partial_max[index] = tile_max;
        partial_sum[index] = total;
      }
      continue;
    }
    float accumulated = 0.0f;
#pragma unroll
    for (int w = 0; w < kCacheWarps; ++w) accumulated += weight[w] * shared.merge.accumulator[w][r][d];
    if (direct) {
      out[query_at * D + d] = kernels::from_float<T>(accumulated / total);
    } else {
      partial_acc[index * D + d] = accumulated;
    }
  }
}

}  // namespace

bool tensor_split_takes(const CachedAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128) return false;
  // mma.sync on bf16 / fp16 operands: sm_80 and later (the kernel traps on older builds' targets).
  static std::atomic<int> majors[64];
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= 64) return false;
  int major = majors[device].load(std::memory_order_relaxed);
  if (major == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    majors[device].store(major, std::memory_order_relaxed);
  }
  return major >= 8;
}

template <typename T>
void launch_tensor_split(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q,
                         const T* k_cache, const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                         const int32_t* new_lengths, const CacheLaunch& launch, cudaStream_t stream) {
  const CachedAttentionShape& shape = launch.shape;
  const dim3 grid(static_cast<unsigned>(int64_t{shape.kv_heads} * launch.tiles), static_cast<unsigned>(launch.splits),
                  static_cast<unsigned>(shape.batch));
  auto run = [&](auto kernel) {
    kernel<<<grid, kCacheThreads, 0, stream>>>(out, partial_max, partial_sum, partial_acc, q, k_cache, v_cache,
                                               slot_ids, cache_lengths, new_lengths, launch);
  };
  if (shape.head_dim == 64) {
    run(tensor_split_kernel<T, 64>);
  } else {
    run(tensor_split_kernel<T, 128>);
  }
  CUDA_CHECK_LAUNCH();
}

template void launch_tensor_split<__nv_bfloat16>(__nv_bfloat16*, float*, float*, float*, const __nv_bfloat16*,
                                                 const __nv_bfloat16*, const __nv_bfloat16*, const int32_t*,
                                                 const int32_t*, const int32_t*, const CacheLaunch&, cudaStream_t);
template void launch_tensor_split<__half>(__half*, float*, float*, float*, const __half*, const __half*, const __half*,
                                          const int32_t*, const int32_t*, const int32_t*, const CacheLaunch&,
                                          cudaStream_t);

}  // namespace surogate::cuda::cached
