// The cached-attention launches' parameters (cached_attention_launch.cuh's cache_launch: the shape
// checked, the query tiles, the softmax scale) and the split policy (cached_attention.h's
// cached_attention_splits and the partials' workspace): host code the kernels' files share.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda/kernels/cached_attention_launch.cuh"

namespace surogate::cuda {
namespace cached {
namespace {

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

}  // namespace

CacheLaunch cache_launch(const CachedAttentionShape& shape, int splits) {
  CUDA_REQUIRE(shape.batch > 0 && shape.sequence > 0 && shape.slots > 0 && shape.capacity > 0,
               "cached attention: empty shape");
  CUDA_REQUIRE(shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0,
               "cached attention: query heads must be a multiple of kv heads");
  CUDA_REQUIRE(shape.head_dim > 0 && shape.head_dim % kCacheLaneElements == 0 && shape.head_dim <= kCacheMaxHeadDim,
               "cached attention: head_dim must be a multiple of 8, at most 256");
  CUDA_REQUIRE(shape.batch <= 65535, "cached attention: at most 65535 rows per call");
  CUDA_REQUIRE(shape.capacity < (int64_t{1} << 30) && shape.sequence * shape.q_heads < (int64_t{1} << 30),
               "cached attention: a row's keys and queries must fit in 2^30");
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

}  // namespace cached

int cached_attention_splits(const CachedAttentionShape& shape, int multiprocessors) {
  const int64_t blocks = shape.batch * shape.kv_heads * cached::tiles_per_head(shape);
  const int64_t wanted = (4 * int64_t{std::max(multiprocessors, 1)} + blocks - 1) / std::max<int64_t>(blocks, 1);
  const int64_t most = std::min<int64_t>(cached::kCacheMaxSplits, (shape.capacity + cached::kCacheMinSplitKeys - 1) / cached::kCacheMinSplitKeys);
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

}  // namespace surogate::cuda
