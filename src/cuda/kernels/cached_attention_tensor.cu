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
//   copies  the step's K and V rows go by cp.async into the warp's padded shared tiles, a step
//           ahead (kStages: no registers hold them on the way, and the next step's copies fly
//           while this one is scored);
//   step    scores, softmax and values on tensor cores (cached_attention_step.cuh, shared with
//           the many-rows kernel cached_attention_rows.cu), Q's A fragments loaded once.
// Decode tiles (one position, at most 8 query heads per kv head) have every query in rows 0-7 and
// use mma_upper_rows: no register holds rows 8-15. Against the kernel this replaced (K loaded
// straight into registers, V staged through them; 242 registers a thread), on an H200
// (2026-11-30, cached_attention_bench, µs): 512 rows × 320 tokens 227 → 188 (Qwen3-1.7B's heads)
// and 235 → 194 (8B's), × 640 371 → 339, 64 rows × 640 66.4 → 60.5, one row × 640 18.7 → 17.5;
// at 4,096 tokens it reads 3.6 % slower (512 rows 1,964 → 2,035 µs, 88 % of the HBM peak).
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
#include "cuda/device_attributes.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cached_attention_launch.cuh"
#include "cuda/kernels/cached_attention_step.cuh"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/programmatic_launch.cuh"
#include "cuda/kernels/qk_norm_rope_row.cuh"

namespace surogate::cuda::cached {
namespace {

// A warp's steps in flight (cp.async into shared memory): two keep a block at 70 KB at head_dim 128,
// inside the 99 KB a block may opt into on sm_86 / sm_89 / sm_120 (three: 104 KB, 2.7 % faster at
// 512 rows × 320 tokens on an H200, 2026-11-30, but not launchable there).
constexpr int kStages = 2;
constexpr int kRows = kTensorTileQueries;

// The block's shared memory (dynamic: 70 KB at head_dim 128): each warp's kStages stages of K and V
// tiles while it steps, then the warps' states for the merge.
template <typename T, int D>
struct TensorShared {
  static constexpr int kRowStride = kTensorRowStride<D>;
  union {
    struct {
      T keys[kCacheWarps][kStages][kStepKeys * kRowStride];
      T values[kCacheWarps][kStages][kStepKeys * kRowStride];
    } stages;
    struct {
      float accumulator[kCacheWarps][kRows][D];
      float maximum[kCacheWarps][kRows];
      float sum[kCacheWarps][kRows];
    } merge;
  };
};

// With the q/k norm folded in (FoldedAppend::norm) the launch asks for the normalised rows too,
// after TensorShared: the tile's kRows queries, then the row's new keys (at most kMaxFreshKeys).
constexpr int kMaxFreshKeys = static_cast<int>(kCachedAttentionFoldedTokens);
template <typename T, int D>
constexpr int kNormedOffset = (static_cast<int>(sizeof(TensorShared<T, D>)) + 15) / 16 * 16;
template <typename T, int D>
constexpr int kNormedBytes = kNormedOffset<T, D> + (kRows + kMaxFreshKeys) * D * static_cast<int>(sizeof(T));

// The row's `fresh` new keys of kv head `kv_head`, then the tile's `queries` query rows, through
// qk_norm_rope's forward (qk_norm_rope_row.cuh, as the decode pair launch computes them) into
// shared memory: head_dim / 16 lanes a row, every thread in every pass (the shuffles).
template <typename T, int D>
__device__ void normalise_rows(T* normed_queries, T* normed_keys, const T* q, const T* k, const CachedNormRope<T>& norm,
                               const CacheLaunch& launch, int64_t row, int kv_head, int first_query, int queries,
                               int fresh) {
  constexpr int kLanes = D / 16, kPerPass = kCacheThreads / kLanes;
  const CachedAttentionShape& s = launch.shape;
  const int rows = fresh + max(queries, 0);
  for (int pass = 0; pass * kPerPass < rows; ++pass) {
    const int item = pass * kPerPass + static_cast<int>(threadIdx.x) / kLanes;
    const bool active = item < rows, key = item < fresh;
    int64_t t = 0;
    const T* input = q;
    const T* weight = norm.q_weight;
    T* output = normed_queries;
    if (active && key) {
      t = item;
      input = k + ((row * s.sequence + t) * s.kv_heads + kv_head) * D;
      weight = norm.k_weight;
      output = normed_keys + item * D;
    } else if (active) {
      const int r = item - fresh, flat = first_query + r;
      t = flat / launch.group;
      input = q + query_index(s, row, t, kv_head * launch.group + flat % launch.group) * D;
      output = normed_queries + r * D;
    }
    norm_rope::row_forward<T, true>(output, nullptr, input, weight, norm.inv_freq, norm.position_ids + row * s.sequence + t,
                                    D, norm.epsilon, norm.scaling, static_cast<int>(threadIdx.x) % kLanes, active);
  }
  __syncthreads();
}

// kHalves: 2 for tiles with queries in all 16 rows (prefill chunks), 1 when every query of a tile
// is in rows 0-7 (mma_upper_rows).
template <typename T, int D, int kHalves>
__global__ void __launch_bounds__(kCacheThreads, 2)
    tensor_split_kernel(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q,
                        const T* k_cache, const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                        const int32_t* new_lengths, CacheLaunch launch, FoldedAppend<T> append) {
  wait_for_previous_grid();  // launched programmatically (programmatic_launch.cuh): nothing touched before
  allow_next_grid();
  constexpr int kSteps = D / 16;   // k-steps of the scores' product
  using Shared = TensorShared<T, D>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Shared& shared = *reinterpret_cast<Shared*>(shared_bytes);

  const CachedAttentionShape& s = launch.shape;
  const int kv_head = static_cast<int>(blockIdx.x) / launch.tiles, tile = static_cast<int>(blockIdx.x) % launch.tiles;
  const int split = static_cast<int>(blockIdx.y);
  const int64_t row = blockIdx.z;
  const CacheRow cache = cache_row(s, slot_ids, cache_lengths, new_lengths, row);
  const bool folded = append.k != nullptr;
  const bool normed = append.norm.q_weight != nullptr;  // only with `folded`
  T* normed_queries = reinterpret_cast<T*>(shared_bytes + kNormedOffset<T, D>);  // [kRows][D]
  T* normed_keys = normed_queries + kRows * D;                                      // [kMaxFreshKeys][D]
  const int group = launch.group;
  const int first_query = tile * kRows;
  const int queries = min(kRows, static_cast<int>(cache.fresh) * group - first_query);
  if (normed) {
    normalise_rows<T, D>(normed_queries, normed_keys, q, append.k, append.norm, launch, row, kv_head, first_query, queries,
                         static_cast<int>(cache.fresh));
  }
  if (folded && split == 0 && tile == 0) {
    // The row's new keys and values of this kv head into the caches (cached_attention_append's
    // copy); nothing in this launch reads them from there.
    for (int64_t i = threadIdx.x; i < cache.fresh * (D / 8); i += kCacheThreads) {
      const int64_t t = i / (D / 8), piece = i % (D / 8);
      const int64_t from = ((row * s.sequence + t) * s.kv_heads + kv_head) * D + 8 * piece;
      const int64_t to = cache.base + ((cache.held + t) * s.kv_heads + kv_head) * D + 8 * piece;
      const uint4 key = *reinterpret_cast<const uint4*>(normed ? normed_keys + t * D + 8 * piece : append.k + from);
      const uint4 value = *reinterpret_cast<const uint4*>(append.v + from);
      *reinterpret_cast<uint4*>(append.k_cache + to) = key;
      *reinterpret_cast<uint4*>(append.v_cache + to) = value;
    }
  }
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
  // The lane's two query rows (g, g + 8): their positions, whether they are real, and their A
  // fragments (k-step k: dims 16k + 2t, +1 and 16k + 8 + 2t, +1).
  StepMask mask;
  mask.end = split_end;
  mask.window = s.window;
  mask.scale_log2 = launch.scale_log2;
  uint32_t query[kSteps][4] = {};
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int r = g + 8 * h, flat = first_query + r, at = flat / group;
    mask.real[h] = r < queries;
    mask.position[h] = cache.held + at;
    if (!mask.real[h]) continue;
    const T* source = normed ? normed_queries + r * D + 2 * t : q + query_index(s, row, at, kv_head * group + flat % group) * D + 2 * t;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      query[k][h] = attention::load_pair(source + 16 * k);
      query[k][2 + h] = attention::load_pair(source + 16 * k + 8);
    }
  }

  WarpSoftmax<D> state;
  state.reset();
  const int64_t key_stride = int64_t{s.kv_heads} * D;
  const T* keys = k_cache + cache.base + int64_t{kv_head} * D;
  const T* values = v_cache + cache.base + int64_t{kv_head} * D;
  // The warp's steps of 16 keys, kStages in flight: step i's keys and values land in stage
  // i % kStages by cp.async while the steps before it are scored (no registers hold them on the way).
  // Every step commits one group (empty past the end), so "all but the newest kStages - 1 groups
  // done" always means "this step's are in".
  const auto issue = [&](int64_t base, int stage) {
#pragma unroll
    for (int i = lane; i < kStepKeys * (D / 8); i += 32) {
      const int key = i / (D / 8), piece = i % (D / 8);
      const bool valid = base + key < split_end;
      const int64_t position = valid ? base + key : split_begin;
      // A new token's key and value: from k / v when the append is folded in (not yet in the cache).
      const bool fresh = folded && position >= cache.held;
      const int64_t at = fresh ? ((row * s.sequence + (position - cache.held)) * s.kv_heads + kv_head) * D + 8 * piece
                               : position * key_stride + 8 * piece;
      T* key_target = shared.stages.keys[warp][stage] + key * Shared::kRowStride + 8 * piece;
      if (fresh && normed) {  // the normalised key from shared memory (cp.async reads only global)
        *reinterpret_cast<uint4*>(key_target) =
            valid ? *reinterpret_cast<const uint4*>(normed_keys + (position - cache.held) * D + 8 * piece)
                  : make_uint4(0, 0, 0, 0);
      } else {
        attention::copy_async_16(key_target, (fresh ? append.k : keys) + at, valid);
      }
      attention::copy_async_16(shared.stages.values[warp][stage] + key * Shared::kRowStride + 8 * piece,
                               (fresh ? append.v : values) + at, valid);
    }
    attention::copy_async_commit();
  };
  const int64_t first_base = split_begin + int64_t{warp} * kStepKeys, stride_keys = int64_t{kCacheWarps} * kStepKeys;
#pragma unroll
  for (int ahead = 0; ahead < kStages - 1; ++ahead) {
    const int64_t base = first_base + ahead * stride_keys;
    if (base < split_end) issue(base, ahead);
    else attention::copy_async_commit();
  }
  int stage = 0;
  for (int64_t base = first_base; base < split_end; base += stride_keys, stage = (stage + 1) % kStages) {
    const int64_t next = base + (kStages - 1) * stride_keys;
    if (next < split_end) issue(next, (stage + kStages - 1) % kStages);
    else attention::copy_async_commit();
    attention::copy_async_wait<kStages - 1>();  // this step's group is in; the later ones may fly
    __syncwarp();
    tensor_step<T, D, kHalves>(state, query, shared.stages.keys[warp][stage], shared.stages.values[warp][stage], base,
                               mask, lane);
    __syncwarp();  // the stage is read before a later step's copies overwrite it
  }

  // A row's sum is spread over the four lanes of its quad.
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    state.sum[h] += __shfl_xor_sync(0xffffffffu, state.sum[h], 1);
    state.sum[h] += __shfl_xor_sync(0xffffffffu, state.sum[h], 2);
  }
  __syncthreads();  // every warp is done with its V tile: the merge reuses the memory
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int r = g + 8 * h;
    if (t == 0) {
      shared.merge.maximum[warp][r] = state.maximum[h];
      shared.merge.sum[warp][r] = state.sum[h];
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      shared.merge.accumulator[warp][r][8 * j + 2 * t] = state.acc[j][2 * h];
      shared.merge.accumulator[warp][r][8 * j + 2 * t + 1] = state.acc[j][2 * h + 1];
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

template <typename T>
struct TensorArgs {
  T* out;
  float *partial_max, *partial_sum, *partial_acc;
  const T *q, *k_cache, *v_cache;
  const int32_t *slot_ids, *cache_lengths, *new_lengths;
  FoldedAppend<T> append;
};

template <typename T, int D, int kHalves>
void run_tensor_split(const TensorArgs<T>& a, const CacheLaunch& launch, dim3 grid, cudaStream_t stream) {
  auto kernel = tensor_split_kernel<T, D, kHalves>;
  constexpr int kPlain = static_cast<int>(sizeof(TensorShared<T, D>)), kNormed = kNormedBytes<T, D>;
  const int bytes = a.append.norm.q_weight != nullptr ? kNormed : kPlain;
  // More than the 48 KB a block gets without asking: asked once per kernel and device (ranks on
  // several GPUs may share the process), before its first launch, which is eager (a graph is
  // captured from the second execute on).
  static std::atomic<bool> sized[64];
  const int device = current_device();
  CUDA_REQUIRE(device >= 0 && device < 64, "cached attention: device index out of range");
  if (!sized[device].load(std::memory_order_acquire)) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kNormed));
    sized[device].store(true, std::memory_order_release);
  }
  launch_programmatic(kernel, grid, dim3(kCacheThreads), bytes, stream, true, a.out, a.partial_max, a.partial_sum,
                      a.partial_acc, a.q, a.k_cache, a.v_cache, a.slot_ids, a.cache_lengths, a.new_lengths, launch,
                      a.append);
}

}  // namespace

bool tensor_split_takes(const CachedAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128) return false;
  // mma.sync on bf16 / fp16 operands: sm_80 and later (the kernel traps on older builds' targets).
  return current_compute_major() >= 8;
}

template <typename T>
void launch_tensor_split(T* out, float* partial_max, float* partial_sum, float* partial_acc, const T* q,
                         const T* k_cache, const T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                         const int32_t* new_lengths, const CacheLaunch& launch, cudaStream_t stream,
                         const FoldedAppend<T>& append) {
  const CachedAttentionShape& shape = launch.shape;
  const dim3 grid(static_cast<unsigned>(int64_t{shape.kv_heads} * launch.tiles), static_cast<unsigned>(launch.splits),
                  static_cast<unsigned>(shape.batch));
  // Every query of every tile in rows 0-7: one position and at most 8 query heads per kv head.
  const bool upper_rows = shape.sequence * launch.group <= 8;
  const TensorArgs<T> args{out,      partial_max,   partial_sum, partial_acc, q,     k_cache,
                           v_cache,  slot_ids,      cache_lengths, new_lengths, append};
  if (shape.head_dim == 64) {
    upper_rows ? run_tensor_split<T, 64, 1>(args, launch, grid, stream) : run_tensor_split<T, 64, 2>(args, launch, grid, stream);
  } else {
    upper_rows ? run_tensor_split<T, 128, 1>(args, launch, grid, stream)
               : run_tensor_split<T, 128, 2>(args, launch, grid, stream);
  }
  CUDA_CHECK_LAUNCH();
}

template void launch_tensor_split<__nv_bfloat16>(__nv_bfloat16*, float*, float*, float*, const __nv_bfloat16*,
                                                 const __nv_bfloat16*, const __nv_bfloat16*, const int32_t*,
                                                 const int32_t*, const int32_t*, const CacheLaunch&, cudaStream_t,
                                                 const FoldedAppend<__nv_bfloat16>&);
template void launch_tensor_split<__half>(__half*, float*, float*, float*, const __half*, const __half*, const __half*,
                                          const int32_t*, const int32_t*, const int32_t*, const CacheLaunch&,
                                          cudaStream_t, const FoldedAppend<__half>&);

}  // namespace surogate::cuda::cached
