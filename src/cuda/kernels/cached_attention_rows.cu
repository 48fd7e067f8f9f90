// The many-rows kernel of cached attention (cached_attention.h: the op's layouts and when this
// kernel runs; cached_attention_step.cuh: the tensor-core step it shares with the split kernel).
//
// Why: with hundreds of decode rows (GRPO's rollouts, a busy server) the split kernel runs one
// block per (row, kv head), and each block spends much of its short life starting (the row's
// place in the cache, its queries, the first keys' latency) and merging its four warps' states.
// On an H200 (2026-12-01, cached_attention_bench, Qwen3-1.7B's heads, 512 rows): 64 cached tokens
// 112.6 µs (1.2 TB/s), 320 tokens 212.8 (3.2 TB/s), 576 tokens 330.5 (3.7 TB/s), against 4.3 TB/s
// at 4,096; Nsight Compute: 188 registers a thread and 70 KB of shared memory a block, two
// blocks (8 warps) an SM.
//
// Here every warp works alone. Warp w of W (as many as are resident, and at least one for every
// 32 items) takes the items (row, kv head) w, w + W, w + 2W, ... and streams their keys as ONE
// sequence of 16-key steps with two of them in flight, across items: the next item's
// queries and first keys are on their way while the current one ends. A step lands by cp.async
// in the warp's shared stage (K and V rows, and with an item's first step its queries), then
// tensor_step scores it. An item's queries (the row's new positions × the kv head's query heads,
// at most 8: the mma's rows 0-7) are its tile; its output goes from the warp's registers straight
// to `out` when its last step is done. No partials, no combine, no block-wide barrier.
// Against the split kernel in the same call (µs, 512 rows of 1.7B's heads): 64 tokens 111.6 →
// 48.1, 192 → 113.4, 320 212.0 → 176.9, 448 → 240.4, 576 329.2 → 305.0; 8B's heads alike. At
// 4,096 tokens it reads 2.7 % slower (2,009 → 2,063: ten warps an SM hold less in flight than
// the split kernel's blocks once starting costs nothing); cached_attention_uses_rows_kernel does
// not look at lengths, which change every step while a plan's kernel choice may not.
// Deterministic: an item's keys in order by one warp; the bits do not depend on the grid.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/device_attributes.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cached_attention_launch.cuh"
#include "cuda/kernels/cached_attention_step.cuh"
#include "cuda/kernels/element_type.cuh"
#include "cuda/kernels/programmatic_launch.cuh"

namespace surogate::cuda {
namespace cached {
namespace {

// A warp's steps in flight: while it waits for a step, that step and the next are on their way.
// Two stages keep a warp at 22 KB of shared memory (head_dim 128), ten warps an SM; three (six
// warps) and four (five) read slower at every length (512 rows of Qwen3-1.7B's heads on an H200,
// 2026-12-01: 320 tokens 176.9 / 188.8 / 194.9 µs, 4,096 tokens 2,063 / 2,163 / 2,200).
constexpr int kRowsStages = 2;
constexpr int kRowsQueries = 8;        // an item's queries: the mma's rows 0-7
constexpr int kRowsItemsPerWarp = 32;  // an item's place is held by one lane of its warp

template <typename T, int D>
struct RowsShared {
  static constexpr int kStride = kTensorRowStride<D>;
  T keys[kRowsStages][kStepKeys * kStride];
  T values[kRowsStages][kStepKeys * kStride];
  T queries[kRowsStages][kRowsQueries * kStride];
};

// An item's keys and queries, from its row's place in the cache (cache_row) — all a warp needs.
struct RowsItem {
  int64_t row = 0;
  int kv_head = 0;
  CacheRow cache;
  int queries = 0;  // (position, head) pairs of the tile that are real: fresh · group
  int64_t begin = 0, end = 0;
  int steps = 0;  // 16-key steps; 0 when the row brings no query

  __device__ __forceinline__ void derive(const CacheLaunch& launch) {
    queries = static_cast<int>(cache.fresh) * launch.group;
    if (queries <= 0) {
      steps = 0;
      return;
    }
    const SplitKeys range = split_keys(launch, cache, 0, cache.fresh - 1);
    begin = range.begin;
    end = range.end;
    steps = static_cast<int>((end - begin + kStepKeys - 1) / kStepKeys);
  }
};

// Item `ordinal` of this warp, from the lane that loaded it (every lane takes part).
__device__ __forceinline__ RowsItem shuffle_item(const RowsItem& mine, int ordinal, const CacheLaunch& launch) {
  RowsItem item;
  item.row = __shfl_sync(0xffffffffu, mine.row, ordinal);
  item.kv_head = __shfl_sync(0xffffffffu, mine.kv_head, ordinal);
  item.cache.base = __shfl_sync(0xffffffffu, mine.cache.base, ordinal);
  item.cache.held = __shfl_sync(0xffffffffu, mine.cache.held, ordinal);
  item.cache.fresh = __shfl_sync(0xffffffffu, mine.cache.fresh, ordinal);
  item.derive(launch);
  return item;
}

template <typename T, int D>
__global__ void __launch_bounds__(32)
    tensor_rows_kernel(T* out, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
                       const int32_t* cache_lengths, const int32_t* new_lengths, CacheLaunch launch, int64_t items,
                       int64_t warps) {
  wait_for_previous_grid();  // launched programmatically (programmatic_launch.cuh): nothing touched before
  allow_next_grid();
  constexpr int kSteps = D / 16, kPieces = D / 8;
  using Shared = RowsShared<T, D>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Shared& shared = *reinterpret_cast<Shared*>(shared_bytes);
  const CachedAttentionShape& s = launch.shape;
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  const int64_t warp = blockIdx.x;
  if (warp >= items) return;
  const int count = static_cast<int>((items - warp - 1) / warps + 1);  // at most kRowsItemsPerWarp

  // Lane k holds the place of this warp's item k; its padding queries get their zeros here.
  RowsItem mine;
  if (lane < count) {
    const int64_t item = warp + lane * warps;
    mine.row = item / s.kv_heads;
    mine.kv_head = static_cast<int>(item % s.kv_heads);
    mine.cache = cache_row(s, slot_ids, cache_lengths, new_lengths, mine.row);
    mine.derive(launch);
    const int pairs = static_cast<int>(s.sequence) * launch.group;
    for (int flat = max(mine.queries, 0); flat < pairs; ++flat) {
      T* target = out + query_index(s, mine.row, flat / launch.group, mine.kv_head * launch.group + flat % launch.group) * D;
      for (int d = 0; d < D; d += 8) *reinterpret_cast<uint4*>(target + d) = make_uint4(0, 0, 0, 0);
    }
  }
  int total = lane < count ? mine.steps : 0;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);

  const int64_t key_stride = int64_t{s.kv_heads} * D;
  // The issue cursor: the next step to copy (of item `issue_ordinal`), `issued` steps so far,
  // `issued_items` items begun (their queries' buffer).
  int issue_ordinal = 0, issue_step = 0, issued = 0, issued_items = 0;
  RowsItem issuing = shuffle_item(mine, 0, launch);
  while (issuing.steps == 0 && ++issue_ordinal < count) issuing = shuffle_item(mine, issue_ordinal, launch);
  const auto issue = [&]() {
    if (issue_ordinal < count) {
      const int stage = issued % kRowsStages;
      const int64_t base = issuing.begin + int64_t{issue_step} * kStepKeys;
      // Lane l copies 16-byte piece l % kPieces of keys l / kPieces, + 32 / kPieces, ... of the step.
      constexpr int kKeysAPass = 32 / kPieces;
      const int first_key = lane / kPieces, piece = lane % kPieces;
      const int64_t offset = int64_t{issuing.kv_head} * D + 8 * piece;
      const T* keys = k_cache + issuing.cache.base + offset;
      const T* values = v_cache + issuing.cache.base + offset;
      const int64_t first = base + first_key;
      const int valid_keys = static_cast<int>(min(int64_t{kStepKeys}, issuing.end - base));
      T* key_target = shared.keys[stage] + first_key * Shared::kStride + 8 * piece;
      T* value_target = shared.values[stage] + first_key * Shared::kStride + 8 * piece;
#pragma unroll
      for (int pass = 0; pass < kStepKeys / kKeysAPass; ++pass) {
        const int key = first_key + pass * kKeysAPass;
        const bool valid = key < valid_keys;
        const int64_t at = (valid ? first + pass * kKeysAPass : issuing.begin) * key_stride;
        attention::copy_async_16(key_target + pass * kKeysAPass * Shared::kStride, keys + at, valid);
        attention::copy_async_16(value_target + pass * kKeysAPass * Shared::kStride, values + at, valid);
      }
      if (issue_step == 0) {  // the item's queries ride with its first step
        T* buffer = shared.queries[issued_items % kRowsStages];
#pragma unroll
        for (int i = lane; i < kRowsQueries * kPieces; i += 32) {
          const int r = i / kPieces, piece = i % kPieces;
          const bool valid = r < issuing.queries;
          const int64_t query = valid ? query_index(s, issuing.row, r / launch.group,
                                                    issuing.kv_head * launch.group + r % launch.group)
                                      : query_index(s, issuing.row, 0, 0);
          attention::copy_async_16(buffer + r * Shared::kStride + 8 * piece, q + query * D + 8 * piece, valid);
        }
        ++issued_items;
      }
      if (++issue_step == issuing.steps) {
        issue_step = 0;
        do {
          ++issue_ordinal;
          if (issue_ordinal < count) issuing = shuffle_item(mine, issue_ordinal, launch);
        } while (issue_ordinal < count && issuing.steps == 0);
      }
    }
    attention::copy_async_commit();  // one group a step, empty past the end
    ++issued;
  };
#pragma unroll
  for (int ahead = 0; ahead < kRowsStages - 1; ++ahead) issue();

  // The compute cursor: step `step` of item `ordinal`, the `item_index`-th begun.
  int ordinal = 0, step = 0, item_index = 0;
  RowsItem current = shuffle_item(mine, 0, launch);
  while (current.steps == 0 && ++ordinal < count) current = shuffle_item(mine, ordinal, launch);
  uint32_t query[kSteps][4] = {};
  StepMask mask;
  mask.window = s.window;
  mask.scale_log2 = launch.scale_log2;
  WarpSoftmax<D> state;
  for (int done = 0; done < total; ++done) {
    issue();  // step done + kRowsStages - 1
    attention::copy_async_wait<kRowsStages - 1>();  // this step's group is in; the later ones may fly
    __syncwarp();
    if (step == 0) {  // a new item: its queries' A fragments, its mask, a fresh softmax
      const T* buffer = shared.queries[item_index % kRowsStages];
      mask.end = current.end;
      mask.real[0] = g < current.queries;
      mask.position[0] = current.cache.held + g / launch.group;
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        query[k][0] = mask.real[0] ? attention::load_pair(buffer + g * Shared::kStride + 16 * k + 2 * t) : 0u;
        query[k][2] = mask.real[0] ? attention::load_pair(buffer + g * Shared::kStride + 16 * k + 8 + 2 * t) : 0u;
      }
      state.reset();
    }
    const int stage = done % kRowsStages;
    tensor_step<T, D, 1>(state, query, shared.keys[stage], shared.values[stage],
                         current.begin + int64_t{step} * kStepKeys, mask, lane);
    __syncwarp();  // the stage is read before a later step's copies overwrite it
    if (++step < current.steps) continue;
    // The item's last step: a row's sum is spread over the four lanes of its quad.
    float sum = state.sum[0];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (mask.real[0]) {
      const int64_t at = query_index(s, current.row, g / launch.group, current.kv_head * launch.group + g % launch.group);
      T* target = out + at * D + 2 * t;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        *reinterpret_cast<uint32_t*>(target + 8 * j) = kernels::pack_pair<T>(state.acc[j][0] / sum, state.acc[j][1] / sum);
      }
    }
    step = 0;
    ++item_index;
    do {
      ++ordinal;
      if (ordinal < count) current = shuffle_item(mine, ordinal, launch);
    } while (ordinal < count && current.steps == 0);
  }
  attention::copy_async_wait<0>();  // no copy outlives the warp
}

template <typename T, int D>
constexpr int kRowsSharedBytes = static_cast<int>(sizeof(RowsShared<T, D>));

// The kernel's resident warps on this device (its shared memory asked for once per device first).
template <typename T, int D>
int64_t rows_resident_warps() {
  static std::atomic<int64_t> resident[64];
  const int device = current_device();
  CUDA_REQUIRE(device >= 0 && device < 64, "cached attention: device index out of range");
  int64_t known = resident[device].load(std::memory_order_acquire);
  if (known > 0) return known;
  auto kernel = tensor_rows_kernel<T, D>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRowsSharedBytes<T, D>));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  int blocks = 0, multiprocessors = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 32, kRowsSharedBytes<T, D>));
  CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  known = std::max<int64_t>(1, int64_t{blocks} * multiprocessors);
  resident[device].store(known, std::memory_order_release);
  return known;
}

template <typename T>
int64_t resident_warps(int head_dim) {
  return head_dim == 64 ? rows_resident_warps<T, 64>() : rows_resident_warps<T, 128>();
}

// bf16 / fp16 with head_dim 64 or 128, at most 8 queries per kv head, sm_80 and later.
bool tensor_rows_fits(const CachedAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128) return false;
  if (shape.sequence * (shape.q_heads / shape.kv_heads) > kRowsQueries) return false;
  return current_compute_major() >= 8;  // mma.sync, cp.async
}

}  // namespace
}  // namespace cached

bool cached_attention_uses_rows_kernel(const CachedAttentionShape& shape) {
  // (row, kv head) items for at least a quarter of its resident warps. Fewer leave most warps idle,
  // where the split kernel shares a row's keys between blocks; from 64 rows of 8 kv heads (0.39 of
  // its 1,320 warps on an H200) up it read faster than the split kernel at every length measured
  // (2026-12-01, cached_attention_bench: 64 rows × 320 tokens 43.6 → 30.3 µs, × 2,048 147.4 → 135.8;
  // 128 rows 63.1 → 51.2 and 274.5 → 262.6; 256 rows 115.3 → 94.8 and 541.3 → 516.7).
  return cached::tensor_rows_fits(shape) &&
         4 * shape.batch * shape.kv_heads >= cached::resident_warps<__nv_bfloat16>(shape.head_dim);
}

namespace cached {

template <typename T>
void launch_tensor_rows(T* out, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
                        const int32_t* cache_lengths, const int32_t* new_lengths, const CacheLaunch& launch,
                        cudaStream_t stream, int64_t grid_warps) {
  const CachedAttentionShape& shape = launch.shape;
  CUDA_REQUIRE(tensor_rows_fits(shape), "cached attention: the many-rows kernel takes head_dim 64 or 128, at most "
                                        "8 queries per kv head, on sm_80 and later");
  const int64_t items = shape.batch * shape.kv_heads;
  const int64_t wanted = grid_warps > 0 ? grid_warps : resident_warps<T>(shape.head_dim);
  const int64_t warps = std::max(std::min(items, wanted), (items + kRowsItemsPerWarp - 1) / kRowsItemsPerWarp);
  const auto run = [&](auto kernel, int bytes) {
    launch_programmatic(kernel, dim3(static_cast<unsigned>(warps)), dim3(32), bytes, stream, true, out, q, k_cache,
                        v_cache, slot_ids, cache_lengths, new_lengths, launch, items, warps);
  };
  if (shape.head_dim == 64) {
    rows_resident_warps<T, 64>();  // the shared memory asked for before the first launch
    run(tensor_rows_kernel<T, 64>, kRowsSharedBytes<T, 64>);
  } else {
    rows_resident_warps<T, 128>();
    run(tensor_rows_kernel<T, 128>, kRowsSharedBytes<T, 128>);
  }
  CUDA_CHECK_LAUNCH();
}

#define SUROGATE_INSTANTIATE_ROWS(T)                                                                              \
  template void launch_tensor_rows<T>(T*, const T*, const T*, const T*, const int32_t*, const int32_t*,            \
                                      const int32_t*, const CacheLaunch&, cudaStream_t, int64_t);
SUROGATE_INSTANTIATE_ROWS(__nv_bfloat16)
SUROGATE_INSTANTIATE_ROWS(__half)
#undef SUROGATE_INSTANTIATE_ROWS

}  // namespace cached

template <typename T>
void cached_attention_rows_forward(T* out, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
                                   const int32_t* cache_lengths, const int32_t* new_lengths,
                                   const CachedAttentionShape& shape, cudaStream_t stream, int64_t grid_warps) {
  const cached::CacheLaunch launch = cached::cache_launch(shape, 1);
  CUDA_REQUIRE(cached::aligned_16(q) && cached::aligned_16(k_cache) && cached::aligned_16(v_cache) &&
                   cached::aligned_16(out),
               "cached attention: tensors must be 16-byte aligned");
  cached::launch_tensor_rows(out, q, k_cache, v_cache, slot_ids, cache_lengths, new_lengths, launch, stream, grid_warps);
}
template void cached_attention_rows_forward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                           const __nv_bfloat16*, const int32_t*, const int32_t*,
                                                           const int32_t*, const CachedAttentionShape&, cudaStream_t,
                                                           int64_t);
template void cached_attention_rows_forward<__half>(__half*, const __half*, const __half*, const __half*, const int32_t*,
                                                    const int32_t*, const int32_t*, const CachedAttentionShape&,
                                                    cudaStream_t, int64_t);

}  // namespace surogate::cuda
