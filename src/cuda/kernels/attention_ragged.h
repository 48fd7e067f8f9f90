// The ragged-layout description of packed documents that cuDNN's fused attention reads
// (cuda/cudnn_attention.h), built on the device from the per-token document ids, and the fix-up
// that gives padding tokens the CPU op's meaning (each sees only itself) after cuDNN ran them as
// one segment per run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

// Segments of document ids [rows, sequence]: a new one at every row start and wherever the id
// changes, so a run of padding (id −1) is one segment. With n segments (n ≤ slots): for slot
// i < n, lengths[i] is its token count and q/kv/stats_offsets[i] its first token times q_row /
// kv_row / stats_row (element offsets); slots n..slots − 1 are empty and offsets[n..slots] point
// at the end. With n > slots nothing fits: every length is 0 (cuDNN computes nothing) and
// *overflow is 1, which the padding fix-up turns into NaN outputs (the step's finite check
// stops the run rather than training on garbage); else *overflow is 0. One block (a scan over
// all tokens: a few microseconds at 128k). Every product must fit in int32 (the caller checks).
void ragged_segments_from_documents(int32_t* lengths, int32_t* q_offsets, int32_t* kv_offsets,
                                    int32_t* stats_offsets, int32_t* overflow, const int32_t* document_ids,
                                    int64_t rows, int64_t sequence, int64_t slots, int32_t q_row, int32_t kv_row,
                                    int32_t stats_row, cudaStream_t stream);

struct RaggedPaddingShape {
  int64_t tokens = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;
};

// After the forward: for every padding token, out = its own v (softmax over one key) and the
// logsumexp [tokens, q_heads] = its scaled q · k, in fp32 from the 16-bit inputs, as the CPU op.
// With *overflow set, every token's out and logsumexp become NaN. E is __nv_bfloat16 or __half.
template <typename E>
void ragged_padding_forward(E* out, float* logsumexp, const E* q, const E* k, const E* v,
                            const int32_t* document_ids, const int32_t* overflow, const RaggedPaddingShape& shape,
                            cudaStream_t stream);

// After the backward: for every padding token dq = 0, dk = 0 and dv = Σ of d_out over the query
// heads that share its kv head (a one-key softmax passes d_out to v and nothing to q or k). With
// *overflow set, every gradient becomes NaN.
template <typename E>
void ragged_padding_backward(E* dq, E* dk, E* dv, const E* dout, const int32_t* document_ids,
                             const int32_t* overflow, const RaggedPaddingShape& shape, cudaStream_t stream);

}  // namespace surogate::cuda
