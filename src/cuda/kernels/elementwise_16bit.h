// Elementwise kernels on the graph's 16-bit element type E, bf16 (__nv_bfloat16) or fp16 (__half):
// add, accumulate, fill, scale (the LoRA rewrite's `scale` / `scale_by`), fp32 → E conversion of
// weight-gradient accumulators and bf16 → fp32 widening for an optimizer reading bf16 gradients,
// plus two one-element products. Every result is computed in fp32 and rounded to nearest even
// once. Plain host launchers on a stream, checked after every launch; no graph headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

template <typename E>
void add_16bit(const E* a, const E* b, E* out, int64_t count, cudaStream_t stream);
// out += gradient (fp32 sum, rounded once).
template <typename E>
void accumulate_16bit(const E* gradient, E* out, int64_t count, cudaStream_t stream);
template <typename E>
void fill_16bit(float value, E* out, int64_t count, cudaStream_t stream);
template <typename E>
void convert_from_f32(const float* in, E* out, int64_t count, cudaStream_t stream);

// out = x · factor (fp32 product of x and float(factor), rounded once to E, bf16 or fp16), as the
// CPU `scale` with its factor rounded to float.
template <typename E>
void scale_16bit(const E* x, float factor, E* out, int64_t count, cudaStream_t stream);
// The same with the factor a device scalar (scale_by: d_loss times a gradient saved in the forward).
template <typename E>
void scale_16bit_by(const E* x, const float* factor, E* out, int64_t count, cudaStream_t stream);

// out[i] = float(in[i]).
void convert_bf16_to_f32(const __nv_bfloat16* in, float* out, int64_t count, cudaStream_t stream);

// out[0] = a[0] · b[0].
void scalar_product(const float* a, const float* b, float* out, cudaStream_t stream);

}  // namespace surogate::cuda
