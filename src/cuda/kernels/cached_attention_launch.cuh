// What the cached-attention kernels share (cached_attention.cu: the append, the CUDA-core split
// kernel and the combine; cached_attention_tensor.cu: the tensor-core split kernel;
// cached_attention_rows.cu: the many-rows kernel; cached_attention_launch.cu: the launch
// parameters and the split policy): the launch parameters, each row's place in the cache and how
// a tile's keys are split between the blocks. Internal to those files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda::cached {

constexpr int kCacheWarps = 4;
constexpr int kCacheThreads = kCacheWarps * 32;
constexpr int kCacheTileQueries = 8;   // most queries of one kv head per CUDA-core split block
constexpr int kTensorTileQueries = 16;  // queries of one kv head per tensor-core split block (the mma's M)
constexpr int kCacheLaneElements = 8;  // elements of a key (query, value) row per lane
// At least this many keys a split. 128 rather than 32 (2026-11-30, bench/decode_layer_bench.cpp
// on an H200, one Qwen3-8B request): fewer, longer splits and a shorter combine took a layer from
// 117.1 to 113.1 µs at 640 cached tokens and 135.9 to 124.2 at 4,096 (64: 114.2 / 135.9). Rows
// enough to fill the GPU (64 and more at these lengths) split less than this anyway.
constexpr int kCacheMinSplitKeys = 128;
constexpr int kCacheMaxSplits = 256;
constexpr int kCacheMaxHeadDim = 256;
// Lane groups of a block × head_dim ≤ kCacheThreads × kCacheLaneElements: the shared accumulators.
constexpr int kCacheGroupElements = kCacheThreads * kCacheLaneElements;
constexpr double kCacheLog2e = 1.4426950408889634;

// What the kernels share besides the pointers; built once by the launchers.
struct CacheLaunch {
  CachedAttentionShape shape;
  int group = 0;  // query heads per kv head
  int lanes = 0;  // lanes per key: D / 8 rounded up to a power of two
  int tile_queries = 0;  // queries per tile: 1, 2, 4 or 8 (the split kernel's template argument)
  int tiles = 0;         // query tiles per (row, kv head)
  int splits = 0;
  float scale_log2 = 0.0f;  // the softmax scale times log2(e): scores in the exp2 domain
};

// The launch parameters of `shape` with `splits` (the shape checked: UserError-style CUDA_REQUIRE
// naming what is wrong), and whether a pointer is 16-byte aligned (the kernels' vector loads).
CacheLaunch cache_launch(const CachedAttentionShape& shape, int splits);
inline bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// Row b of the call: where its slot starts in the cache, how many tokens it holds and brings.
// A row the reference refuses brings nothing and is never appended to (`fresh` 0).
struct CacheRow {
  int64_t base = 0;  // element offset of [slot, 0, 0, 0]
  int64_t held = 0, fresh = 0;
};
__device__ __forceinline__ CacheRow cache_row(const CachedAttentionShape& s, const int32_t* slot_ids,
                                              const int32_t* cache_lengths, const int32_t* new_lengths,
                                              int64_t row) {
  const int64_t slot = slot_ids[row], held = cache_lengths[row], fresh = new_lengths[row];
  CacheRow result;
  if (slot < 0 || slot >= s.slots || fresh < 0 || fresh > s.sequence || held < 0 || held + fresh > s.capacity) {
    return result;
  }
  result.base = slot * s.capacity * s.kv_heads * s.head_dim;
  result.held = held;
  result.fresh = fresh;
  return result;
}

// The keys a query tile sees and how the split blocks share them: each split takes `per_split`
// keys from `begin` (at least kCacheMinSplitKeys), so only the first `active` splits hold any. The
// split kernel and the combine compute it alike: splits past `active` do not run, and their
// partials are never used (the combine may load them beside the active ones' and drop them).
struct SplitKeys {
  int64_t begin = 0, end = 0;
  int per_split = 1, active = 0;  // int: a row's keys fit (cache_launch checks the capacity)
};
__device__ __forceinline__ SplitKeys split_keys(const CacheLaunch& launch, const CacheRow& cache, int64_t first_t,
                                                int64_t last_t) {
  const CachedAttentionShape& s = launch.shape;
  SplitKeys keys;
  keys.end = cache.held + last_t + 1;
  keys.begin = s.window > 0 ? max(int64_t{0}, cache.held + first_t - s.window + 1) : 0;
  const int span = static_cast<int>(keys.end - keys.begin);
  keys.per_split = max(kCacheMinSplitKeys, (span + launch.splits - 1) / launch.splits);
  keys.active = min(launch.splits, (span + keys.per_split - 1) / keys.per_split);
  return keys;
}

// The positions t of a tile's first and last query (the tile's (t, g) pairs in order, t · group + g).
__device__ __forceinline__ void tile_positions(const CacheLaunch& launch, int first_query, int queries,
                                               int64_t& first_t, int64_t& last_t) {
  first_t = first_query / launch.group;
  last_t = (first_query + queries - 1) / launch.group;
}

// Index of query (row, t, head) in the [B, T, Hq] order of q, out and the partials.
__device__ __forceinline__ int64_t query_index(const CachedAttentionShape& s, int64_t row, int64_t t, int head) {
  return (row * s.sequence + t) * s.q_heads + head;
}

// With one split the split kernel writes the output itself (no combine): the tile's queries that
// are padding (t ≥ n, inside the T · group pairs) get their zeros here.
template <typename T>
__device__ __forceinline__ void zero_padding_queries(T* out, const CacheLaunch& launch, int64_t row, int kv_head,
                                                     int first_query, int queries, int tile_queries) {
  const CachedAttentionShape& s = launch.shape;
  const int64_t pairs = s.sequence * launch.group;
  const int first = max(queries, 0);
  for (int item = threadIdx.x; item < (tile_queries - first) * s.head_dim; item += kCacheThreads) {
    const int flat = first_query + first + item / s.head_dim;
    if (flat >= pairs) continue;
    const int64_t query = query_index(s, row, flat / launch.group, kv_head * launch.group + static_cast<int>(flat % launch.group));
    out[query * s.head_dim + item % s.head_dim] = kernels::from_float<T>(0.0f);
  }
}

// The tensor-core split kernel (cached_attention_tensor.cu) for bf16 / fp16 and head_dim 64 or
// 128 on sm_80 and later, tiles of 16 queries: whether it takes `shape` on this GPU, and its launch
// (the same partials as the CUDA-core kernel, or the output itself when launch.splits is 1).
bool tensor_split_takes(const CachedAttentionShape& shape);

// The append folded into the tensor-core split kernel (cached_attention_append_forward): the split
// blocks read the step's new keys and values from k / v instead of the cache, and the first split
// of each (row, kv head) writes them to the caches, which no block of the launch reads at those
// positions. All null: the append ran before (cached_attention_append). With norm.q_weight set,
// the blocks also normalise and rotate their queries and the new keys (q and k as the q/k norm +
// RoPE received them) in shared memory first.
template <typename T>
struct FoldedAppend {
  const T* k = nullptr;
  const T* v = nullptr;
  T* k_cache = nullptr;
  T* v_cache = nullptr;
  CachedNormRope<T> norm;
};

template <typename T>
void launch_tensor_split(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q,
                         const T* k_cache, const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                         const int32_t* new_lengths, const CacheLaunch& launch, cudaStream_t stream,
                         const FoldedAppend<T>& append = {});

// The many-rows kernel (cached_attention_rows.cu; cached_attention_uses_rows_kernel says when):
// one warp per (row, kv head) at a time, whole key ranges, no splits. Its launch writes the output
// itself, padding queries zeroed, on `grid_warps` warps (0: as many as are resident; never fewer
// than one for every 32 items).
template <typename T>
void launch_tensor_rows(T* out, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
                        const int32_t* cache_lengths, const int32_t* new_lengths, const CacheLaunch& launch,
                        cudaStream_t stream, int64_t grid_warps = 0);

}  // namespace surogate::cuda::cached
