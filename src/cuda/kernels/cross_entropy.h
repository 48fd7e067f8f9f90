// Fused softmax + cross-entropy over one chunk of logits, in place.
//
// For each row r of logits (bf16 [rows, V], row stride V) with label y = labels[r] (already
// shifted; -100 or any value outside [0, V) means "ignore"):
//   lse      = log Σ_j exp(logits[r, j])                    (fp32, max-subtracted)
//   loss[r]  = lse − logits[r, y]            (0 for an ignored row)
//   logits[r, j] ← (softmax_j − [j == y]) · grad_scale      (0 for an ignored row)
// The logits buffer becomes dlogits, so the chunk is never stored twice and full-batch logits
// are never materialised (src/cuda/lm_head_loss.h runs the chunks). Per-row losses are written
// (not atomically summed) and summed once at the end in a fixed order: deterministic.
// grad_scale is a device scalar (1 / number of valid labels for a mean loss, computed on the
// device by cross_entropy_gradient_scale so the host never waits); null means forward only
// (logits are left untouched).
// weights (nullable, fp32 [rows]): per-row loss weights (loss_scale strategies); row r's loss and
// gradient are multiplied by weights[r]. Null means 1 and the kernel reads nothing more.
// Work layout: one block of 512 threads per row; two passes over the row (an online max/sum
// pass, then the gradient pass, which re-reads the row from L2); 16-byte vectors when V is a
// multiple of 8, a scalar loop otherwise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

constexpr int32_t kIgnoreIndex = -100;

template <typename T>
void cross_entropy_forward_backward(T* logits, float* row_losses, const int32_t* labels, int64_t rows,
                                    int64_t vocab, const float* grad_scale, cudaStream_t stream,
                                    const float* weights = nullptr);

// valid_count = #labels in [0, V); grad_scale = 1 / max(valid_count, 1).
void cross_entropy_gradient_scale(int32_t* valid_count, float* grad_scale, const int32_t* labels, int64_t rows,
                                  int64_t vocab, cudaStream_t stream);

// loss_sum = Σ row_losses (fixed order; one block).
void sum_row_losses(float* loss_sum, const float* row_losses, int64_t rows, cudaStream_t stream);

}  // namespace surogate::cuda
