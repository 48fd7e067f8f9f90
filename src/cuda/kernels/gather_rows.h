// Prompt sharing's row gathers on the GPU (ops/gather_rows.h is the reference): rows of `width`
// elements moved between a micro-batch's two layouts. gather_rows copies bytes (any element type:
// `element_bytes`); gather_rows_sum adds up to `fan_in` rows of bf16 / fp16 / fp32 in fp32, in k
// order, and rounds once. 16-byte units where every row's bytes allow, else element by element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace surogate::cuda {

void gather_rows(const void* x, const int32_t* index, int64_t y_rows, int64_t width, int element_bytes, void* y,
                 cudaStream_t stream);

// E: __nv_bfloat16, __half or float.
template <typename E>
void gather_rows_sum(const E* d_y, const int32_t* sources, int64_t x_rows, int64_t fan_in, int64_t width, E* d_x,
                     cudaStream_t stream);

}  // namespace surogate::cuda
