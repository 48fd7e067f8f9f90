// Chunked LM head + cross-entropy: loss and gradients without ever holding [rows, V] logits.
//
// For each chunk of `chunk_rows` rows of hidden (bf16 [rows, C]) against the head weight
// W (bf16 [V, C], PyTorch layout):
//   1. logits[chunk, V] = hidden_chunk · Wᵀ                  (cuBLASLt, bf16 out, fp32 accumulate)
//   2. fused softmax-CE in place: per-row loss, logits → dlogits · grad_scale (cross_entropy.h)
//   3. dhidden_chunk = dlogits · W                          (cuBLASLt, bf16 out)       if dhidden
//   4. dW += dlogitsᵀ · hidden_chunk                        (cuBLASLt, fp32, beta = 1) if dweight
//      or dW = dlogitsᵀ · hidden                            (cuBLASLt, T out)          if dweight_out
// then loss_sum = Σ row losses (fixed order). Peak extra memory is chunk_rows · V bf16.
// dweight_out is for rows in one chunk (rows <= chunk_rows): the one weight-gradient GEMM writes
// the 16-bit result itself (cuBLASLt accumulates in fp32 inside and rounds once), so the caller
// needs no fp32 [V, C] accumulator, no zeroing and no rounding pass; with no rows it is zeroed.
// T, the 16-bit type of hidden, W, the logits and dhidden, is __nv_bfloat16 or __half (fp16: a
// logit or dlogit past 65504 becomes ±inf, as fp16 training's step guard expects).
// grad_scale (device scalar) is typically 1 / valid-label count over the whole optimizer step
// (cross_entropy_gradient_scale); null means forward only (no gradients, steps 3–4 skipped).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/matmul.h"

namespace surogate::cuda {

template <typename T>
struct LmHeadLossArgs {
  const T* hidden = nullptr;  // [rows, channels]
  const T* weight = nullptr;  // [vocab, channels]
  const int32_t* labels = nullptr;        // [rows], shifted, -100 = ignore
  const float* weights = nullptr;         // [rows] loss weights (loss_scale strategies), or null for 1
  int64_t rows = 0;
  int64_t channels = 0;
  int64_t vocab = 0;
  int64_t chunk_rows = 0;
  T* logits_workspace = nullptr;  // [chunk_rows, vocab]
  float* row_losses = nullptr;                // [rows]
  float* loss_sum = nullptr;                  // 1 float
  const float* grad_scale = nullptr;          // device scalar, or null for forward only
  T* dhidden = nullptr;           // [rows, channels], overwritten; may be null
  float* dweight = nullptr;                   // [vocab, channels], accumulated; may be null (frozen head)
  T* dweight_out = nullptr;       // [vocab, channels], written; one chunk only, exclusive with dweight
};

using LmHeadLossArguments = LmHeadLossArgs<__nv_bfloat16>;

template <typename T>
void lm_head_cross_entropy(Matmul& matmul, const LmHeadLossArgs<T>& arguments, cudaStream_t stream);

}  // namespace surogate::cuda
