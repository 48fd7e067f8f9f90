// The pieces the cached-attention kernels share (cached_attention.cu): the launch constants, a row's
// place in the cache, 8-element loads, and the split block's work — its keys' scores, the online
// softmax of its lane groups and their merge into the split's partials. Included by one file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/vector_math.cuh"

namespace surogate::cuda::cached_attention_detail {

constexpr int kCacheWarps = 4;
constexpr int kCacheThreads = kCacheWarps * 32;
constexpr int kCacheTileQueries = 8;   // most queries of one kv head per split block
constexpr int kCacheLaneElements = 8;  // elements of a key (query, value) row per lane
constexpr int kCacheMinSplitKeys = 32;
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

// Eight elements as they lie in memory (16 bytes of a 16-bit type, 32 of fp32), converted when
// used. Typed vectors (float4, kernels::Vec8), never reinterpreted words: no aliasing questions.
template <typename T>
struct RawEight {
  kernels::Vec8<T> vector;
};
template <>
struct RawEight<float> {
  float4 low, high;
};
template <typename T>
__device__ __forceinline__ RawEight<T> load_eight(const T* address) {
  RawEight<T> raw;
  if constexpr (std::is_same_v<T, float>) {
    raw.low = reinterpret_cast<const float4*>(address)[0];
    raw.high = reinterpret_cast<const float4*>(address)[1];
  } else {
    raw.vector = kernels::load_x8(address);
  }
  return raw;
}
template <typename T>
__device__ __forceinline__ void store_eight(T* address, const RawEight<T>& raw) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(address)[0] = raw.low;
    reinterpret_cast<float4*>(address)[1] = raw.high;
  } else {
    kernels::store_x8(address, raw.vector);
  }
}
template <typename T>
__device__ __forceinline__ void eight_floats(const RawEight<T>& raw, float (&out)[kCacheLaneElements]) {
  if constexpr (std::is_same_v<T, float>) {
    const float values[kCacheLaneElements] = {raw.low.x,  raw.low.y,  raw.low.z,  raw.low.w,
                                              raw.high.x, raw.high.y, raw.high.z, raw.high.w};
#pragma unroll
    for (int i = 0; i < kCacheLaneElements; ++i) out[i] = values[i];
  } else {
    kernels::unpack(raw.vector, out);
  }
}

// Index of query (row, t, head) in the [B, T, Hq] order of q, out and the partials.
__device__ __forceinline__ int64_t query_index(const CachedAttentionShape& s, int64_t row, int64_t t, int head) {
  return (row * s.sequence + t) * s.q_heads + head;
}

// The scores of a chunk of keys for one query: this lane's partial dot products finished across
// the lane group (an xor butterfly: every lane of the group ends with the same bits).
__device__ __forceinline__ float group_dot(const float (&query)[kCacheLaneElements],
                                           const float (&key)[kCacheLaneElements], int lanes) {
  float dot = 0.0f;
#pragma unroll
  for (int e = 0; e < kCacheLaneElements; ++e) dot = fmaf(query[e], key[e], dot);
  for (int offset = lanes / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  return dot;
}

// Merges the lane groups' softmax states into the split's partial for each of the tile's queries:
// max, sum and unnormalised accumulator (exp2 domain), written to the workspace.
template <int kQueries>
struct CacheGroupStates {
  float maximum[kCacheThreads][kQueries];  // per lane group (at most one per thread)
  float sum[kCacheThreads][kQueries];
  float accumulator[kQueries * kCacheGroupElements];  // [group][query][D]
  float weight[kCacheThreads][kQueries];             // a group's share of the tile's maximum
  float tile_max[kQueries];
};

// The one-launch form's extras (cached_attention_one_launch); the two-launch split kernel has none.
template <typename T>
struct CacheOneLaunch {
  T* out = nullptr;
  int32_t* tickets = nullptr;  // one per (row, kv head × query tile), zero between launches
  const T* k = nullptr;        // the new tokens' keys and values [B, T, Hkv, D]
  const T* v = nullptr;
};

// The fp32 workspace: per split and query the max and sum, and the accumulator [.., D].
struct CachePartials {
  float* max = nullptr;
  float* sum = nullptr;
  float* acc = nullptr;
};

// The keys query tile `tile` of a row sees ([begin, end)), and the keys each split takes of them.
struct TileKeys {
  int64_t first_query = 0;  // flat index t · group + g of the tile's first query
  int queries = 0;          // real queries of the tile (t < n); ≤ 0: padding only
  int64_t first_t = 0, last_t = 0, begin = 0, end = 0, per_split = 0;
};
template <int kQueries>
__device__ __forceinline__ TileKeys tile_keys(const CacheLaunch& launch, const CacheRow& cache, int tile) {
  const CachedAttentionShape& s = launch.shape;
  TileKeys keys;
  keys.first_query = int64_t{tile} * kQueries;
  keys.queries = static_cast<int>(min(int64_t{kQueries}, cache.fresh * launch.group - keys.first_query));
  if (keys.queries <= 0) return keys;
  keys.first_t = keys.first_query / launch.group;
  keys.last_t = (keys.first_query + keys.queries - 1) / launch.group;
  keys.end = cache.held + keys.last_t + 1;
  keys.begin = s.window > 0 ? max(int64_t{0}, cache.held + keys.first_t - s.window + 1) : 0;
  keys.per_split = max(int64_t{kCacheMinSplitKeys}, (keys.end - keys.begin + launch.splits - 1) / launch.splits);
  return keys;
}

// The splits' partials merged for the combine: per query of a tile the splits' weights
// (exp2(max_split − max)) and the weighted sum of their sums.
template <int kQueries>
struct CacheCombineStates {
  float weight[kCacheMaxSplits][kQueries];
  float total[kQueries];
};
template <int kQueries>
union CacheShared {
  CacheGroupStates<kQueries> groups;
  CacheCombineStates<kQueries> combine;
};

// Blocks: (kv head × query tile, split, row). See cached_attention.h. kQueries per tile; a lane
// group scores kChunk keys before one rescale (2 with 8 queries, to stay within the registers).
// With kOneLaunch the keys and values of the new positions (≥ L) come from k and v, not the cache
// (the append happens in the same launch).
template <typename T, int kQueries, bool kOneLaunch>
__device__ __forceinline__ void split_partials(CacheGroupStates<kQueries>& states, const CachePartials& partials,
                                               const T* q, const T* k_cache, const T* v_cache,
                                               const CacheOneLaunch<T>& one, const CacheLaunch& launch,
                                               const CacheRow& cache, const TileKeys& tile, int kv_head, int split,
                                               int64_t row) {
  constexpr int kChunk = kQueries >= 8 ? 2 : 4;
  const CachedAttentionShape& s = launch.shape;
  const int group_size = launch.group, dim = s.head_dim;
  const int64_t first_query = tile.first_query;
  const int queries = tile.queries;
  const int64_t split_begin = tile.begin + split * tile.per_split;
  const int64_t split_end = min(tile.end, split_begin + tile.per_split);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, lanes = launch.lanes;
  const int groups_per_warp = 32 / lanes, groups = kCacheWarps * groups_per_warp;
  const int group = warp * groups_per_warp + lane / lanes;
  const int element = (lane % lanes) * kCacheLaneElements;  // this lane's first element of a row
  const bool has_elements = element < dim;

  float query[kQueries][kCacheLaneElements];
  int64_t position[kQueries];
  float maximum[kQueries], sum[kQueries], acc[kQueries][kCacheLaneElements];
#pragma unroll
  for (int j = 0; j < kQueries; ++j) {
    const int64_t flat = first_query + j, t = flat / group_size;
    const int head = kv_head * group_size + static_cast<int>(flat % group_size);
    position[j] = cache.held + t;
    maximum[j] = -INFINITY;
    sum[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < kCacheLaneElements; ++e) query[j][e] = acc[j][e] = 0.0f;
    if (j < queries && has_elements) {
      eight_floats(load_eight(q + query_index(s, row, t, head) * dim + element), query[j]);
#pragma unroll
      for (int e = 0; e < kCacheLaneElements; ++e) query[j][e] *= launch.scale_log2;
    }
  }

  const int64_t key_stride = int64_t{s.kv_heads} * dim;
  const T* keys = k_cache + cache.base + int64_t{kv_head} * dim + element;
  const T* values = v_cache + cache.base + int64_t{kv_head} * dim + element;
  // The new tokens' rows share the cache's stride (Hkv · D per position).
  const int64_t new_offset = (row * s.sequence * s.kv_heads + kv_head) * dim + element - cache.held * key_stride;
  const T* new_keys = kOneLaunch ? one.k + new_offset : nullptr;
  const T* new_values = kOneLaunch ? one.v + new_offset : nullptr;
  // Warp-uniform trip count (the shuffles need every lane): a warp's groups take neighbouring chunks.
  for (int64_t warp_start = split_begin + int64_t{warp} * groups_per_warp * kChunk; warp_start < split_end;
       warp_start += int64_t{groups} * kChunk) {
    const int64_t start = warp_start + int64_t{lane / lanes} * kChunk;
    RawEight<T> key_raw[kChunk], value_raw[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int64_t at = start + c;
      const bool load = has_elements && at < split_end;
      const bool fresh = kOneLaunch && at >= cache.held;
      key_raw[c] = load ? load_eight((fresh ? new_keys : keys) + at * key_stride) : RawEight<T>{};
      value_raw[c] = load ? load_eight((fresh ? new_values : values) + at * key_stride) : RawEight<T>{};
    }
    float score[kQueries][kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      float key[kCacheLaneElements];
      eight_floats(key_raw[c], key);
      const int64_t key_position = start + c;
#pragma unroll
      for (int j = 0; j < kQueries; ++j) {
        if (j >= queries) continue;
        const float dot = group_dot(query[j], key, lanes);
        const bool visible = key_position < split_end && key_position <= position[j] &&
                             (s.window <= 0 || key_position > position[j] - s.window);
        score[j][c] = visible ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int j = 0; j < kQueries; ++j) {
      if (j >= queries) continue;
      float chunk_max = score[j][0];
#pragma unroll
      for (int c = 1; c < kChunk; ++c) chunk_max = fmaxf(chunk_max, score[j][c]);
      const float new_max = fmaxf(maximum[j], chunk_max);
      if (new_max == -INFINITY) continue;  // nothing visible yet
      const float correction = exp2f(maximum[j] - new_max);
      sum[j] *= correction;
#pragma unroll
      for (int e = 0; e < kCacheLaneElements; ++e) acc[j][e] *= correction;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const float probability = exp2f(score[j][c] - new_max);
        float value[kCacheLaneElements];
        eight_floats(value_raw[c], value);
        sum[j] += probability;
#pragma unroll
        for (int e = 0; e < kCacheLaneElements; ++e) acc[j][e] = fmaf(probability, value[e], acc[j][e]);
      }
      maximum[j] = new_max;
    }
  }

  // Merge the lane groups (in group order) into the split's partials.
#pragma unroll
  for (int j = 0; j < kQueries; ++j) {
    if (j >= queries) continue;
    if (lane % lanes == 0) {
      states.maximum[group][j] = maximum[j];
      states.sum[group][j] = sum[j];
    }
    if (has_elements) {
#pragma unroll
      for (int e = 0; e < kCacheLaneElements; ++e) {
        states.accumulator[(group * kQueries + j) * dim + element + e] = acc[j][e];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < queries) {
    float m = -INFINITY;
    for (int g = 0; g < groups; ++g) m = fmaxf(m, states.maximum[g][threadIdx.x]);
    states.tile_max[threadIdx.x] = m;
  }
  __syncthreads();
  for (int pair = threadIdx.x; pair < groups * queries; pair += kCacheThreads) {
    const int g = pair / queries, j = pair % queries;
    const float m = states.tile_max[j];
    states.weight[g][j] = m == -INFINITY ? 0.0f : exp2f(states.maximum[g][j] - m);
  }
  __syncthreads();
  const int64_t stride = s.batch * s.sequence * s.q_heads;  // queries per split
  for (int item = threadIdx.x; item < queries * (dim + 1); item += kCacheThreads) {
    const int j = item / (dim + 1), d = item % (dim + 1);  // d == dim: the sum
    const int64_t flat = first_query + j;
    const int64_t index = int64_t{split} * stride +
                          query_index(s, row, flat / group_size, kv_head * group_size + static_cast<int>(flat % group_size));
    float total = 0.0f;
    if (d == dim) {
      for (int g = 0; g < groups; ++g) total += states.weight[g][j] * states.sum[g][j];
      partials.sum[index] = total;
      partials.max[index] = states.tile_max[j];
    } else {
      for (int g = 0; g < groups; ++g) total += states.weight[g][j] * states.accumulator[(g * kQueries + j) * dim + d];
      partials.acc[index * dim + d] = total;
    }
  }
}

}  // namespace surogate::cuda::cached_attention_detail
