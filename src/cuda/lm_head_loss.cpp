// Chunk loop of the LM head + cross-entropy (see lm_head_loss.h).
#include "cuda/lm_head_loss.h"

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/kernels/cross_entropy.h"

namespace surogate::cuda {

template <typename T>
void lm_head_cross_entropy(Matmul& matmul, const LmHeadLossArgs<T>& a, cudaStream_t stream) {
  CUDA_REQUIRE(a.chunk_rows > 0 && a.rows >= 0 && a.channels > 0 && a.vocab > 0, "lm_head: bad shape");
  CUDA_REQUIRE(a.dweight_out == nullptr || (a.dweight == nullptr && a.rows <= a.chunk_rows),
               "lm_head: a written dW needs the rows in one chunk and no fp32 accumulator");
  if (a.dweight_out != nullptr && a.grad_scale != nullptr && a.rows == 0) {
    CUDA_CHECK(cudaMemsetAsync(a.dweight_out, 0, sizeof(T) * a.vocab * a.channels, stream));  // no GEMM writes it
  }
  for (int64_t start = 0; start < a.rows; start += a.chunk_rows) {
    const int64_t rows = std::min(a.chunk_rows, a.rows - start);
    const T* hidden = a.hidden + start * a.channels;
    MatmulShape logits_shape{.m = rows, .n = a.vocab, .k = a.channels, .transpose_b = true};
    matmul.run(logits_shape, a.logits_workspace, hidden, a.weight, nullptr, stream);
    cross_entropy_forward_backward<T>(a.logits_workspace, a.row_losses + start, a.labels + start, rows, a.vocab,
                                   a.grad_scale, stream, a.weights ? a.weights + start : nullptr);
    if (a.grad_scale == nullptr) continue;
    if (a.dhidden) {
      MatmulShape input_grad{.m = rows, .n = a.channels, .k = a.vocab};
      matmul.run(input_grad, a.dhidden + start * a.channels, a.logits_workspace, a.weight, nullptr, stream);
    }
    if (a.dweight) {
      MatmulShape weight_grad{.m = a.vocab, .n = a.channels, .k = rows, .transpose_a = true,
                              .output = MatmulOutput::Float32, .accumulate = true};
      matmul.run(weight_grad, a.dweight, a.logits_workspace, hidden, nullptr, stream);
    }
    if (a.dweight_out) {
      MatmulShape weight_grad{.m = a.vocab, .n = a.channels, .k = rows, .transpose_a = true};
      matmul.run(weight_grad, a.dweight_out, a.logits_workspace, hidden, nullptr, stream);
    }
  }
  sum_row_losses(a.loss_sum, a.row_losses, a.rows, stream);
}

template void lm_head_cross_entropy(Matmul&, const LmHeadLossArgs<__nv_bfloat16>&, cudaStream_t);
template void lm_head_cross_entropy(Matmul&, const LmHeadLossArgs<__half>&, cudaStream_t);

}  // namespace surogate::cuda
