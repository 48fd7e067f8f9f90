// Attention over a KV cache: the append, the flash-decoding split kernel and the combine, as two
// launches after the append or all three in one (see cached_attention.h for the layouts, the
// semantics and the design).
#include "cuda/kernels/cached_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/kernels/cached_attention_split.cuh"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/element_type.cuh"

namespace surogate::cuda {
namespace {

using namespace cached_attention_detail;

// One thread per 8 elements of one new token's keys and values.
template <typename T>
__global__ void cache_append_kernel(T* k_cache, T* v_cache, const T* k, const T* v, const int32_t* slot_ids,
                                    const int32_t* cache_lengths, const int32_t* new_lengths, CacheLaunch launch) {
  const CachedAttentionShape& s = launch.shape;
  const int parts = s.head_dim / kCacheLaneElements;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= s.batch * s.sequence * s.kv_heads * parts) return;
  const int part = static_cast<int>(index % parts);
  const int64_t token_head = index / parts;  // (row · T + t) · Hkv + kv head
  const int kv_head = static_cast<int>(token_head % s.kv_heads);
  const int64_t token = token_head / s.kv_heads, t = token % s.sequence, row = token / s.sequence;
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  if (t >= cache.fresh) return;
  const int64_t from = token_head * s.head_dim + part * kCacheLaneElements;
  const int64_t to = cache.base + ((cache.held + t) * s.kv_heads + kv_head) * s.head_dim + part * kCacheLaneElements;
  store_eight(k_cache + to, load_eight(k + from));
  store_eight(v_cache + to, load_eight(v + from));
}

// The splits' weights for one query: exp2(max_split − max) and 0 for a split that saw no key.
// Both combines take them in split order with the same expressions, hence the same bits.
__device__ __forceinline__ float split_weight(float split_max, float maximum) {
  return split_max == -INFINITY ? 0.0f : exp2f(split_max - maximum);
}

// Two-launch form, blocks: (kv head × query tile, split, row): the split's partials.
template <typename T, int kQueries>
__global__ void __launch_bounds__(kCacheThreads)
    cache_split_kernel(CachePartials partials, const T* q, const T* k_cache, const T* v_cache,
                       const int32_t* slot_ids, const int32_t* cache_lengths, const int32_t* new_lengths,
                       CacheLaunch launch) {
  __shared__ CacheGroupStates<kQueries> states;
  const int kv_head = static_cast<int>(blockIdx.x / launch.tiles), tile = static_cast<int>(blockIdx.x % launch.tiles);
  const int64_t row = blockIdx.z;
  const CacheRow cache = cache_row(launch.shape, slot_ids, cache_lengths, new_lengths, row);
  const TileKeys keys = tile_keys<kQueries>(launch, cache, tile);
  if (keys.queries <= 0) return;  // padding only: the combine writes its zeros
  split_partials<T, kQueries, false>(states, partials, q, k_cache, v_cache, CacheOneLaunch<T>{}, launch, cache, keys,
                                     kv_head, static_cast<int>(blockIdx.y), row);
}

// Two-launch form, one thread per output element: the splits' partials merged in split order;
// padding queries 0.
template <typename T>
__global__ void cache_combine_kernel(T* out, CachePartials partials, const int32_t* slot_ids,
                                     const int32_t* cache_lengths, const int32_t* new_lengths, CacheLaunch launch) {
  const CachedAttentionShape& s = launch.shape;
  const int64_t queries = s.batch * s.sequence * s.q_heads;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= queries * s.head_dim) return;
  const int64_t query = index / s.head_dim, d = index % s.head_dim;
  const int64_t token = query / s.q_heads, t = token % s.sequence, row = token / s.sequence;
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  if (t >= cache.fresh) {
    out[index] = kernels::from_float<T>(0.0f);
    return;
  }
  float m = -INFINITY;
  for (int split = 0; split < launch.splits; ++split) m = fmaxf(m, partials.max[split * queries + query]);
  float total = 0.0f, accumulated = 0.0f;
  for (int split = 0; split < launch.splits; ++split) {
    const int64_t at = split * queries + query;
    const float weight = split_weight(partials.max[at], m);
    total = fmaf(weight, partials.sum[at], total);
    accumulated = fmaf(weight, partials.acc[at * s.head_dim + d], accumulated);
  }
  out[index] = kernels::from_float<T>(accumulated / total);
}

// One-launch form: block (tile 0, split 0) of each (row, kv head) appends the new tokens.
template <typename T>
__device__ __forceinline__ void append_new_tokens(T* k_cache, T* v_cache, const CacheOneLaunch<T>& one,
                                                  const CachedAttentionShape& s, const CacheRow& cache, int kv_head,
                                                  int64_t row) {
  const int parts = s.head_dim / kCacheLaneElements;
  for (int64_t item = threadIdx.x; item < cache.fresh * parts; item += kCacheThreads) {
    const int64_t t = item / parts, element = (item % parts) * kCacheLaneElements;
    const int64_t from = ((row * s.sequence + t) * s.kv_heads + kv_head) * s.head_dim + element;
    const int64_t to = cache.base + ((cache.held + t) * s.kv_heads + kv_head) * s.head_dim + element;
    store_eight(k_cache + to, load_eight(one.k + from));
    store_eight(v_cache + to, load_eight(one.v + from));
  }
}

// One-launch form: the last split block of a tile to finish (a ticket taken after its partials are
// visible) merges the tile's partials as cache_combine_kernel does, skipping the splits past the
// keys (they saw none: weight 0, the same sums), and writes zeros for the tile's padding queries.
template <typename T, int kQueries>
__device__ __forceinline__ void combine_tile(CacheCombineStates<kQueries>& states, const CachePartials& partials,
                                             const CacheOneLaunch<T>& one, const CacheLaunch& launch,
                                             const TileKeys& keys, int kv_head, int64_t row) {
  const CachedAttentionShape& s = launch.shape;
  const int group_size = launch.group, dim = s.head_dim;
  const int64_t stride = s.batch * s.sequence * s.q_heads;  // queries per split
  const int in_tile = static_cast<int>(min(int64_t{kQueries}, s.sequence * group_size - keys.first_query));
  const int real = max(keys.queries, 0);
  const int used = real > 0 ? static_cast<int>(min(int64_t{launch.splits},
                                                   (keys.end - keys.begin + keys.per_split - 1) / keys.per_split))
                            : 0;
  const auto index_of = [&](int j) {
    const int64_t flat = keys.first_query + j;
    return query_index(s, row, flat / group_size, kv_head * group_size + static_cast<int>(flat % group_size));
  };
  if (threadIdx.x < real) {
    const int j = static_cast<int>(threadIdx.x);
    const int64_t query = index_of(j);
    float m = -INFINITY;
    for (int split = 0; split < used; ++split) m = fmaxf(m, __ldcg(partials.max + split * stride + query));
    float total = 0.0f;
    for (int split = 0; split < used; ++split) {
      const float weight = split_weight(__ldcg(partials.max + split * stride + query), m);
      states.weight[split][j] = weight;
      total = fmaf(weight, __ldcg(partials.sum + split * stride + query), total);
    }
    states.total[j] = total;
  }
  __syncthreads();
  for (int item = threadIdx.x; item < in_tile * dim; item += kCacheThreads) {
    const int j = item / dim, d = item % dim;
    const int64_t query = index_of(j);
    float value = 0.0f;
    if (j < real) {
      float accumulated = 0.0f;
      for (int split = 0; split < used; ++split) {
        accumulated = fmaf(states.weight[split][j], __ldcg(partials.acc + (split * stride + query) * dim + d), accumulated);
      }
      value = accumulated / states.total[j];
    }
    one.out[query * dim + d] = kernels::from_float<T>(value);
  }
}

// One-launch form, blocks as the split kernel: the append, the split's partials, and for the last
// split block of each tile the combine. Waits for the previous kernel before touching memory and
// lets the next launch begin at once (its blocks wait for this grid to finish).
template <typename T, int kQueries>
__global__ void __launch_bounds__(kCacheThreads)
    cache_one_launch_kernel(CachePartials partials, const T* q, T* k_cache, T* v_cache, const int32_t* slot_ids,
                            const int32_t* cache_lengths, const int32_t* new_lengths, CacheLaunch launch,
                            CacheOneLaunch<T> one) {
  __shared__ CacheShared<kQueries> shared;
  __shared__ bool last;
  kernels::wait_for_previous_grid();
  kernels::allow_next_grid();
  const int kv_head = static_cast<int>(blockIdx.x / launch.tiles), tile = static_cast<int>(blockIdx.x % launch.tiles);
  const int split = static_cast<int>(blockIdx.y);
  const int64_t row = blockIdx.z;
  const CacheRow cache = cache_row(launch.shape, slot_ids, cache_lengths, new_lengths, row);
  const TileKeys keys = tile_keys<kQueries>(launch, cache, tile);
  if (tile == 0 && split == 0) append_new_tokens(k_cache, v_cache, one, launch.shape, cache, kv_head, row);
  if (keys.queries > 0) {
    split_partials<T, kQueries, true>(shared.groups, partials, q, k_cache, v_cache, one, launch, cache, keys, kv_head,
                                      split, row);
  }
  __threadfence();  // this block's partials visible before its ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* ticket = one.tickets + row * gridDim.x + blockIdx.x;
    last = atomicAdd(ticket, 1) == launch.splits - 1;
    if (last) *ticket = 0;  // every split has taken its ticket: zero again for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  combine_tile<T, kQueries>(shared.combine, partials, one, launch, keys, kv_head, row);
}

unsigned blocks_for(int64_t threads) { return static_cast<unsigned>((threads + kCacheThreads - 1) / kCacheThreads); }

// Queries per tile: the (position, head) pairs of one kv head, up to 8, as a power of two (decode
// with GQA 4 takes tiles of 4: fewer registers than 8).
int tile_queries(const CachedAttentionShape& shape) {
  const int64_t pairs = shape.sequence * (shape.q_heads / shape.kv_heads);
  int queries = 1;
  while (queries < kCacheTileQueries && queries < pairs) queries *= 2;
  return queries;
}

int64_t tiles_per_head(const CachedAttentionShape& shape) {
  const int queries = tile_queries(shape);
  return (shape.sequence * (shape.q_heads / shape.kv_heads) + queries - 1) / queries;
}

CacheLaunch cache_launch(const CachedAttentionShape& shape, int splits) {
  CUDA_REQUIRE(shape.batch > 0 && shape.sequence > 0 && shape.slots > 0 && shape.capacity > 0,
               "cached attention: empty shape");
  CUDA_REQUIRE(shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0,
               "cached attention: query heads must be a multiple of kv heads");
  CUDA_REQUIRE(shape.head_dim > 0 && shape.head_dim % kCacheLaneElements == 0 && shape.head_dim <= kCacheMaxHeadDim,
               "cached attention: head_dim must be a multiple of 8, at most 256");
  CUDA_REQUIRE(shape.batch <= 65535, "cached attention: at most 65535 rows per call");
  CacheLaunch launch;
  launch.shape = shape;
  launch.group = shape.q_heads / shape.kv_heads;
  launch.lanes = 1;
  while (launch.lanes * kCacheLaneElements < shape.head_dim) launch.lanes *= 2;
  launch.tile_queries = tile_queries(shape);
  launch.tiles = static_cast<int>(tiles_per_head(shape));
  launch.splits = splits;
  const double scale = shape.scale != 0.0f ? shape.scale : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  launch.scale_log2 = static_cast<float>(scale * kCacheLog2e);
  return launch;
}

bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// The workspace's pieces (cached_attention_workspace_floats) and the split grid.
CachePartials partials_in(float* workspace, const CachedAttentionShape& shape, int splits) {
  const int64_t queries = shape.batch * shape.sequence * shape.q_heads;
  return CachePartials{.max = workspace, .sum = workspace + splits * queries, .acc = workspace + 2 * splits * queries};
}
dim3 split_grid(const CacheLaunch& launch) {
  return dim3(static_cast<unsigned>(int64_t{launch.shape.kv_heads} * launch.tiles),
              static_cast<unsigned>(launch.splits), static_cast<unsigned>(launch.shape.batch));
}

}  // namespace

int cached_attention_splits(const CachedAttentionShape& shape, int multiprocessors) {
  const int64_t blocks = shape.batch * shape.kv_heads * tiles_per_head(shape);
  const int64_t wanted = (4 * int64_t{std::max(multiprocessors, 1)} + blocks - 1) / std::max<int64_t>(blocks, 1);
  const int64_t most = std::min<int64_t>(kCacheMaxSplits, (shape.capacity + kCacheMinSplitKeys - 1) / kCacheMinSplitKeys);
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, std::max<int64_t>(most, 1)));
}

int cached_attention_splits(const CachedAttentionShape& shape) {
  int device = 0, count = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return cached_attention_splits(shape, count);
}

int64_t cached_attention_workspace_floats(const CachedAttentionShape& shape, int splits) {
  return int64_t{splits} * shape.batch * shape.sequence * shape.q_heads * (shape.head_dim + 2);
}

template <typename T>
void cached_attention_append(T* k_cache, T* v_cache, const T* k, const T* v, const int32_t* slot_ids,
                             const int32_t* cache_lengths, const int32_t* new_lengths,
                             const CachedAttentionShape& shape, cudaStream_t stream) {
  const CacheLaunch launch = cache_launch(shape, 1);
  CUDA_REQUIRE(aligned_16(k_cache) && aligned_16(v_cache) && aligned_16(k) && aligned_16(v),
               "cached attention: tensors must be 16-byte aligned");
  const int64_t threads = shape.batch * shape.sequence * shape.kv_heads * (shape.head_dim / kCacheLaneElements);
  cache_append_kernel<T><<<blocks_for(threads), kCacheThreads, 0, stream>>>(k_cache, v_cache, k, v, slot_ids,
                                                                            cache_lengths, new_lengths, launch);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void cached_attention_forward(T* out, float* workspace, const T* q, const T* k_cache, const T* v_cache,
                              const int32_t* slot_ids, const int32_t* cache_lengths, const int32_t* new_lengths,
                              const CachedAttentionShape& shape, int splits, cudaStream_t stream) {
  CUDA_REQUIRE(splits >= 1 && splits <= kCacheMaxSplits, "cached attention: splits must be 1..256");
  const CacheLaunch launch = cache_launch(shape, splits);
  CUDA_REQUIRE(aligned_16(q) && aligned_16(k_cache) && aligned_16(v_cache),
               "cached attention: tensors must be 16-byte aligned");
  const CachePartials partials = partials_in(workspace, shape, splits);
  const dim3 grid = split_grid(launch);
  auto split = [&](auto kernel) {
    kernel<<<grid, kCacheThreads, 0, stream>>>(partials, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths,
                                               launch);
  };
  switch (launch.tile_queries) {
    case 1: split(cache_split_kernel<T, 1>); break;
    case 2: split(cache_split_kernel<T, 2>); break;
    case 4: split(cache_split_kernel<T, 4>); break;
    default: split(cache_split_kernel<T, 8>); break;
  }
  CUDA_CHECK_LAUNCH();
  const int64_t queries = shape.batch * shape.sequence * shape.q_heads;
  cache_combine_kernel<T><<<blocks_for(queries * shape.head_dim), kCacheThreads, 0, stream>>>(
      out, partials, slot_ids, cache_lengths, new_lengths, launch);
  CUDA_CHECK_LAUNCH();
}

int64_t cached_attention_tickets(const CachedAttentionShape& shape) {
  return shape.batch * shape.kv_heads * tiles_per_head(shape);
}

template <typename T>
void cached_attention_one_launch(T* out, float* workspace, int32_t* tickets, const T* q, const T* k, const T* v,
                                 T* k_cache, T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                                 const int32_t* new_lengths, const CachedAttentionShape& shape, int splits,
                                 bool overlap_previous, cudaStream_t stream) {
  CUDA_REQUIRE(splits >= 1 && splits <= kCacheMaxSplits, "cached attention: splits must be 1..256");
  const CacheLaunch launch = cache_launch(shape, splits);
  CUDA_REQUIRE(aligned_16(q) && aligned_16(k) && aligned_16(v) && aligned_16(k_cache) && aligned_16(v_cache),
               "cached attention: tensors must be 16-byte aligned");
  CUDA_REQUIRE(tickets != nullptr, "cached attention: the one-launch form needs its tickets");
  const CacheOneLaunch<T> one{.out = out, .tickets = tickets, .k = k, .v = v};
  const CachePartials partials = partials_in(workspace, shape, splits);
  auto launch_with = [&](auto kernel) {
    kernels::launch_dependent(kernel, split_grid(launch), dim3(kCacheThreads), 0, stream, overlap_previous, partials,
                              q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, launch, one);
  };
  switch (launch.tile_queries) {
    case 1: launch_with(cache_one_launch_kernel<T, 1>); break;
    case 2: launch_with(cache_one_launch_kernel<T, 2>); break;
    case 4: launch_with(cache_one_launch_kernel<T, 4>); break;
    default: launch_with(cache_one_launch_kernel<T, 8>); break;
  }
  CUDA_CHECK_LAUNCH();
}

#define SUROGATE_INSTANTIATE_CACHED_ATTENTION(T)                                                                   \
  template void cached_attention_append<T>(T*, T*, const T*, const T*, const int32_t*, const int32_t*,            \
                                           const int32_t*, const CachedAttentionShape&, cudaStream_t);             \
  template void cached_attention_forward<T>(T*, float*, const T*, const T*, const T*, const int32_t*,              \
                                            const int32_t*, const int32_t*, const CachedAttentionShape&, int,      \
                                            cudaStream_t);                                                     \
  template void cached_attention_one_launch<T>(T*, float*, int32_t*, const T*, const T*, const T*, T*, T*,         \
                                               const int32_t*, const int32_t*, const int32_t*,                     \
                                               const CachedAttentionShape&, int, bool, cudaStream_t);
SUROGATE_INSTANTIATE_CACHED_ATTENTION(float)
SUROGATE_INSTANTIATE_CACHED_ATTENTION(__nv_bfloat16)
SUROGATE_INSTANTIATE_CACHED_ATTENTION(__half)
#undef SUROGATE_INSTANTIATE_CACHED_ATTENTION

}  // namespace surogate::cuda
