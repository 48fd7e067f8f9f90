// Attention over a KV cache: the append, the flash-decoding split kernel and the combine (see
// cached_attention.h for the layouts, the semantics and the design).
#include "cuda/kernels/cached_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/kernels/cached_attention_launch.cuh"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/vector_math.cuh"
#include "cuda/kernels/programmatic_launch.cuh"
#include "cuda/kernels/qk_norm_rope.h"

namespace surogate::cuda {
namespace {

using namespace cached;

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

// One thread per 8 elements of one new token's keys and values.
template <typename T>
__global__ void cache_append_kernel(T* k_cache, T* v_cache, const T* k, const T* v, const int32_t* slot_ids,
                                    const int32_t* cache_lengths, const int32_t* new_lengths, CacheLaunch launch) {
  wait_for_previous_grid();  // launched programmatically (programmatic_launch.cuh): nothing touched before
  allow_next_grid();
  const CachedAttentionShape& s = launch.shape;
  const int parts = s.head_dim / kCacheLaneElements;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.batch * s.sequence * s.kv_heads * parts) return;
  const int part = static_cast<int>(index % parts);
  const int64_t token_head = index / parts;  // (row · T + t) · Hkv + kv head
  const int kv_head = static_cast<int>(token_head % s.kv_heads);
  const int64_t token = token_head / s.kv_heads, t = token % s.sequence, row = token / s.sequence;
  // The key and value loaded beside the row's place in the cache: one trip to memory, not two.
  const int64_t from = token_head * s.head_dim + part * kCacheLaneElements;
  const auto key = load_eight(k + from);
  const auto value = load_eight(v + from);
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  if (t >= cache.fresh) return;
  const int64_t to = cache.base + ((cache.held + t) * s.kv_heads + kv_head) * s.head_dim + part * kCacheLaneElements;
  store_eight(k_cache + to, key);
  store_eight(v_cache + to, value);
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
  float tile_sum[kQueries];
};

// Blocks resident per multiprocessor the split kernel is compiled for: 4-query tiles (decode
// with GQA 4 in fp32) capped at the registers of three blocks, which measured 1.3× faster on an
// H200 (2026-11-29, cached_attention_bench) than the two the compiler's choice left room for.
template <int kQueries>
constexpr int split_min_blocks() {
  return kQueries == 4 ? 3 : 1;
}

// Blocks: (kv head × query tile, split, row). See cached_attention.h. kQueries per tile; a lane
// group scores kChunk keys before one rescale (2 with 8 queries, to stay within the registers).
template <typename T, int kQueries>
__global__ void __launch_bounds__(kCacheThreads, split_min_blocks<kQueries>())
    cache_split_kernel(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q, const T* k_cache,
                       const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                       const int32_t* new_lengths, CacheLaunch launch) {
  wait_for_previous_grid();  // launched programmatically (programmatic_launch.cuh): nothing touched before
  allow_next_grid();
  constexpr int kChunk = kQueries >= 8 ? 2 : 4;
  const CachedAttentionShape& s = launch.shape;
  const int kv_head = static_cast<int>(blockIdx.x / launch.tiles), tile = static_cast<int>(blockIdx.x % launch.tiles);
  const int split = static_cast<int>(blockIdx.y);
  const int64_t row = blockIdx.z;
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  const int group_size = launch.group, dim = s.head_dim;
  // The tile's queries are (t, g) pairs in order, flattened as t · group + g; the real ones have t < n.
  const int first_query = tile * kQueries;
  const int queries = min(kQueries, static_cast<int>(cache.fresh) * group_size - first_query);
  const bool direct = launch.splits == 1;  // the output written here, no partials
  if (direct) zero_padding_queries(out, launch, row, kv_head, first_query, queries, kQueries);
  if (queries <= 0) return;  // padding only: the combine (or the line above) writes its zeros
  int64_t first_t = 0, last_t = 0;
  tile_positions(launch, first_query, queries, first_t, last_t);

  // The keys some query of the tile sees, split evenly between the split blocks; a split past the
  // last that holds keys writes nothing (the combine does not read it).
  const SplitKeys range = split_keys(launch, cache, first_t, last_t);
  if (split >= range.active) return;
  const int64_t split_begin = range.begin + split * range.per_split;
  const int64_t split_end = min(range.end, split_begin + range.per_split);

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
    const int flat = first_query + j, t = flat / group_size;
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
  // Warp-uniform trip count (the shuffles need every lane): a warp's groups take neighbouring chunks.
  for (int64_t warp_start = split_begin + int64_t{warp} * groups_per_warp * kChunk; warp_start < split_end;
       warp_start += int64_t{groups} * kChunk) {
    const int64_t start = warp_start + int64_t{lane / lanes} * kChunk;
    RawEight<T> key_raw[kChunk], value_raw[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const bool load = has_elements && start + c < split_end;
      key_raw[c] = load ? load_eight(keys + (start + c) * key_stride) : RawEight<T>{};
      value_raw[c] = load ? load_eight(values + (start + c) * key_stride) : RawEight<T>{};
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
  __shared__ CacheGroupStates<kQueries> states;
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
  if (threadIdx.x < queries) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += states.weight[g][threadIdx.x] * states.sum[g][threadIdx.x];
    states.tile_sum[threadIdx.x] = total;
  }
  __syncthreads();
  const int64_t stride = s.batch * s.sequence * s.q_heads;  // queries per split
  for (int item = threadIdx.x; item < queries * (dim + 1); item += kCacheThreads) {
    const int j = item / (dim + 1), d = item % (dim + 1);  // d == dim: the sum
    const int flat = first_query + j;
    const int64_t query =
        query_index(s, row, flat / group_size, kv_head * group_size + static_cast<int>(flat % group_size));
    const int64_t index = int64_t{split} * stride + query;
    if (d == dim) {
      if (direct) continue;
      partial_sum[index] = states.tile_sum[j];
      partial_max[index] = states.tile_max[j];
      continue;
    }
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += states.weight[g][j] * states.accumulator[(g * kQueries + j) * dim + d];
    // One split: the combine's merge of it alone is this division (its weight is exp2(0) = 1).
    if (direct) {
      out[query * dim + d] = kernels::from_float<T>(total / states.tile_sum[j]);
    } else {
      partial_acc[index * dim + d] = total;
    }
  }
}

// One thread per output element: the splits' partials merged in split order; padding queries 0.
constexpr int kCombineHeld = 8;  // splits the combine holds in registers

template <typename T>
__global__ void cache_combine_kernel(T* out, const float* partial_max, const float* partial_sum,
                                     const float* partial_acc, const int32_t* slot_ids, const int32_t* cache_lengths,
                                     const int32_t* new_lengths, CacheLaunch launch) {
  wait_for_previous_grid();  // launched programmatically (programmatic_launch.cuh): nothing touched before
  allow_next_grid();
  const CachedAttentionShape& s = launch.shape;
  const int64_t queries = s.batch * s.sequence * s.q_heads;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= queries * s.head_dim) return;
  const int64_t query = index / s.head_dim, d = index % s.head_dim;
  const int64_t token = query / s.q_heads, t = token % s.sequence, row = token / s.sequence;
  // Up to kCombineHeld splits' partials loaded beside the row's cache entry (one trip to memory;
  // a split past the active ones is read and never used: the workspace holds every launched split).
  const int held = min(launch.splits, kCombineHeld);
  float maxima[kCombineHeld], sums[kCombineHeld], accumulators[kCombineHeld];
#pragma unroll
  for (int split = 0; split < kCombineHeld; ++split) {
    if (split >= held) break;
    const int64_t at = split * queries + query;
    maxima[split] = partial_max[at];
    sums[split] = partial_sum[at];
    accumulators[split] = partial_acc[at * s.head_dim + d];
  }
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  if (t >= cache.fresh) {
    out[index] = kernels::from_float<T>(0.0f);
    return;
  }
  // The splits that hold keys for this query's tile (split_keys, as the split kernel placed them).
  const int tile_queries = launch.tile_queries;
  const int head = static_cast<int>(query % s.q_heads);
  const int flat = static_cast<int>(t) * launch.group + head % launch.group;
  const int first_query = flat / tile_queries * tile_queries;
  const int in_tile = min(tile_queries, static_cast<int>(cache.fresh) * launch.group - first_query);
  int64_t first_t = 0, last_t = 0;
  tile_positions(launch, first_query, in_tile, first_t, last_t);
  const int active = split_keys(launch, cache, first_t, last_t).active;
  // The first splits' partials from the registers, any past kCombineHeld from memory: split order
  // either way (the same bits whichever way a split's partials came).
  const int in_registers = min(active, held);
  float m = -INFINITY, total = 0.0f, accumulated = 0.0f;
#pragma unroll
  for (int split = 0; split < kCombineHeld; ++split) {
    if (split < in_registers) m = fmaxf(m, maxima[split]);
  }
  for (int split = in_registers; split < active; ++split) m = fmaxf(m, partial_max[split * queries + query]);
  const auto add = [&](float split_max, float split_sum, float split_acc) {
    const float weight = split_max == -INFINITY ? 0.0f : exp2f(split_max - m);
    total += weight * split_sum;
    accumulated += weight * split_acc;
  };
#pragma unroll
  for (int split = 0; split < kCombineHeld; ++split) {
    if (split >= in_registers) break;
    add(maxima[split], sums[split], accumulators[split]);
  }
  for (int split = in_registers; split < active; ++split) {
    const int64_t at = split * queries + query;
    add(partial_max[at], partial_sum[at], partial_acc[at * s.head_dim + d]);
  }
  out[index] = kernels::from_float<T>(accumulated / total);
}

unsigned blocks_for(int64_t threads) { return static_cast<unsigned>((threads + kCacheThreads - 1) / kCacheThreads); }

}  // namespace

template <typename T>
void cached_attention_append(T* k_cache, T* v_cache, const T* k, const T* v, const int32_t* slot_ids,
                             const int32_t* cache_lengths, const int32_t* new_lengths,
                             const CachedAttentionShape& shape, cudaStream_t stream) {
  const CacheLaunch launch = cache_launch(shape, 1);
  CUDA_REQUIRE(aligned_16(k_cache) && aligned_16(v_cache) && aligned_16(k) && aligned_16(v),
               "cached attention: tensors must be 16-byte aligned");
  const int64_t threads = shape.batch * shape.sequence * shape.kv_heads * (shape.head_dim / kCacheLaneElements);
  launch_programmatic(cache_append_kernel<T>, dim3(blocks_for(threads)), dim3(kCacheThreads), 0, stream, true, k_cache,
                      v_cache, k, v, slot_ids, cache_lengths, new_lengths, launch);
  CUDA_CHECK_LAUNCH();
}

namespace {

// Whether a step's append (and q/k norm) go into the tensor-core split launch: at most
// kCachedAttentionFoldedTokens tokens on the tensor-core kernel.
bool append_folds(const CachedAttentionShape& shape) {
  return shape.batch * shape.sequence <= kCachedAttentionFoldedTokens && tensor_split_takes(shape);
}

// The forward, with the append folded into the tensor-core split kernel when `append` is set.
template <typename T>
void forward(T* out, float* workspace, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
             const int32_t* cache_lengths, const int32_t* new_lengths, const CachedAttentionShape& shape, int splits,
             cudaStream_t stream, const FoldedAppend<T>& append) {
  CUDA_REQUIRE(splits >= 1 && splits <= kCacheMaxSplits, "cached attention: splits must be 1..256");
  const CacheLaunch launch = cache_launch(shape, splits);
  CUDA_REQUIRE(aligned_16(q) && aligned_16(k_cache) && aligned_16(v_cache),
               "cached attention: tensors must be 16-byte aligned");
  const int64_t queries = shape.batch * shape.sequence * shape.q_heads;
  float* partial_max = workspace;
  float* partial_sum = partial_max + splits * queries;
  float* partial_acc = partial_sum + splits * queries;
  if constexpr (!std::is_same_v<T, float>) {
    if (append.k == nullptr && aligned_16(out) && cached_attention_uses_rows_kernel(shape)) {
      launch_tensor_rows(out, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, launch, stream);
      return;
    }
  }
  if (!std::is_same_v<T, float> && tensor_split_takes(shape)) {
    CacheLaunch tensor = launch;
    tensor.tile_queries = kTensorTileQueries;
    tensor.tiles = static_cast<int>((shape.sequence * launch.group + kTensorTileQueries - 1) / kTensorTileQueries);
    if constexpr (!std::is_same_v<T, float>) {
      launch_tensor_split(out, partial_max, partial_sum, partial_acc, q, k_cache, v_cache, slot_ids, cache_lengths,
                          new_lengths, tensor, stream, append);
    }
    if (splits == 1) return;  // the split kernel wrote the output
    launch_programmatic(cache_combine_kernel<T>, dim3(blocks_for(queries * shape.head_dim)), dim3(kCacheThreads), 0,
                        stream, true, out, partial_max, partial_sum, partial_acc, slot_ids, cache_lengths, new_lengths,
                        tensor);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(static_cast<unsigned>(int64_t{shape.kv_heads} * launch.tiles), static_cast<unsigned>(splits),
                  static_cast<unsigned>(shape.batch));
  auto split = [&](auto kernel) {
    launch_programmatic(kernel, grid, dim3(kCacheThreads), 0, stream, true, out, partial_max, partial_sum, partial_acc, q,
                        k_cache, v_cache, slot_ids, cache_lengths, new_lengths, launch);
  };
  switch (launch.tile_queries) {
    case 1: split(cache_split_kernel<T, 1>); break;
    case 2: split(cache_split_kernel<T, 2>); break;
    case 4: split(cache_split_kernel<T, 4>); break;
    default: split(cache_split_kernel<T, 8>); break;
  }
  CUDA_CHECK_LAUNCH();
  if (splits == 1) return;  // the split kernel wrote the output
  launch_programmatic(cache_combine_kernel<T>, dim3(blocks_for(queries * shape.head_dim)), dim3(kCacheThreads), 0,
                      stream, true, out, partial_max, partial_sum, partial_acc, slot_ids, cache_lengths, new_lengths,
                      launch);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void cached_attention_forward(T* out, float* workspace, const T* q, const T* k_cache, const T* v_cache,
                              const int32_t* slot_ids, const int32_t* cache_lengths, const int32_t* new_lengths,
                              const CachedAttentionShape& shape, int splits, cudaStream_t stream) {
  forward(out, workspace, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, shape, splits, stream,
          FoldedAppend<T>{});
}

template <typename T>
void cached_attention_append_forward(T* out, float* workspace, const T* q, const T* k, const T* v, T* k_cache,
                                     T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                                     const int32_t* new_lengths, const CachedAttentionShape& shape, int splits,
                                     cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) {
    if (append_folds(shape)) {
      CUDA_REQUIRE(aligned_16(k) && aligned_16(v), "cached attention: tensors must be 16-byte aligned");
      forward(out, workspace, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, shape, splits, stream,
              FoldedAppend<T>{k, v, k_cache, v_cache});
      return;
    }
  }
  cached_attention_append(k_cache, v_cache, k, v, slot_ids, cache_lengths, new_lengths, shape, stream);
  cached_attention_forward(out, workspace, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, shape, splits,
                           stream);
}

bool cached_attention_norm_rope_takes(const CachedAttentionShape& shape) { return qk_norm_rope_takes(shape.head_dim); }

namespace {

// The unfolded path's scratch: q and k normalised, then their rstd (qk_norm_rope writes it).
struct NormRopeScratch {
  int64_t q_elements = 0, k_elements = 0, k_offset = 0, rstd_offset = 0, bytes = 0;
  explicit NormRopeScratch(const CachedAttentionShape& s) {
    const int64_t tokens = s.batch * s.sequence;
    q_elements = tokens * s.q_heads * s.head_dim;
    k_elements = tokens * s.kv_heads * s.head_dim;
    const auto rounded = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
    k_offset = rounded(q_elements * 2);
    rstd_offset = k_offset + rounded(k_elements * 2);
    bytes = rstd_offset + rounded(tokens * (s.q_heads + s.kv_heads) * 4);
  }
};

}  // namespace

int64_t cached_attention_norm_rope_scratch_bytes(const CachedAttentionShape& shape) {
  return NormRopeScratch(shape).bytes;
}

template <typename T>
void cached_attention_norm_rope_append_forward(T* out, float* workspace, void* scratch, const T* q, const T* k,
                                               const T* v, T* k_cache, T* v_cache, const int32_t* slot_ids,
                                               const int32_t* cache_lengths, const int32_t* new_lengths,
                                               const CachedNormRope<T>& norm, const CachedAttentionShape& shape,
                                               int splits, cudaStream_t stream) {
  CUDA_REQUIRE(cached_attention_norm_rope_takes(shape), "cached attention: the folded q/k norm takes head_dim 16 to 256");
  if (append_folds(shape)) {
    CUDA_REQUIRE(aligned_16(k) && aligned_16(v) && aligned_16(norm.q_weight) && aligned_16(norm.k_weight),
                 "cached attention: tensors must be 16-byte aligned");
    forward(out, workspace, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, shape, splits, stream,
            FoldedAppend<T>{k, v, k_cache, v_cache, norm});
    return;
  }
  const NormRopeScratch layout(shape);
  auto* bytes = static_cast<unsigned char*>(scratch);
  T* q_normed = reinterpret_cast<T*>(bytes);
  T* k_normed = reinterpret_cast<T*>(bytes + layout.k_offset);
  float* rstd = reinterpret_cast<float*>(bytes + layout.rstd_offset);
  const QkNormRopeShape q_shape{.tokens = shape.batch * shape.sequence, .heads = shape.q_heads,
                                .head_dim = shape.head_dim, .epsilon = norm.epsilon, .scaling = norm.scaling};
  qk_norm_rope_forward_pair(QkNormRopeTensor<T>{q_normed, rstd, q, norm.q_weight},
                            QkNormRopeTensor<T>{k_normed, rstd + q_shape.tokens * shape.q_heads, k, norm.k_weight},
                            norm.inv_freq, norm.position_ids, q_shape, shape.kv_heads, stream);
  cached_attention_append_forward(out, workspace, q_normed, k_normed, v, k_cache, v_cache, slot_ids, cache_lengths,
                                  new_lengths, shape, splits, stream);
}

template void cached_attention_norm_rope_append_forward<__nv_bfloat16>(
    __nv_bfloat16*, float*, void*, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
    __nv_bfloat16*, const int32_t*, const int32_t*, const int32_t*, const CachedNormRope<__nv_bfloat16>&,
    const CachedAttentionShape&, int, cudaStream_t);
template void cached_attention_norm_rope_append_forward<__half>(__half*, float*, void*, const __half*, const __half*,
                                                                const __half*, __half*, __half*, const int32_t*,
                                                                const int32_t*, const int32_t*,
                                                                const CachedNormRope<__half>&,
                                                                const CachedAttentionShape&, int, cudaStream_t);

#define SUROGATE_INSTANTIATE_CACHED_ATTENTION(T)                                                                   \
  template void cached_attention_append<T>(T*, T*, const T*, const T*, const int32_t*, const int32_t*,            \
                                           const int32_t*, const CachedAttentionShape&, cudaStream_t);             \
  template void cached_attention_forward<T>(T*, float*, const T*, const T*, const T*, const int32_t*,              \
                                            const int32_t*, const int32_t*, const CachedAttentionShape&, int,      \
                                            cudaStream_t);                                                         \
  template void cached_attention_append_forward<T>(T*, float*, const T*, const T*, const T*, T*, T*,               \
                                                   const int32_t*, const int32_t*, const int32_t*,                 \
                                                   const CachedAttentionShape&, int, cudaStream_t);
SUROGATE_INSTANTIATE_CACHED_ATTENTION(float)
SUROGATE_INSTANTIATE_CACHED_ATTENTION(__nv_bfloat16)
SUROGATE_INSTANTIATE_CACHED_ATTENTION(__half)
#undef SUROGATE_INSTANTIATE_CACHED_ATTENTION

}  // namespace surogate::cuda
