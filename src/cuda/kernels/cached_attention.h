// Attention of new tokens over a KV cache on the GPU: the kernels behind the op cached_attention
// (ops/cached_attention.h is the reference and defines the semantics; the layouts are its own).
//
//   q, out [B, T, Hq, D]; k, v [B, T, Hkv, D] (the new tokens); k_cache, v_cache [N, S, Hkv, D];
//   slot_ids, cache_lengths, new_lengths int32 [B] on the device. Row b is slot slot_ids[b]
//   holding L = cache_lengths[b] tokens; its first n = new_lengths[b] new tokens are real.
//
// cached_attention_append copies k[b, t], v[b, t] (t < n) to the cache at [slot, L + t].
// cached_attention_forward then lets query t < n (position L + t) attend over the slot's keys
// 0 .. L + t (window > 0: only keys > L + t − window); padding queries (t ≥ n) get zeros.
//
// The device cannot raise: a row the reference refuses (slot outside [0, N), n outside [0, T],
// L < 0 or L + n > S) is skipped by both kernels (nothing appended, zero output) instead of
// touching memory outside the cache; the caller checks rows on the host
// (ops::check_cache_rows) where it can. Two rows naming one slot is not detected here.
//
// Design (flash-decoding; fp32 math and accumulation whatever the element type):
//   split kernel: one block (4 warps, CUDA cores) per (kv head × query tile, key split, row). A
//     query tile is 1, 2, 4 or 8 queries of one kv head (the smallest power of two holding
//     T · Hq / Hkv, at most 8): the (new position, query head of the group) pairs in order, so
//     GQA heads share every key the block loads (decode with GQA 4: tiles of 4). A lane group of
//     D / 8 lanes (rounded up to a power of two) owns one key at a time, each lane 8 elements of
//     it (16-byte loads of K and V); the dot product is finished with xor shuffles inside the
//     group, which keeps its own online softmax (exp2 domain, one rescale per chunk of 4 keys, 2
//     with 8-query tiles). The groups' states are merged in group order through shared memory
//     into the split's partial (max, sum, unnormalised accumulator) in an fp32 workspace.
//     Each row divides the keys its tile can see evenly between the splits (at least 128 keys a
//     split), so a row uses every split block whatever its length.
//   tensor-core split kernel (cached_attention_tensor.cu): bf16 / fp16 with head_dim 64 or 128
//     on sm_80 and later take it instead: tiles of 16 queries as the rows of mma.sync m16n8k16
//     products, each warp stepping over 16 keys (K and V copied to shared tiles by cp.async a
//     few steps ahead, read by ldmatrix), the probabilities rounded to the element type for the
//     value product. On an H200 it reads the cache 1.6× (GQA 2) to 4.3× (GQA 4) faster than the
//     CUDA-core kernel at 512 decode rows.
//   Only the splits that hold keys for a tile run and are combined (split_keys in
//   cached_attention_launch.cuh: at least 128 keys a split); with one split the split kernel
//   writes the output itself and no combine runs.
//   combine kernel: per (row, position, head, element), the splits' partials merged in order.
//   many-rows kernel (cached_attention_rows.cu): with (row, kv head) items for at least a quarter
//     of its resident warps (from about 40 decode rows: GRPO's rollouts, a busy server) and at
//     most 8 queries per kv head, each warp streams whole items' keys on tensor cores, the next
//     item's first keys in flight while one ends: no splits, no combine.
// Deterministic: fixed split count, fixed reduction orders; which kernel runs depends on the shape
// and the GPU only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

struct CachedAttentionShape {
  int64_t batch = 0;     // B
  int64_t sequence = 0;  // T
  int64_t slots = 0;     // N
  int64_t capacity = 0;  // S
  int q_heads = 0, kv_heads = 0;
  int head_dim = 0;      // a multiple of 8, at most 256
  int window = 0;        // 0 = full causal
  float scale = 0.0f;    // 0 means 1 / sqrt(head_dim)
};

// Splits of the key range for a shape on a GPU with `multiprocessors` SMs: enough blocks for about
// four per SM, no more than the capacity has 32-key pieces, at most 256.
int cached_attention_splits(const CachedAttentionShape& shape, int multiprocessors);
// The same for the current device.
int cached_attention_splits(const CachedAttentionShape& shape);

// fp32 workspace floats cached_attention_forward needs with `splits`.
int64_t cached_attention_workspace_floats(const CachedAttentionShape& shape, int splits);

// T is float, __nv_bfloat16 or __half.
template <typename T>
void cached_attention_append(T* k_cache, T* v_cache, const T* k, const T* v, const int32_t* slot_ids,
                             const int32_t* cache_lengths, const int32_t* new_lengths,
                             const CachedAttentionShape& shape, cudaStream_t stream);

// Reads the cache after the append (run cached_attention_append first on the same stream).
template <typename T>
void cached_attention_forward(T* out, float* workspace, const T* q, const T* k_cache, const T* v_cache,
                              const int32_t* slot_ids, const int32_t* cache_lengths, const int32_t* new_lengths,
                              const CachedAttentionShape& shape, int splits, cudaStream_t stream);

// Whether cached_attention_forward runs the many-rows kernel for `shape` on the current device
// (bf16 / fp16; the split kernels otherwise).
bool cached_attention_uses_rows_kernel(const CachedAttentionShape& shape);

// The many-rows kernel alone, whatever the row count (tests, benches): bf16 / fp16, head_dim 64 or
// 128, at most 8 queries per kv head (sequence · q_heads / kv_heads), sm_80 and later; reads the
// cache after the append, as cached_attention_forward does. `grid_warps` 0: as many warps as are
// resident; fewer give each warp more (row, kv head) items (at most 32 a warp) — the same bits.
template <typename T>
void cached_attention_rows_forward(T* out, const T* q, const T* k_cache, const T* v_cache, const int32_t* slot_ids,
                                   const int32_t* cache_lengths, const int32_t* new_lengths,
                                   const CachedAttentionShape& shape, cudaStream_t stream, int64_t grid_warps = 0);

// The append and the forward, the same bits as the two calls. A step of at most
// kCachedAttentionFoldedTokens tokens (B · T: a decode step of one or two rows) on the tensor-core
// split kernel takes ONE launch less: its split blocks read the new keys and values from k / v and
// its first split of each (row, kv head) writes them to the caches (one Qwen3-8B request's decode
// layer, 2026-11-30: ~3 µs less). More tokens run the two calls (folded, every first-split block
// waited on its copy: 512 rows × 320 tokens 188 → 199 µs).
inline constexpr int64_t kCachedAttentionFoldedTokens = 2;
template <typename T>
void cached_attention_append_forward(T* out, float* workspace, const T* q, const T* k, const T* v, T* k_cache,
                                     T* v_cache, const int32_t* slot_ids, const int32_t* cache_lengths,
                                     const int32_t* new_lengths, const CachedAttentionShape& shape, int splits,
                                     cudaStream_t stream);

// Qwen3's per-head q and k RMSNorm + RoPE (qk_norm_rope.h's forward: full rotary) applied by the
// attention itself (cached_attention_norm_rope_append_forward).
template <typename T>
struct CachedNormRope {
  const T* q_weight = nullptr;            // [D]
  const T* k_weight = nullptr;            // [D]
  const float* inv_freq = nullptr;        // [D / 2], on the device
  const int32_t* position_ids = nullptr;  // [B · T]
  float epsilon = 1e-6f;
  float scaling = 1.0f;  // HF attention_scaling on cos / sin
};

// Whether cached_attention_norm_rope_append_forward takes the head size (qk_norm_rope.h's kernels:
// 16, 32, 64, 128 or 256).
bool cached_attention_norm_rope_takes(const CachedAttentionShape& shape);

// Bytes of scratch cached_attention_norm_rope_append_forward may use beside the workspace (the
// normalised q and k and their rstd, where the norm is not folded into the attention's launch).
int64_t cached_attention_norm_rope_scratch_bytes(const CachedAttentionShape& shape);

// qk_norm_rope_forward_pair of q and k with `norm`, then cached_attention_append_forward of the
// results: the same bits as those calls. A step of at most kCachedAttentionFoldedTokens tokens on
// the tensor-core split kernel is ONE launch: each split block normalises and rotates its tile's
// queries and the row's new keys into shared memory (every block its own copy; a decode step's
// q/k norm launch was 2.9 µs of a Qwen3-8B layer, 2026-11-30), the first split of each (row, kv
// head) writing the keys to the cache. Other steps run the pair launch into `scratch`, then the
// attention. T is __nv_bfloat16 or __half; q, k, v are read only.
template <typename T>
void cached_attention_norm_rope_append_forward(T* out, float* workspace, void* scratch, const T* q, const T* k,
                                               const T* v, T* k_cache, T* v_cache, const int32_t* slot_ids,
                                               const int32_t* cache_lengths, const int32_t* new_lengths,
                                               const CachedNormRope<T>& norm, const CachedAttentionShape& shape,
                                               int splits, cudaStream_t stream);

}  // namespace surogate::cuda
