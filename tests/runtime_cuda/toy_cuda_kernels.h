// fp32 CUDA kernels for the engine tests' toy ops (tests/compiler/toy_ops.h), written to follow
// the CPU kernels' arithmetic order (one thread per output element or per row), so the CUDA
// backend can be compared closely with the CPU backend on the toy transformer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::testing::toy_cuda {

// out[M,N] = op(a) · op(b), op = transpose when asked; a is [M,K] or [K,M], b [K,N] or [N,K].
void matmul_f32(const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k, bool transpose_a,
                bool transpose_b, cudaStream_t stream);
void tanh_f32(const float* x, float* out, int64_t count, cudaStream_t stream);
void tanh_backward_f32(const float* y, const float* dy, float* dx, int64_t count, cudaStream_t stream);
void norm_f32(const float* x, float* out, float* rstd, int64_t rows, int64_t width, float eps, cudaStream_t stream);
void norm_backward_f32(const float* x, const float* rstd, const float* dy, float* dx, int64_t rows, int64_t width,
                       cudaStream_t stream);

}  // namespace surogate::testing::toy_cuda
