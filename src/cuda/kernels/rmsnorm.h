// RMSNorm and the fused residual-add + RMSNorm of pre-norm decoder blocks.
//
//   forward:            y = x · rstd · w,  rstd = 1 / sqrt(mean(x²) + eps)        (per row)
//   residual forward:   r = residual + x (rounded to bf16, saved), y = rmsnorm(r)
//   backward:           dx = rstd · (g − x̂ · mean(g · x̂)) + dresidual,  g = dy · w,  x̂ = x · rstd
//                       dw += Σ_rows dy · x̂
//
// Rows are [rows, C] row-major bf16, w is bf16 [C]; rstd (fp32 [rows]) is saved by the forward
// and reused by the backward, which takes the normalised input (x, or r for the fused form).
// For the fused form the residual stream's gradient is dx itself (r = residual + x feeds both),
// so the backward adds the gradient arriving along the residual stream (`dresidual`, may be
// null) and returns one tensor. `dinput` may alias `dresidual`.
//
// Layout of the work: one block per row; each thread keeps up to 4 vectors of 8 channels in
// registers (so x is read once), C must be a multiple of 8 and at most 32768. The backward
// runs a fixed grid of min(rows, 512) blocks, each accumulating its rows' dw in registers and
// writing one fp32 partial row to `scratch`; a second kernel sums the partials in a fixed
// order into dweight (fp32, +=). Bitwise deterministic. A null dweight (frozen weight) skips
// the partials and the second kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/fp8_quantize.h"

namespace surogate::cuda {

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* input, const T* weight,
                     int64_t rows, int64_t channels, float epsilon, cudaStream_t stream);

// residual_out = residual_in + input; out = rmsnorm(residual_out). residual_out may alias residual_in.
template <typename T>
void residual_rmsnorm_forward(T* out, T* residual_out, float* rstd,
                              const T* residual_in, const T* input,
                              const T* weight, int64_t rows, int64_t channels, float epsilon,
                              cudaStream_t stream);

// The same, bf16, also writing the E4M3 codes of `out` for the fp8_hybrid recipe (fp8_quantize.h's
// Fp8Output: bit for bit the forward then fp8_record_amax + fp8_quantize of `out`). `out` may be
// null when nothing reads the bf16 values (full fine-tuning: the projections read the codes) and
// fp8_out.delayed_known (no pending pass reads them either).
void rmsnorm_forward_fp8(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* input, const __nv_bfloat16* weight,
                         int64_t rows, int64_t channels, float epsilon, const Fp8Output& fp8_out, cudaStream_t stream);
void residual_rmsnorm_forward_fp8(__nv_bfloat16* out, __nv_bfloat16* residual_out, float* rstd,
                                  const __nv_bfloat16* residual_in, const __nv_bfloat16* input,
                                  const __nv_bfloat16* weight, int64_t rows, int64_t channels, float epsilon,
                                  const Fp8Output& fp8_out, cudaStream_t stream);

// Floats of scratch the backward needs.
int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t channels);

// dresidual may be a plain nullptr (not deduced; the kernels' .cu files are C++17).
template <typename T>
struct NonDeduced {
  using type = T;
};
template <typename T>
void rmsnorm_backward(T* dinput, float* dweight, float* scratch, const T* dout,
                      const typename NonDeduced<T>::type* dresidual, const T* input, const T* weight,
                      const float* rstd, int64_t rows, int64_t channels, cudaStream_t stream);

// The backward in bf16, also writing the codes of dinput in fp8_out.format (the fp8_hybrid
// recipe's gradient; fp8_quantize.h's Fp8Output): bit for bit the backward then fp8_record_amax +
// fp8_quantize of dinput. dweight and scratch as rmsnorm_backward's (both null: a frozen weight).
void rmsnorm_backward_fp8(__nv_bfloat16* dinput, float* dweight, float* scratch, const __nv_bfloat16* dout,
                          const __nv_bfloat16* dresidual,
                          const __nv_bfloat16* input, const __nv_bfloat16* weight, const float* rstd, int64_t rows,
                          int64_t channels, const Fp8Output& fp8_out, cudaStream_t stream);

}  // namespace surogate::cuda
