// Flash attention (forward and backward) for causal decoder training on packed documents.
//
// Layouts (row-major, bf16): q, out, dq [tokens, q_heads, head_dim]; k, v, dk, dv
// [tokens, kv_heads, head_dim]; all tokens of a batch are flattened (B·T) and
// cu_seqlens (int32 [documents + 1], 0 … tokens) marks the packed documents.
// A query i sees key j iff j ≤ i, j is in i's document, and (window > 0 only) i − j < window;
// with causal = false (a vision tower's attention, no window) iff j is in i's document.
// GQA: q head h reads kv head h / (q_heads / kv_heads). logsumexp (fp32 [q_heads, tokens],
// natural log, of the scaled scores) is saved by the forward for the backward.
//
// Kernels: FlashAttention-2 style, tensor cores through mma.sync m16n8k16 (bf16 in, fp32
// accumulate; sm_80+, wgmma not used yet), head_dim 32, 64 or 128.
//   forward:  a block of 4 warps owns 64 query rows of one head (16 per warp, Q fragments in
//             registers) and walks 64-key tiles of K and V through shared memory (rows padded
//             by 16 bytes: conflict-free fragment loads; V read with ldmatrix.trans). Online
//             softmax in the exp2 domain; P goes from the score accumulators straight into
//             the A operand of P·V without touching shared memory. Only key tiles that some
//             row of the block can see are visited (causal + document + window bounds).
//   backward: delta = rowsum(dO ∘ O) first; then a block owns 64 keys (4 warps × 16; 128 keys
//             and 8 warps on request, head_dim 64/128) of one kv head, dK/dV accumulated in
//             registers over every 32-query tile that can see those keys, for each q head of the
//             group in turn (fixed order: dK and dV are bitwise deterministic). Blocks start with
//             every batch row's heaviest causal key blocks (AttentionShape::sequence). The
//             PerQueryHead variant runs one block per (q head, key block) and sums fp32 dK/dV
//             partials of the group in a fixed order after. dQ is accumulated with fp32 atomics
//             into a workspace and converted to bf16 at the end: dQ is NOT bitwise
//             deterministic (rounding-level differences).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/fp8_quantize.h"

namespace surogate::cuda {

struct AttentionShape {
  int64_t tokens = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int documents = 0;        // entries of cu_seqlens minus one
  int window = 0;           // sliding window in tokens; 0 = unlimited
  float softmax_scale = 0;  // usually 1 / sqrt(head_dim)
  int sequence = 0;         // tokens per batch row (the backward starts every row's heavy blocks
                            // first); 0 = unknown
  int64_t logsumexp_stride = 0;  // backward: floats from one head's logsumexp row to the next; 0 =
                                 // tokens (a backward over a slice of the batch rows, attn_bwd_chunks,
                                 // reads its columns of the whole batch's [q_heads, B·T] logsumexp)
  bool causal = true;            // false: bidirectional within each document (window must be 0;
                                 // the default blocks per SM and backward split only)
};

// How the backward splits its work: one block per (kv head, key block) walking every q head of
// the group (the default), or per (q head, key block) with fp32 dK / dV partials summed after.
enum class AttentionBackwardBlocks { WholeGroup, PerQueryHead };

// blocks_per_sm: 0 is the default, 3: the Q tile shares a K buffer so three blocks fit per SM (H100,
// 2026-11-23: 8B job shape 175 -> 211 TFLOP/s, same bits); 2 keeps the earlier kernel, selectable to
// test and measure both.
template <typename T>
void attention_forward(T* out, float* logsumexp, const T* q, const T* k,
                       const T* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                       cudaStream_t stream, int blocks_per_sm = 0);

// The same (bf16, the default blocks per SM), also writing the output's E4M3 codes for the
// fp8_hybrid recipe (fp8_quantize.h's Fp8Output; o_proj's input): bit for bit the forward then
// fp8_record_amax + fp8_quantize of `out`.
void attention_forward_fp8(__nv_bfloat16* out, float* logsumexp, const __nv_bfloat16* q, const __nv_bfloat16* k,
                           const __nv_bfloat16* v, const int32_t* cu_seqlens, const AttentionShape& shape,
                           const Fp8Output& fp8_out, cudaStream_t stream);

// fp32 workspace the backward needs for a work split: the dQ accumulator and delta (tokens ×
// q_heads × (head_dim + 1) floats) and, for the PerQueryHead split with GQA, the dK / dV partials
// (2 × tokens × q_heads × head_dim more).
int64_t attention_backward_workspace_floats(const AttentionShape& shape,
                                            AttentionBackwardBlocks blocks = AttentionBackwardBlocks::WholeGroup);

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, float* workspace,
                        const T* dout, const T* q, const T* k,
                        const T* v, const T* out, const float* logsumexp,
                        const int32_t* cu_seqlens, const AttentionShape& shape, cudaStream_t stream,
                        int key_block_warps = 0,  // 0: the tuned default; 4 or 8 to measure both
                        AttentionBackwardBlocks blocks = AttentionBackwardBlocks::WholeGroup);

}  // namespace surogate::cuda
