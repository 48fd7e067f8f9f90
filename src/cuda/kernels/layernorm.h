// LayerNorm on 16-bit rows (ops/layernorm.h has the formulas and the CPU reference):
//   forward:   mean, rstd = 1 / sqrt(var + eps) (biased variance, two passes over the row in fp32),
//              y = (x − mean) · rstd · w (+ b)
//   backward:  dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)),  g = dy · w,  x̂ = (x − mean) · rstd
//              dw = Σ_rows dy · x̂,  db = Σ_rows dy   (fp32, WRITTEN)
// x, y, dy, dx are T [rows, C] row-major, w and b T [C] (b may be null), mean / rstd fp32 [rows]
// saved by the forward. Any C. One block per row for the row math; the parameter gradients are
// column sums over fixed chunks of rows into `scratch`, then the chunks summed in order: bitwise
// deterministic. A null dweight and dbias skip that pass (no scratch needed then); dx may alias dy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                       int64_t channels, float epsilon, cudaStream_t stream);

// Floats of scratch the backward needs for the parameter gradients.
int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t channels);

template <typename T>
void layernorm_backward(T* dx, float* dweight, float* dbias, float* scratch, const T* dout, const T* x,
                        const T* weight, const float* mean, const float* rstd, int64_t rows, int64_t channels,
                        cudaStream_t stream);

}  // namespace surogate::cuda
